package provider

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/tollgate/tollgate/internal/anthropicwire"
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

// Complete sends req once, translated by anthropicBody, or natively when
// it carries an Anthropic Messages body (anthropic_native.go). On failure it
// returns a *Error as OpenAI.Complete does, classified by
// ClassifyAnthropic; and ClassRejected "invalid_request", without sending
// anything, when the output limit is not positive, because the Messages API
// requires max_tokens and choosing one here would spend budget nobody set,
// or when a field cannot be carried (the *Unsupported is its cause, for
// errors.As).
func (c *Anthropic) Complete(ctx context.Context, req Request) (*Response, error) {
	if n := nativeOf(req.Chat); n != nil {
		return c.completeNative(ctx, req, n)
	}
	body, err := c.body(req)
	if err != nil {
		return nil, err
	}
	return call{
		hc:       c.hc,
		url:      c.endpoint,
		header:   c.headers(req.Chat),
		payload:  body,
		key:      req.IdempotencyKey,
		classify: ClassifyAnthropic,
		parse:    parseMessage,
	}.do(ctx)
}

// body is the request to send, or the local refusal of one.
func (c *Anthropic) body(req Request) (anthropicwire.Request, error) {
	if req.OutputLimit() <= 0 {
		return anthropicwire.Request{}, rejectedLocally(errors.New("provider: the Anthropic Messages API requires max_tokens"))
	}
	body, u := anthropicBody(req.Chat)
	if u != nil {
		return anthropicwire.Request{}, rejectedLocally(u)
	}
	return body, nil
}

// anthropicUsage is Anthropic's usage in OpenAI's terms: input_tokens
// counts only the prompt tokens after the last cache breakpoint, so the
// prompt is the sum of the three, of which cache reads are the cached
// input and cache creation the cache writes. Anthropic reports no
// reasoning tokens apart: thinking is inside output_tokens.
func anthropicUsage(u anthropicwire.Usage) *Usage {
	in, out, created, read := u.Counts()
	return &Usage{
		InputTokens:       addTokens(in, created, read),
		OutputTokens:      int64(out),
		CachedInputTokens: int64(read),
		CacheWriteTokens:  int64(created),
	}
}

// anthropicAnswerMessage is an answer as parseMessage reads it: its
// content apart, once the body is known to be no error.
type anthropicAnswerMessage struct {
	anthropicwire.Response
	Content json.RawMessage `json:"content"`
	Error   json.RawMessage `json:"error"`
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

// AnthropicStopReason is the Anthropic stop_reason a finish reason stands
// for: stop is end_turn, length max_tokens, tool_calls tool_use,
// content_filter refusal; any other reason is its own. A Choice's
// StopReason, when set, says more than this.
func AnthropicStopReason(finish string) string {
	switch finish {
	case "stop", "":
		return "end_turn"
	case "length":
		return "max_tokens"
	case "tool_calls":
		return "tool_use"
	case "content_filter":
		return "refusal"
	}
	return finish
}

// stopDetail is what a Choice keeps of stop beside its finish reason: the
// stop reason when the finish reason does not say it, and the stop
// sequence.
func stopDetail(ch *Choice, stop string, sequence *string) {
	if stop != "" && AnthropicStopReason(anthropicFinish(stop)) != stop {
		ch.StopReason = stop
	}
	if sequence != nil {
		ch.StopSequence = *sequence
	}
}

// parseMessage turns a 2xx body into a Response, or into a *Error when it
// holds no usable message. Text blocks make the content, tool_use blocks
// the tool calls (arguments are the input object as compact JSON); thinking
// and redacted_thinking blocks, the model's reasoning, are kept as parts
// beside the text, in their order, their signatures and data unchanged, so
// that a tool loop can send them back (the content is then parts rather
// than one text). An answer with neither text nor tool calls is
// empty_output, or refusal when Anthropic's classifiers stopped it; a
// refusal after some text is that text with finish_reason content_filter,
// as OpenAI reports a filtered answer.
func parseMessage(status int, header http.Header, body []byte) (*Response, error) {
	var m anthropicAnswerMessage
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
	var blocks []anthropicwire.ResponseBlock
	if err := json.Unmarshal(m.Content, &blocks); err != nil {
		return nil, malformed(status, err)
	}
	var content answerContent
	var calls []ToolCall
	for _, bl := range blocks {
		switch bl.Type {
		case "text":
			content.text(deref(bl.Text))
		case "thinking":
			content.thinking(deref(bl.Thinking), deref(bl.Signature))
		case "redacted_thinking":
			content.redacted(bl.Data)
		case "tool_use":
			args, ok := argumentsObject(string(bl.Input))
			if !ok {
				return nil, malformed(status, errors.New("tool_use input is not a JSON object"))
			}
			calls = append(calls, ToolCall{ID: bl.ID, Type: "function", Function: FunctionCall{Name: bl.Name, Arguments: string(args)}})
		}
	}
	stop := deref(m.StopReason)
	r, err := anthropicAnswer(status, &content, calls, stop)
	if err != nil {
		return nil, err
	}
	stopDetail(&r.Choices[0], stop, m.StopSequence)
	r.Model = m.Model
	if m.Usage != nil {
		r.Usage = anthropicUsage(*m.Usage)
	}
	return r, nil
}

// deref is an optional field's value, "" when absent.
func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// anthropicAnswer is the one choice of an answer, or the *Error for an
// answer that holds nothing: no text and no tool calls (thinking alone is
// no answer).
func anthropicAnswer(status int, content *answerContent, calls []ToolCall, stop string) (*Response, error) {
	if strings.TrimSpace(content.all.String()) == "" && len(calls) == 0 {
		if stop == "refusal" {
			return nil, &Error{Class: ClassRejected, Status: status, Code: CodeRefusal}
		}
		return nil, &Error{Class: ClassTransient, Status: status, Code: CodeEmptyOutput}
	}
	msg := Message{Role: "assistant", ToolCalls: calls, Content: content.content()}
	return &Response{Choices: []Choice{{Message: msg, FinishReason: anthropicFinish(stop)}}, Status: status}, nil
}

// answerContent assembles an answer's content from its blocks: one text
// when it holds only text, else its parts in order (text blocks apart).
type answerContent struct {
	all       strings.Builder // every text, joined
	parts     []Part
	reasoning bool // a thinking or redacted thinking block came
}

func (a *answerContent) text(s string) {
	a.all.WriteString(s)
	a.parts = append(a.parts, Part{Type: PartText, Text: s})
}

// textDelta appends s to the text block in progress (a new one when the
// last part is not text).
func (a *answerContent) textDelta(s string, start bool) {
	if start || len(a.parts) == 0 || a.parts[len(a.parts)-1].Type != PartText {
		a.parts = append(a.parts, Part{Type: PartText})
	}
	a.all.WriteString(s)
	a.parts[len(a.parts)-1].Text += s
}

func (a *answerContent) thinking(text, signature string) {
	a.reasoning = true
	a.parts = append(a.parts, Part{Type: PartThinking, Thinking: text, Signature: signature})
}

func (a *answerContent) redacted(data string) {
	a.reasoning = true
	a.parts = append(a.parts, Part{Type: PartRedactedThinking, Data: data})
}

// last is the part in progress, nil when none.
func (a *answerContent) last() *Part {
	if len(a.parts) == 0 {
		return nil
	}
	return &a.parts[len(a.parts)-1]
}

// content is the message content: the text alone when no reasoning came.
func (a *answerContent) content() Content {
	if a.reasoning {
		return Content{Parts: a.parts}
	}
	if s := a.all.String(); s != "" {
		return Text(s)
	}
	return Content{}
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

// headers are the call's headers: the key, the version this adapter
// speaks, and the client's anthropic-beta values.
func (c *Anthropic) headers(chat Chat) http.Header {
	h := http.Header{}
	if c.apiKey != "" {
		h.Set("x-api-key", c.apiKey)
	}
	h.Set("anthropic-version", cmp.Or(chat.AnthropicVersion, AnthropicVersion))
	if len(chat.Betas) > 0 {
		h.Set("anthropic-beta", strings.Join(chat.Betas, ","))
	}
	return h
}
