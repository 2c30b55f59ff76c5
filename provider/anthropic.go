package provider

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"time"
)

// AnthropicVersion is the anthropic-version header the Anthropic client
// sends: the Messages API wire format this file speaks.
const AnthropicVersion = "2023-06-01"

// Anthropic is a Client for the Anthropic Messages API. It is safe for
// concurrent use.
type Anthropic struct {
	endpoint string
	apiKey   string
	hc       *http.Client
}

var _ Client = (*Anthropic)(nil)

// NewAnthropic returns a client that POSTs to baseURL + "/v1/messages" with
// apiKey in the x-api-key header. baseURL is the API root without /v1, as in
// Anthropic's own SDKs ("https://api.anthropic.com"); a trailing "/v1" is
// dropped, so both spellings reach the same endpoint. A nil hc means a plain
// http.Client; redirects are never followed (NoRedirects); deadlines come
// from the ctx passed to Complete.
func NewAnthropic(baseURL, apiKey string, hc *http.Client) *Anthropic {
	hc = NoRedirects(hc)
	root := strings.TrimSuffix(strings.TrimRight(baseURL, "/"), "/v1")
	return &Anthropic{endpoint: root + "/v1/messages", apiKey: apiKey, hc: hc}
}

// Complete sends req once, translated by anthropicBody. On failure it
// returns a *Error as OpenAI.Complete does, classified by
// ClassifyAnthropic; and ClassRejected "invalid_request", without sending
// anything, when the output limit is not positive, because the Messages API
// requires max_tokens and choosing one here would spend budget nobody set,
// or when a field cannot be carried (the *Unsupported is its cause, for
// errors.As).
func (c *Anthropic) Complete(ctx context.Context, req Request) (*Response, error) {
	body, err := c.body(req)
	if err != nil {
		return nil, err
	}
	return call{
		hc:       c.hc,
		url:      c.endpoint,
		header:   c.headers(),
		payload:  body,
		key:      req.IdempotencyKey,
		classify: ClassifyAnthropic,
		parse:    parseMessage,
	}.do(ctx)
}

// body is the request to send, or the local refusal of one.
func (c *Anthropic) body(req Request) (messagesRequest, error) {
	if req.OutputLimit() <= 0 {
		return messagesRequest{}, rejectedLocally(errors.New("provider: the Anthropic Messages API requires max_tokens"))
	}
	body, u := anthropicBody(req.Chat)
	if u != nil {
		return messagesRequest{}, rejectedLocally(u)
	}
	return body, nil
}

type anthropicUsage struct {
	InputTokens              tokenCount `json:"input_tokens"`
	OutputTokens             tokenCount `json:"output_tokens"`
	CacheCreationInputTokens tokenCount `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     tokenCount `json:"cache_read_input_tokens"`
}

// usage is Anthropic's usage in OpenAI's terms: input_tokens counts only
// the prompt tokens after the last cache breakpoint, so the prompt is the
// sum of the three, of which cache reads are the cached input and cache
// creation the cache writes. Anthropic reports no reasoning tokens apart:
// thinking is inside output_tokens.
func (u anthropicUsage) usage() *Usage {
	return &Usage{
		InputTokens:       addTokens(u.InputTokens, u.CacheCreationInputTokens, u.CacheReadInputTokens),
		OutputTokens:      int64(u.OutputTokens),
		CachedInputTokens: int64(u.CacheReadInputTokens),
		CacheWriteTokens:  int64(u.CacheCreationInputTokens),
	}
}

type anthropicMessage struct {
	Type       string          `json:"type"`
	Model      string          `json:"model"`
	Content    json.RawMessage `json:"content"`
	StopReason string          `json:"stop_reason"`
	Usage      *anthropicUsage `json:"usage"`
	Error      json.RawMessage `json:"error"`
}

// anthropicAnswerBlock is a content block of an answer.
type anthropicAnswerBlock struct {
	Type  string          `json:"type"`
	Text  string          `json:"text"`
	ID    string          `json:"id"`
	Name  string          `json:"name"`
	Input json.RawMessage `json:"input"`
}

// anthropicFinish translates a stop_reason into OpenAI's finish_reason:
// end_turn and stop_sequence are stop, max_tokens (and
// model_context_window_exceeded, the same cut by the context window) is
// length, tool_use is tool_calls, refusal (a safety classifier stopped the
// answer) is content_filter. Any other reason (pause_turn follows only
// server tools, which this adapter never sends) passes unchanged, so that
// nothing is hidden.
func anthropicFinish(stop string) string {
	switch stop {
	case "end_turn", "stop_sequence":
		return "stop"
	case "max_tokens", "model_context_window_exceeded":
		return "length"
	case "tool_use":
		return "tool_calls"
	case "refusal":
		return "content_filter"
	}
	return stop
}

// parseMessage turns a 2xx body into a Response, or into a *Error when it
// holds no usable message. Text blocks make the content, tool_use blocks
// the tool calls (arguments are the input object as compact JSON); thinking
// blocks are the model's reasoning, not its answer, and are left out. An
// answer with neither text nor tool calls is empty_output, or refusal when
// Anthropic's classifiers stopped it; a refusal after some text is that
// text with finish_reason content_filter, as OpenAI reports a filtered
// answer.
func parseMessage(status int, header http.Header, body []byte) (*Response, error) {
	var m anthropicMessage
	if err := json.Unmarshal(body, &m); err != nil {
		return nil, malformed(status, err)
	}
	if m.Type == "error" || hasJSON(m.Error) {
		// A proxy that reports a failure as 200 with an error body.
		return nil, ClassifyAnthropic(status, header, body)
	}
	if !hasJSON(m.Content) {
		return nil, malformed(status, nil)
	}
	var blocks []anthropicAnswerBlock
	if err := json.Unmarshal(m.Content, &blocks); err != nil {
		return nil, malformed(status, err)
	}
	var text strings.Builder
	var calls []ToolCall
	for _, bl := range blocks {
		switch bl.Type {
		case "text":
			text.WriteString(bl.Text)
		case "tool_use":
			args, ok := argumentsObject(string(bl.Input))
			if !ok {
				return nil, malformed(status, errors.New("tool_use input is not a JSON object"))
			}
			calls = append(calls, ToolCall{ID: bl.ID, Type: "function", Function: FunctionCall{Name: bl.Name, Arguments: string(args)}})
		}
	}
	r, err := anthropicAnswer(status, text.String(), calls, m.StopReason)
	if err != nil {
		return nil, err
	}
	r.Model = m.Model
	if m.Usage != nil {
		r.Usage = m.Usage.usage()
	}
	return r, nil
}

// anthropicAnswer is the one choice of an answer, or the *Error for an
// answer that holds nothing.
func anthropicAnswer(status int, text string, calls []ToolCall, stop string) (*Response, error) {
	if strings.TrimSpace(text) == "" && len(calls) == 0 {
		if stop == "refusal" {
			return nil, &Error{Class: ClassRejected, Status: status, Code: CodeRefusal}
		}
		return nil, &Error{Class: ClassTransient, Status: status, Code: CodeEmptyOutput}
	}
	msg := Message{Role: "assistant", ToolCalls: calls}
	if text != "" {
		msg.Content = Text(text)
	}
	return &Response{Choices: []Choice{{Message: msg, FinishReason: anthropicFinish(stop)}}, Status: status}, nil
}

// ClassifyAnthropic classifies a non-2xx response from the Anthropic Messages
// API, whose errors read {"type":"error","error":{"type":..., "message":...}}.
// It always returns a non-nil *Error and reads a failure in the order
// ClassifyOpenAI does: 529 overloaded_error and 500 api_error are transient;
// rate_limit_error is throttled, with the retry-after header; a credit balance
// that is too low (400 invalid_request_error), billing_error, and a spend
// limit (rate_limit_error whose error.details.error_code is
// enforced_spend_limit_reached) are exhausted; so are authentication_error
// and permission_error, which concern the key or the account, unless the
// message names a model; a prompt that is too long is rejected.
func ClassifyAnthropic(status int, header http.Header, body []byte) *Error {
	return classifyAnthropic(status, header, body, time.Now)
}

func classifyAnthropic(status int, header http.Header, body []byte, now func() time.Time) *Error {
	return classify(status, header, body, now, anthropicCodes)
}

// anthropicCodes reads error.details.error_code, which says more than the
// type it refines (a spend limit arrives as rate_limit_error).
func anthropicCodes(f errorFields) (Class, string, bool) {
	return preciseCode(f.detail)
}

func (c *Anthropic) headers() http.Header {
	h := http.Header{}
	if c.apiKey != "" {
		h.Set("x-api-key", c.apiKey)
	}
	h.Set("anthropic-version", AnthropicVersion)
	return h
}
