package provider

import "context"

// Message is one chat message sent to the model.
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// Request is one model call.
type Request struct {
	Model     string
	Messages  []Message
	MaxTokens int // 0 leaves the limit to the provider
	// IdempotencyKey is sent as the Idempotency-Key header so that a provider
	// that honours it can deduplicate a repeated call; Tollgate uses
	// "{task_id}:{attempt}".
	IdempotencyKey string
	// JSONMode asks for a JSON answer with the provider's JSON mode where it
	// has one (OpenAI and Workers AI response_format); Anthropic has none,
	// and the prompt must ask for JSON.
	JSONMode bool
}

// Usage is the token count the provider reported for one call.
type Usage struct {
	InputTokens  int64
	OutputTokens int64
}

// Response is a successful model call.
type Response struct {
	Content      string
	Model        string // model name the provider reports; empty if it reported none
	FinishReason string
	Usage        *Usage // nil when the provider reported no usage
	Status       int    // HTTP status
}

// Client makes one model call.
type Client interface {
	// Complete sends req once, without retrying. On failure it returns a nil
	// Response and an error that is always a *Error, whose Class says what the
	// caller may do next.
	Complete(ctx context.Context, req Request) (*Response, error)
}
