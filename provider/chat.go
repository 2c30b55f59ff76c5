package provider

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"

	"github.com/tollgate/tollgate/internal/anthropicwire"
)

// The provider-neutral chat request and answer. Its JSON is OpenAI's chat
// completions shape, field for field: that is the shape every client
// already speaks, the OpenAI-kind adapter sends it nearly as is, and the
// other adapters translate from it. Tasks store and hash it in this form,
// so a plain-text request encodes exactly as it did before the richer
// fields existed.

// Message is one chat message.
type Message struct {
	// Role is system, developer, user, assistant or tool.
	Role    string  `json:"role"`
	Content Content `json:"content,omitzero"`
	Name    string  `json:"name,omitempty"`
	// ToolCalls, on an assistant message, are the calls the model asked for.
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
	// ToolCallID, on a tool message, names the call it answers.
	ToolCallID string `json:"tool_call_id,omitempty"`
	// Refusal, on an assistant message, is the model's refusal text.
	Refusal string `json:"refusal,omitempty"`
	// IsError, on a tool message, says the tool failed (Anthropic's
	// tool_result is_error).
	IsError bool `json:"is_error,omitempty"`
	// CacheControl, on a tool message, marks its result as a prompt-cache
	// breakpoint (Anthropic's cache_control on a tool_result block).
	CacheControl *CacheControl `json:"cache_control,omitempty"`
}

// Content is a message's content: one text, or a list of parts. Its JSON is
// a string, or an array when Parts is non-nil; a zero Content is omitted.
type Content struct {
	Text  string
	Parts []Part
}

// Text is a content of one text.
func Text(s string) Content { return Content{Text: s} }

// IsZero reports whether the content holds nothing.
func (c Content) IsZero() bool { return c.Text == "" && c.Parts == nil }

// String is the content's text: the text, or its text parts joined.
func (c Content) String() string {
	if c.Parts == nil {
		return c.Text
	}
	var b strings.Builder
	for _, p := range c.Parts {
		if p.Type == PartText {
			b.WriteString(p.Text)
		}
	}
	return b.String()
}

// MarshalJSON writes a string, or the parts as an array.
func (c Content) MarshalJSON() ([]byte, error) {
	if c.Parts != nil {
		return marshalNoEscape(c.Parts)
	}
	return marshalNoEscape(c.Text)
}

// UnmarshalJSON reads a string, null or an array of parts.
func (c *Content) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	switch {
	case string(b) == "null":
		*c = Content{}
		return nil
	case len(b) > 0 && b[0] == '"':
		*c = Content{}
		return json.Unmarshal(b, &c.Text)
	case len(b) > 0 && b[0] == '[':
		var parts []Part
		if err := json.Unmarshal(b, &parts); err != nil {
			return err
		}
		if parts == nil {
			parts = []Part{}
		}
		*c = Content{Parts: parts}
		return nil
	}
	return errors.New("content must be a string or an array of parts")
}

// Part types. Thinking and redacted thinking are Anthropic's: the
// reasoning blocks of an assistant turn, which a tool loop must send back
// exactly as they came.
const (
	PartText             = "text"
	PartImage            = "image_url"
	PartThinking         = "thinking"
	PartRedactedThinking = "redacted_thinking"
)

// Part is one part of a message's content: a text, an image, or (on an
// assistant message) a thinking block with its signature or a redacted
// thinking block with its data, both opaque and carried unchanged.
type Part struct {
	Type      string    `json:"type"`
	Text      string    `json:"text,omitempty"`
	ImageURL  *ImageURL `json:"image_url,omitempty"`
	Thinking  string    `json:"thinking,omitempty"`
	Signature string    `json:"signature,omitempty"`
	Data      string    `json:"data,omitempty"`
	// CacheControl marks the part as a prompt-cache breakpoint
	// (Anthropic's cache_control on a text or image block).
	CacheControl *CacheControl `json:"cache_control,omitempty"`
}

// CacheControl is Anthropic's prompt-cache breakpoint: the prompt up to
// and including the block that carries it is cached, for TTL ("5m", the
// default, or "1h"). Chat carries it in Anthropic's own shape.
type CacheControl = anthropicwire.CacheControl

// Thinking types.
const (
	ThinkingEnabled  = "enabled"
	ThinkingAdaptive = "adaptive"
	ThinkingDisabled = "disabled"
)

// ThinkingConfig is Anthropic's extended thinking: enabled with a token
// budget, adaptive (the model decides how much), or disabled; Display
// (summarized or omitted) says how the thinking comes back. Chat carries
// it in Anthropic's own shape; Asks reports whether it asks for thinking.
type ThinkingConfig = anthropicwire.Thinking

// ImageURL is an image by http(s) URL or base64 data URL.
type ImageURL struct {
	URL    string `json:"url"`
	Detail string `json:"detail,omitempty"` // auto, low or high
}

// ToolCall is one call the model asked for.
type ToolCall struct {
	ID       string       `json:"id"`
	Type     string       `json:"type"` // function
	Function FunctionCall `json:"function"`
	// CacheControl marks the call as a prompt-cache breakpoint
	// (Anthropic's cache_control on a tool_use block).
	CacheControl *CacheControl `json:"cache_control,omitempty"`
}

// FunctionCall names the function and carries its arguments as the JSON
// text the model produced, unchanged.
type FunctionCall struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// Tool is a function the model may call.
type Tool struct {
	Type     string      `json:"type"` // function
	Function FunctionDef `json:"function"`
	// CacheControl marks the tool definitions up to this one as a
	// prompt-cache breakpoint (Anthropic's cache_control on a tool).
	CacheControl *CacheControl `json:"cache_control,omitempty"`
}

// FunctionDef describes a function tool. Parameters is a JSON Schema in
// canonical JSON (keys sorted, no insignificant space), so that equal
// schemas hash equally.
type FunctionDef struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
	Strict      *bool           `json:"strict,omitempty"`
}

// Tool choice modes.
const (
	ToolChoiceNone     = "none"
	ToolChoiceAuto     = "auto"
	ToolChoiceRequired = "required"
)

// ToolChoice is "none", "auto", "required", or one named function. Its JSON
// is OpenAI's: the mode as a string, or {"type":"function","function":
// {"name":...}}.
type ToolChoice struct {
	Mode     string // none, auto or required; "" when Function is set
	Function string // the function the model must call
}

type namedToolChoice struct {
	Type     string `json:"type"`
	Function struct {
		Name string `json:"name"`
	} `json:"function"`
}

// MarshalJSON writes the mode, or the named function.
func (t ToolChoice) MarshalJSON() ([]byte, error) {
	if t.Function != "" {
		var n namedToolChoice
		n.Type, n.Function.Name = "function", t.Function
		return marshalNoEscape(n)
	}
	return marshalNoEscape(t.Mode)
}

// UnmarshalJSON reads a mode string or a named function.
func (t *ToolChoice) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		*t = ToolChoice{}
		return json.Unmarshal(b, &t.Mode)
	}
	var n namedToolChoice
	if err := json.Unmarshal(b, &n); err != nil {
		return err
	}
	if n.Type != "function" || n.Function.Name == "" {
		return errors.New(`tool_choice must be "none", "auto", "required" or {"type": "function", "function": {"name": ...}}`)
	}
	*t = ToolChoice{Function: n.Function.Name}
	return nil
}

// Response format types.
const (
	FormatText       = "text"
	FormatJSONObject = "json_object"
	FormatJSONSchema = "json_schema"
)

// ResponseFormat asks for text, any JSON object, or JSON valid against a
// schema.
type ResponseFormat struct {
	Type       string      `json:"type"`
	JSONSchema *JSONSchema `json:"json_schema,omitempty"`
}

// JSONSchema is a named schema for structured output; Schema is canonical
// JSON, as FunctionDef.Parameters.
type JSONSchema struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Schema      json.RawMessage `json:"schema,omitempty"`
	Strict      *bool           `json:"strict,omitempty"`
}

// Params are the sampling and control parameters, under OpenAI's names
// (top_k, which OpenAI lacks, under Anthropic's). A nil pointer or empty
// value was not sent, and is not sent on.
type Params struct {
	Temperature      *float64       `json:"temperature,omitempty"`
	TopP             *float64       `json:"top_p,omitempty"`
	Seed             *int64         `json:"seed,omitempty"`
	Stop             Stop           `json:"stop,omitempty"`
	PresencePenalty  *float64       `json:"presence_penalty,omitempty"`
	FrequencyPenalty *float64       `json:"frequency_penalty,omitempty"`
	LogitBias        map[string]int `json:"logit_bias,omitempty"`
	Logprobs         *bool          `json:"logprobs,omitempty"`
	TopLogprobs      *int           `json:"top_logprobs,omitempty"`
	// N is the number of choices; 0 means one.
	N                int    `json:"n,omitempty"`
	User             string `json:"user,omitempty"`
	SafetyIdentifier string `json:"safety_identifier,omitempty"`
	ReasoningEffort  string `json:"reasoning_effort,omitempty"`
	Verbosity        string `json:"verbosity,omitempty"`
	// TopK samples from the K likeliest tokens only (Anthropic, Workers
	// AI and many OpenAI-compatible servers).
	TopK *int `json:"top_k,omitempty"`
}

// Stop is up to four stop sequences; a single string reads as a list of
// one.
type Stop []string

// UnmarshalJSON reads a string, null or an array of strings.
func (s *Stop) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	switch {
	case string(b) == "null":
		*s = nil
		return nil
	case len(b) > 0 && b[0] == '"':
		var one string
		if err := json.Unmarshal(b, &one); err != nil {
			return err
		}
		*s = Stop{one}
		return nil
	}
	var list []string
	if err := json.Unmarshal(b, &list); err != nil {
		return errors.New("stop must be a string or an array of strings")
	}
	*s = list
	return nil
}

// Chat is everything a chat request asks of the model. Its JSON names are
// OpenAI's; Extra holds the fields an OpenAI-compatible provider
// understands that Tollgate does not act on, passed to OpenAI-kind
// providers unchanged and refused by name for the others.
type Chat struct {
	Model    string    `json:"model,omitempty"`
	Messages []Message `json:"messages"`
	// MaxTokens and MaxCompletionTokens are the output limit under the
	// name the client used; at most one is set. OutputLimit reads either.
	MaxTokens           int             `json:"max_tokens,omitempty"`
	MaxCompletionTokens int             `json:"max_completion_tokens,omitempty"`
	Tools               []Tool          `json:"tools,omitempty"`
	ToolChoice          *ToolChoice     `json:"tool_choice,omitempty"`
	ParallelToolCalls   *bool           `json:"parallel_tool_calls,omitempty"`
	ResponseFormat      *ResponseFormat `json:"response_format,omitempty"`
	Params
	// Thinking is Anthropic's extended thinking (reasoning_effort is
	// OpenAI's way of asking for reasoning; at most one of them is set).
	Thinking *ThinkingConfig `json:"thinking,omitempty"`
	// CacheControl is Anthropic's request-level prompt-cache breakpoint.
	CacheControl *CacheControl `json:"cache_control,omitempty"`
	// AnthropicVersion is the anthropic-version the client sent, for
	// Anthropic providers; empty sends the adapter's own.
	AnthropicVersion string `json:"anthropic_version,omitempty"`
	// Betas are the anthropic-beta values the client sent, for Anthropic
	// providers (sent as the anthropic-beta header).
	Betas []string                   `json:"anthropic_beta,omitempty"`
	Extra map[string]json.RawMessage `json:"passthrough,omitempty"`
	// Native is the client's body when it was made in a provider API's
	// own dialect (native.go): a provider of that API is sent it.
	Native *Native `json:"native,omitempty"`
}

// OutputLimit is the output limit whichever name carries it; 0 is none.
func (c Chat) OutputLimit() int { return max(c.MaxTokens, c.MaxCompletionTokens) }

// Choices is the number of choices asked for, at least one.
func (c Chat) Choices() int { return max(c.N, 1) }

// Request is one model call.
type Request struct {
	Chat
	// IdempotencyKey is sent as the Idempotency-Key header so that a
	// provider that honours it can deduplicate a repeated call; Tollgate
	// uses "{task_id}:{attempt}".
	IdempotencyKey string
}

// Usage is the token count the provider reported for one call, by class.
// InputTokens counts the whole prompt (cached and cache-written tokens
// included) and OutputTokens the whole output (reasoning included), as
// OpenAI's prompt_tokens and completion_tokens do; the classes say how
// much of each was priced apart.
type Usage struct {
	InputTokens       int64
	OutputTokens      int64
	CachedInputTokens int64 // read from the provider's prompt cache
	CacheWriteTokens  int64 // written to the prompt cache (Anthropic)
	ReasoningTokens   int64 // part of OutputTokens
}

// Choice is one answer of the model.
type Choice struct {
	Index int
	// Message is the assistant's message: Content (text), ToolCalls and
	// Refusal.
	Message Message
	// FinishReason is OpenAI's: stop, length, tool_calls or
	// content_filter; adapters translate their provider's reasons.
	FinishReason string
	// StopReason is the provider's own reason when FinishReason does not
	// determine it (Anthropic's stop_sequence or
	// model_context_window_exceeded; see AnthropicStopReason); "" when it
	// does.
	StopReason string
	// StopSequence is the stop sequence that ended the answer, when the
	// provider says which.
	StopSequence string
	// Logprobs is the provider's logprobs object, when asked and given.
	Logprobs json.RawMessage
}

// Response is a successful model call.
type Response struct {
	Choices           []Choice
	Model             string // model name the provider reports; empty if it reported none
	SystemFingerprint string
	Usage             *Usage // nil when the provider reported no usage
	Status            int    // HTTP status
	// Embeddings are an embeddings call's vectors, one per input in the
	// inputs' order (EmbeddingResponse.Response); nil for a chat.
	Embeddings [][]float32
	// Native is the provider's answer as it sent it, when the request was
	// carried natively (native.go).
	Native *NativeAnswer
}

// Text is the first choice's text; "" when there is none.
func (r *Response) Text() string {
	if r == nil || len(r.Choices) == 0 {
		return ""
	}
	return r.Choices[0].Message.Content.String()
}

// FinishReason is the first choice's finish reason.
func (r *Response) FinishReason() string {
	if r == nil || len(r.Choices) == 0 {
		return ""
	}
	return r.Choices[0].FinishReason
}

// TextResponse is a one-choice answer of plain text.
func TextResponse(text, finish string) *Response {
	return &Response{Choices: []Choice{{Message: Message{Role: "assistant", Content: Text(text)}, FinishReason: finish}}}
}

// Delta is one piece of a streamed answer.
type Delta struct {
	Choice  int
	Content string
	Refusal string
	// ToolCall is a fragment of a tool call: the first fragment of a call
	// carries its ID and Name, later ones more Arguments.
	ToolCall *ToolCallDelta
	// Thinking and Signature are fragments of an Anthropic thinking block:
	// its text, then its signature, which ends the block.
	// RedactedThinking is a whole redacted thinking block's data.
	Thinking         string
	Signature        string
	RedactedThinking string
	// Native is the provider's event as it sent it, when the request was
	// carried natively; the other fields still say what it carried.
	Native *NativeEvent
}

// ToolCallDelta is a fragment of the Index-th tool call of a choice.
type ToolCallDelta struct {
	Index     int
	ID        string
	Name      string
	Arguments string
}

// marshalNoEscape encodes v without HTML escaping, as the task hash does.
func marshalNoEscape(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

// CanonicalJSON re-encodes a JSON value with object keys sorted, numbers
// as written and no insignificant space, so that equal values hash
// equally whatever order their keys arrived in. It fails on invalid JSON.
func CanonicalJSON(raw []byte) (json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, errors.New("trailing data after the JSON value")
	}
	return marshalNoEscape(v)
}

// Unsupported names a field of a request that a provider kind (or one of
// its models) cannot carry, and says why; the request is refused before
// any call.
type Unsupported struct {
	Field  string // the request's JSON path, e.g. "logit_bias" or "messages[2].content[0].image_url"
	Reason string // e.g. "Anthropic's Messages API has no logit_bias"
}

func (u *Unsupported) Error() string { return "provider: " + u.Field + ": " + u.Reason }

// Checker is a Client that cannot carry every field of Chat. Check returns
// an *Unsupported for the first field it cannot carry, fields taken in a
// stable order, or nil; it makes no call.
type Checker interface {
	Check(c Chat) error
}
