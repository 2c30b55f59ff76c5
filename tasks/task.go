package tasks

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/tollgate/tollgate/budget"
	"github.com/tollgate/tollgate/provider"
)

// Status is where a task is in its life. Exactly one at a time.
type Status string

// The statuses. Succeeded, failed and canceled are final.
const (
	StatusQueued    Status = "queued"
	StatusRunning   Status = "running"
	StatusSucceeded Status = "succeeded"
	StatusFailed    Status = "failed"
	StatusCanceled  Status = "canceled"
)

// Final reports whether no further change can happen.
func (s Status) Final() bool {
	return s == StatusSucceeded || s == StatusFailed || s == StatusCanceled
}

// Errors returned by this package.
var (
	ErrNotFound = errors.New("tasks: not found")
	// ErrIdempotencyKeyReused: the key names an earlier task whose request
	// differs. Nothing was changed.
	ErrIdempotencyKeyReused = errors.New("tasks: idempotency key reused with a different request")
	// ErrInvalidCursor: a list cursor that this service did not issue.
	ErrInvalidCursor = errors.New("tasks: invalid cursor")
)

// FieldError names one invalid field of a request.
type FieldError struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

// ValidationError lists every problem found in a request, so a client can
// fix them all at once.
type ValidationError struct {
	Fields []FieldError
}

func (e *ValidationError) Error() string {
	parts := make([]string, len(e.Fields))
	for i, f := range e.Fields {
		parts[i] = f.Field + ": " + f.Message
	}
	return "tasks: invalid request: " + strings.Join(parts, "; ")
}

// Limits bound what a request may ask for.
const (
	MaxMessages    = 1000
	MaxModelLength = 200
	MaxMaxTokens   = 1_000_000
	MaxKeyLength   = 255
	MaxDeadlineS   = 7 * 24 * 3600
)

// Request is what a client asks for. Its canonical form is hashed to
// recognise retries; it is stored redacted, and sealed for the worker.
//
// The chat itself is provider.Chat, under OpenAI's names; a request that
// uses none of its newer fields encodes, and hashes, as it always has.
type Request struct {
	provider.Chat
	Metadata map[string]any `json:"metadata,omitempty"`
	// JSONMode asks the provider for a JSON answer (its JSON mode).
	JSONMode bool `json:"json_mode,omitempty"`
	// DeadlineS bounds the task's whole life, queueing and retries
	// included; 0 takes the service default (1 h).
	DeadlineS int `json:"deadline_s,omitempty"`
	// Conversation is set for a request made through OpenAI's Responses
	// API (conversation.go); it is never sent to a provider.
	Conversation *Conversation `json:"conversation,omitempty"`
	// Embedding makes the request an embeddings call (embed.go): on the
	// model Model names, no messages and no other chat field. Absent, a
	// chat request encodes and hashes as it did before it existed.
	Embedding *provider.Embedding `json:"embedding,omitempty"`
}

// Validate returns a *ValidationError listing every problem, or nil.
func (r Request) Validate() error {
	if r.Embedding != nil {
		return r.validateEmbedding()
	}
	var fe []FieldError
	if len(r.Model) > MaxModelLength {
		fe = append(fe, FieldError{"model", fmt.Sprintf("must be at most %d characters", MaxModelLength)})
	}
	if len(r.Messages) == 0 {
		fe = append(fe, FieldError{"messages", "must hold at least one message"})
	}
	if len(r.Messages) > MaxMessages {
		fe = append(fe, FieldError{"messages", fmt.Sprintf("must hold at most %d messages", MaxMessages)})
	}
	if r.MaxTokens < 0 || r.MaxTokens > MaxMaxTokens {
		fe = append(fe, FieldError{"max_tokens", fmt.Sprintf("must be between 1 and %d", MaxMaxTokens)})
	}
	fe = append(fe, checkChat(r.Canonical().Chat)...)
	if r.JSONMode && r.ResponseFormat != nil {
		fe = append(fe, FieldError{"json_mode", "set either json_mode or response_format, not both"})
	}
	if r.DeadlineS < 0 || r.DeadlineS > MaxDeadlineS {
		fe = append(fe, FieldError{"deadline_s", fmt.Sprintf("must be between 1 and %d seconds", MaxDeadlineS)})
	}
	if fe != nil {
		return &ValidationError{Fields: fe}
	}
	return nil
}

// ValidIdempotencyKey reports whether key is 1–255 printable ASCII
// characters.
func ValidIdempotencyKey(key string) bool {
	if len(key) == 0 || len(key) > MaxKeyLength {
		return false
	}
	for i := 0; i < len(key); i++ {
		if key[i] < 0x20 || key[i] > 0x7e {
			return false
		}
	}
	return true
}

// Hash returns the SHA-256 of the request's canonical JSON (Canonical).
// encoding/json writes struct fields in declaration order and map keys
// sorted, and Canonical sorts the keys of the JSON values the request
// carries (schemas, passthrough fields), so equal requests hash equally
// whatever order their JSON keys arrived in. Every field that reaches the
// provider is part of it, so the same key with any change is refused.
func (r Request) Hash() []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(r.Canonical().hashView()); err != nil {
		// A decoded request always re-encodes; failing here is a bug.
		panic(fmt.Sprintf("tasks: encode request: %v", err))
	}
	sum := sha256.Sum256(buf.Bytes())
	return sum[:]
}

// Canonical returns the request as it is stored and hashed: tool
// parameters, json_schema schemas and passthrough values in canonical
// JSON (provider.CanonicalJSON), a null schema as none, and n = 1 as unset, which asks the same
// of the provider. It shares nothing it changes with r. A value that is
// not valid JSON is left as it is, for Validate to report.
func (r Request) Canonical() Request {
	canon := func(raw json.RawMessage) json.RawMessage {
		if raw == nil {
			return nil
		}
		if c, err := provider.CanonicalJSON(raw); err == nil {
			return c
		}
		return raw
	}
	schema := func(raw json.RawMessage) json.RawMessage {
		if raw = canon(raw); string(raw) == "null" {
			return nil // as if absent, as null is for every other field
		}
		return raw
	}
	if r.N == 1 {
		r.N = 0
	}
	if r.Embedding != nil {
		r.Embedding = canonicalEmbedding(*r.Embedding)
	}
	if r.Tools != nil {
		tools := make([]provider.Tool, len(r.Tools))
		for i, t := range r.Tools {
			t.Function.Parameters = schema(t.Function.Parameters)
			tools[i] = t
		}
		r.Tools = tools
	}
	if rf := r.ResponseFormat; rf != nil && rf.JSONSchema != nil {
		js := *rf.JSONSchema
		js.Schema = schema(js.Schema)
		r.ResponseFormat = &provider.ResponseFormat{Type: rf.Type, JSONSchema: &js}
	}
	if r.Extra != nil {
		extra := make(map[string]json.RawMessage, len(r.Extra))
		for k, v := range r.Extra {
			extra[k] = canon(v)
		}
		r.Extra = extra
	}
	return r
}

// Usage is a task's token usage and where the figures came from.
//
// InputTokens and OutputTokens are the totals; the classes say how many of
// them were read from or written to the provider's prompt cache, and how
// many of the output were reasoning. Each class is priced apart.
type Usage struct {
	InputTokens       int64         `json:"input_tokens"`
	OutputTokens      int64         `json:"output_tokens"`
	CachedInputTokens int64         `json:"cached_input_tokens,omitempty"`
	CacheWriteTokens  int64         `json:"cache_write_tokens,omitempty"`
	ReasoningTokens   int64         `json:"reasoning_tokens,omitempty"`
	Source            budget.Source `json:"source"`
}

// Result is a succeeded task's output.
type Result struct {
	// Output is the first choice's text, as Message.Content.
	Output string `json:"output"`
	// Message is the first choice's assistant message: its text, the tool
	// calls the model asked for and its refusal.
	Message *provider.Message `json:"message,omitempty"`
	// Choices holds every choice when the request asked for more than one
	// (n > 1); the first is also Message.
	Choices []Choice `json:"choices,omitempty"`
	// Logprobs is the first choice's logprobs, when asked and given.
	Logprobs          json.RawMessage `json:"logprobs,omitempty"`
	Model             string          `json:"model"`
	SystemFingerprint string          `json:"system_fingerprint,omitempty"`
	FinishReason      string          `json:"finish_reason,omitempty"`
	// StopReason is the provider's own stop reason, when the finish
	// reason does not say it (Anthropic's stop_sequence, say), and
	// StopSequence the stop sequence that ended the answer. Both are
	// sealed with the answer, as the message is.
	StopReason   string `json:"stop_reason,omitempty"`
	StopSequence string `json:"stop_sequence,omitempty"`
	// Native is the provider's answer as it sent it, when the request was
	// carried natively (provider.Native): sealed with the answer, so a
	// replay answers the same bytes; never in the task's JSON.
	Native     *provider.NativeAnswer `json:"-"`
	Usage      Usage                  `json:"usage"`
	CostMicros int64                  `json:"cost_micros"`
	// Embedding is an embeddings task's answer (embed.go); its vectors
	// are sealed beside the result, never in it.
	Embedding *EmbeddingResult `json:"embedding,omitempty"`

	sealedOutput []byte // stored beside the result (output_sealed), never in it
	sealedAnswer []byte // likewise (answer_sealed); nil for a text-only answer
}

// Choice is one of a task's answers when it asked for several.
type Choice struct {
	Index        int              `json:"index"`
	Message      provider.Message `json:"message"`
	FinishReason string           `json:"finish_reason,omitempty"`
	Logprobs     json.RawMessage  `json:"logprobs,omitempty"`
	StopReason   string           `json:"stop_reason,omitempty"`
	StopSequence string           `json:"stop_sequence,omitempty"`
}

// Failure is why a task failed, in stable terms a client can act on. It
// never carries a provider's own message.
type Failure struct {
	Code      string `json:"code"`
	Class     string `json:"class"`
	Retryable bool   `json:"retryable"`
	Message   string `json:"message"`
	// Moderated: the model or the provider's moderation declined to answer.
	Moderated bool `json:"moderated,omitempty"`
}

// Task is one model task as clients see it.
type Task struct {
	ID       string `json:"id"`
	OwnerID  string `json:"-"`
	Workload string `json:"-"`
	// CancelRequested: the owner canceled while a call was in flight; the
	// task is canceled when the call returns.
	CancelRequested bool           `json:"cancel_requested"`
	Status          Status         `json:"status"`
	IdempotencyKey  string         `json:"idempotency_key"`
	Model           string         `json:"model"`
	Attempts        int            `json:"attempts"`
	ReservedMicros  int64          `json:"reserved_micros"`
	CreatedAt       time.Time      `json:"created_at"`
	UpdatedAt       time.Time      `json:"updated_at"`
	FinishedAt      *time.Time     `json:"finished_at"`
	DeadlineAt      time.Time      `json:"deadline_at"`
	Result          *Result        `json:"result"`
	Error           *Failure       `json:"error"`
	Metadata        map[string]any `json:"metadata"`
	// CostMicros is what the task was charged, read from its settlement
	// whatever its status: a canceled task whose call returned and a
	// failed one settled as possibly charged cost money too, with no
	// result to say so. Nil until settled, and for a task released
	// without charge.
	CostMicros *int64  `json:"cost_micros"`
	Request    Request `json:"-"` // as stored: redacted under the owner's policy; only its metadata when read to answer a client (clientViewColumns)
	// BodiesErasedAt: retention or a deletion erased the task's bodies.
	BodiesErasedAt *time.Time `json:"-"`

	// Route and PromptVersion are set for route calls.
	Route         *string `json:"-"`
	PromptVersion *string `json:"-"`
	maxAttempts   *int    // per-task attempt bound, else the service's
	callTimeoutMS *int    // per-task call deadline, else the service's

	payload      []byte // the sealed raw request
	outputSealed []byte // the sealed output
	answerSealed []byte // the sealed rest of the answer (answer.go)
	policy       string // the owner's redaction policy when the task was created
	jobID        *int64 // the task's current River job; NULL for none
}

// Public failure codes: one per reaction, stable, documented in
// openapi.yaml. The message is ours, never the provider's.
const (
	CodeModelIncompatible         = "model_incompatible"
	CodeIncompatibleModelResponse = "incompatible_model_response"
	CodeModelQuotaExhausted       = "model_quota_exhausted"
	// CodeProviderRedirected: the provider answered 3xx and the call was
	// refused (provider calls never follow a redirect). Its class is
	// exhausted, as the key's breaker treats it, but the account is not
	// out of credit: its base URL needs fixing, so it has its own code.
	CodeProviderRedirected          = "provider_redirected"
	CodeModelRateLimited            = "model_rate_limited"
	CodeModelTemporarilyUnavailable = "model_temporarily_unavailable"
	CodePossiblyExecuted            = "possibly_executed"
	CodeApplicationFailure          = "application_failure"
)

// outputCodes are provider codes that describe the model's answer rather
// than the call: the output-validation layer.
var outputCodes = map[string]bool{"malformed_response": true, "empty_output": true}

// failureFor is the one mapping from a provider failure class to the task's
// public failure. why says what ended the task ("" for the failure itself,
// or e.g. "deadline", "attempts").
func failureFor(class provider.Class, providerCode, why string) Failure {
	var f Failure
	switch {
	case outputCodes[providerCode]:
		f = Failure{Code: CodeIncompatibleModelResponse, Class: string(class), Retryable: true, Message: "The model's answer was empty or not valid output."}
	case providerCode == provider.CodeRefusal || providerCode == provider.CodeContentPolicy:
		f = Failure{Code: CodeModelIncompatible, Class: string(class), Message: "The model or the provider's moderation declined to answer.", Moderated: true}
	case class == provider.ClassRejected:
		f = Failure{Code: CodeModelIncompatible, Class: string(class), Retryable: false, Message: "The model provider rejected this request (for example: too long for the model's context, or an unsupported parameter); repeating it unchanged will fail again."}
	case providerCode == provider.CodeRedirectRefused:
		// Not retryable: no retry of the client's passes until an
		// operator fixes the provider's base URL.
		f = Failure{Code: CodeProviderRedirected, Class: string(class), Retryable: false, Message: "The model provider redirected the call, and it was refused (provider calls never follow a redirect); the provider key needs its base URL fixed, and the task waited for it."}
	case class == provider.ClassExhausted:
		f = Failure{Code: CodeModelQuotaExhausted, Class: string(class), Retryable: true, Message: "The provider account's quota or credit is exhausted; the task waited for it to recover."}
	case class == provider.ClassThrottled:
		f = Failure{Code: CodeModelRateLimited, Class: string(class), Retryable: true, Message: "The provider kept rate-limiting this key."}
	case class == provider.ClassAmbiguous:
		f = Failure{Code: CodePossiblyExecuted, Class: string(class), Retryable: false, Message: "The provider may have run the request but no answer arrived; it was not repeated further to avoid paying twice."}
	case class == provider.ClassTransient:
		f = Failure{Code: CodeModelTemporarilyUnavailable, Class: string(class), Retryable: true, Message: "The model is temporarily unavailable."}
	default:
		f = Failure{Code: CodeApplicationFailure, Class: "internal", Retryable: true, Message: "Tollgate failed to run the task."}
	}
	switch why {
	case "deadline":
		f.Message += " The task's deadline passed."
	case "attempts":
		f.Message += " The attempt limit was reached."
	}
	return f
}
