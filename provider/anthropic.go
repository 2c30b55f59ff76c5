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

type messagesRequest struct {
	Model     string    `json:"model"`
	MaxTokens int       `json:"max_tokens"`
	System    string    `json:"system,omitempty"`
	Messages  []Message `json:"messages"`
}

// Complete sends req once, with its system messages joined (blank line
// between) into the top-level system field and the others in order. On
// failure it returns a *Error as OpenAI.Complete does, classified by
// ClassifyAnthropic; and ClassRejected "invalid_request", without sending
// anything, when req.MaxTokens is not positive, because the Messages API
// requires a limit and choosing one here would spend budget nobody set.
func (c *Anthropic) Complete(ctx context.Context, req Request) (*Response, error) {
	if req.OutputLimit() <= 0 {
		return nil, rejectedLocally(errors.New("provider: the Anthropic Messages API requires max_tokens"))
	}
	return call{
		hc:       c.hc,
		url:      c.endpoint,
		header:   c.headers(),
		payload:  messagesBody(req),
		key:      req.IdempotencyKey,
		classify: ClassifyAnthropic,
		parse:    parseMessage,
	}.do(ctx)
}

type anthropicMessage struct {
	Type    string          `json:"type"`
	Model   string          `json:"model"`
	Content json.RawMessage `json:"content"`
	// StopReason: end_turn, max_tokens, stop_sequence, tool_use,
	// pause_turn, refusal. It is passed on as the FinishReason unchanged.
	StopReason string `json:"stop_reason"`
	Usage      *struct {
		InputTokens              tokenCount `json:"input_tokens"`
		OutputTokens             tokenCount `json:"output_tokens"`
		CacheCreationInputTokens tokenCount `json:"cache_creation_input_tokens"`
		CacheReadInputTokens     tokenCount `json:"cache_read_input_tokens"`
	} `json:"usage"`
	Error json.RawMessage `json:"error"`
}

// parseMessage turns a 2xx body into a Response, or into a *Error when it
// holds no usable message.
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
	var blocks []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(m.Content, &blocks); err != nil {
		return nil, malformed(status, err)
	}
	u := m.Usage

	var b strings.Builder
	for _, bl := range blocks {
		if bl.Type == "text" {
			b.WriteString(bl.Text)
		}
	}
	content := b.String()
	if m.StopReason == "refusal" {
		// The model stopped itself; a partial answer is not an answer.
		return nil, &Error{Class: ClassRejected, Status: status, Code: CodeRefusal}
	}
	if strings.TrimSpace(content) == "" {
		return nil, &Error{Class: ClassTransient, Status: status, Code: CodeEmptyOutput}
	}

	r := TextResponse(content, m.StopReason)
	r.Model, r.Status = m.Model, status
	if u != nil {
		// Cached prompt tokens are reported apart from input_tokens; they
		// are part of the prompt, as in OpenAI's prompt_tokens.
		r.Usage = &Usage{
			InputTokens:  addTokens(u.InputTokens, u.CacheCreationInputTokens, u.CacheReadInputTokens),
			OutputTokens: int64(u.OutputTokens),
		}
	}
	return r, nil
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

// messagesBody is the Messages API request: system messages joined (blank
// line between) into the top-level system field, the others in order.
func messagesBody(req Request) messagesRequest {
	body := messagesRequest{Model: req.Model, MaxTokens: req.OutputLimit(), Messages: []Message{}}
	var system []string
	for _, m := range req.Messages {
		if m.Role == "system" {
			system = append(system, m.Content.String())
			continue
		}
		body.Messages = append(body.Messages, m)
	}
	body.System = strings.Join(system, "\n\n")
	return body
}

func (c *Anthropic) headers() http.Header {
	h := http.Header{}
	if c.apiKey != "" {
		h.Set("x-api-key", c.apiKey)
	}
	h.Set("anthropic-version", AnthropicVersion)
	return h
}
