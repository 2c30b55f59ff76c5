package provider

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptrace"
	"strings"
	"sync/atomic"
)

// maxResponseBytes bounds how much of a response body is read, so that a
// broken or hostile provider cannot exhaust memory.
const maxResponseBytes = 4 << 20

// OpenAI is a Client for the OpenAI-compatible chat completions API. It is
// safe for concurrent use.
type OpenAI struct {
	endpoint string
	apiKey   string
	hc       *http.Client
}

var _ Client = (*OpenAI)(nil)

// NewOpenAI returns a client that POSTs to baseURL + "/chat/completions"
// (baseURL such as "https://api.openai.com/v1") with apiKey as a bearer token.
// A nil hc means a plain http.Client; deadlines come from the ctx passed to
// Complete.
func NewOpenAI(baseURL, apiKey string, hc *http.Client) *OpenAI {
	if hc == nil {
		hc = &http.Client{}
	}
	return &OpenAI{
		endpoint: strings.TrimRight(baseURL, "/") + "/chat/completions",
		apiKey:   apiKey,
		hc:       hc,
	}
}

type chatRequest struct {
	Model     string    `json:"model"`
	Messages  []Message `json:"messages"`
	MaxTokens int       `json:"max_tokens,omitempty"`
}

// Complete sends req once. On failure it returns a *Error: the classified
// provider answer for a non-2xx status; ClassTransient "connection_error" (or
// "timeout"/"canceled") when nothing was sent; ClassAmbiguous "timeout",
// "canceled" or "connection_cut" when the request was sent but no full answer
// came back; ClassTransient "malformed_response" or "empty_output" for a 2xx
// that carries no usable completion; ClassRejected "refusal" or
// "content_policy" when the model declined.
func (c *OpenAI) Complete(ctx context.Context, req Request) (*Response, error) {
	msgs := req.Messages
	if msgs == nil {
		msgs = []Message{}
	}
	payload, err := json.Marshal(chatRequest{Model: req.Model, Messages: msgs, MaxTokens: req.MaxTokens})
	if err != nil {
		return nil, &Error{Class: ClassRejected, Code: CodeInvalidRequest, cause: err}
	}

	// sent turns true once the whole request has been handed to the
	// connection: from then on a lost answer may mean a processed call.
	var sent atomic.Bool
	trace := &httptrace.ClientTrace{
		WroteRequest: func(info httptrace.WroteRequestInfo) {
			if info.Err == nil {
				sent.Store(true)
			}
		},
	}
	hreq, err := http.NewRequestWithContext(httptrace.WithClientTrace(ctx, trace),
		http.MethodPost, c.endpoint, bytes.NewReader(payload))
	if err != nil {
		// Only a malformed base URL gets here: configuration, not weather.
		return nil, &Error{Class: ClassRejected, Code: CodeInvalidRequest, cause: err}
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Accept", "application/json")
	if c.apiKey != "" {
		hreq.Header.Set("Authorization", "Bearer "+c.apiKey)
	}
	if req.IdempotencyKey != "" {
		hreq.Header.Set("Idempotency-Key", req.IdempotencyKey)
	}

	resp, err := c.hc.Do(hreq)
	if err != nil {
		return nil, transportError(ctx.Err(), err, sent.Load(), 0)
	}
	defer resp.Body.Close()

	body, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes+1))
	ok := resp.StatusCode >= 200 && resp.StatusCode < 300
	if err != nil {
		if ok {
			// The provider answered success and the answer was lost:
			// the call was very likely processed and billed.
			return nil, transportError(ctx.Err(), err, true, resp.StatusCode)
		}
		// Classify the failure on what did arrive.
	}
	if !ok {
		if len(body) > maxResponseBytes {
			body = body[:maxResponseBytes]
		}
		return nil, ClassifyOpenAI(resp.StatusCode, resp.Header, body)
	}
	if len(body) > maxResponseBytes {
		return nil, &Error{Class: ClassTransient, Status: resp.StatusCode, Code: CodeMalformedResponse}
	}
	return parseCompletion(resp.StatusCode, resp.Header, body)
}

// transportError classifies a failure to get a complete answer. ctxErr is the
// caller's context error, sent whether the request had been written.
func transportError(ctxErr, err error, sent bool, status int) *Error {
	e := &Error{Class: ClassTransient, Status: status, Code: CodeConnectionError, cause: err}
	if sent {
		e.Class, e.Code = ClassAmbiguous, CodeConnectionCut
	}
	var te interface{ Timeout() bool }
	switch {
	case errors.Is(ctxErr, context.DeadlineExceeded):
		e.Code, e.cause = CodeTimeout, ctxErr
	case ctxErr != nil:
		e.Code, e.cause = CodeCanceled, ctxErr
	case errors.As(err, &te) && te.Timeout():
		// http.Client.Timeout or a transport deadline.
		e.Code = CodeTimeout
	}
	return e
}

type chatCompletion struct {
	Model   string `json:"model"`
	Choices []struct {
		Message struct {
			Content json.RawMessage `json:"content"`
			Refusal *string         `json:"refusal"`
		} `json:"message"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens     int64 `json:"prompt_tokens"`
		CompletionTokens int64 `json:"completion_tokens"`
	} `json:"usage"`
	Error json.RawMessage `json:"error"`
}

// parseCompletion turns a 2xx body into a Response, or into a *Error when it
// holds no usable completion.
func parseCompletion(status int, header http.Header, body []byte) (*Response, error) {
	var cc chatCompletion
	if err := json.Unmarshal(body, &cc); err != nil {
		return nil, &Error{Class: ClassTransient, Status: status, Code: CodeMalformedResponse, cause: err}
	}
	if len(cc.Choices) == 0 {
		if e := bytes.TrimSpace(cc.Error); len(e) > 0 && string(e) != "null" {
			// Some compatible servers and proxies report failures as 200
			// with an error body; it classifies like any other.
			return nil, ClassifyOpenAI(status, header, body)
		}
		return nil, &Error{Class: ClassTransient, Status: status, Code: CodeMalformedResponse}
	}
	if cc.Usage != nil && (cc.Usage.PromptTokens < 0 || cc.Usage.CompletionTokens < 0) {
		// Negative usage would credit the budget: refuse to believe it.
		return nil, &Error{Class: ClassTransient, Status: status, Code: CodeMalformedResponse}
	}

	choice := cc.Choices[0]
	content, ok := contentText(choice.Message.Content)
	if !ok {
		return nil, &Error{Class: ClassTransient, Status: status, Code: CodeMalformedResponse}
	}
	if strings.TrimSpace(content) == "" {
		e := &Error{Class: ClassTransient, Status: status, Code: CodeEmptyOutput}
		switch {
		case choice.Message.Refusal != nil && *choice.Message.Refusal != "":
			e.Class, e.Code = ClassRejected, CodeRefusal
			e.setRaw(clip(*choice.Message.Refusal))
		case choice.FinishReason == "content_filter":
			e.Class, e.Code = ClassRejected, CodeContentPolicy
		}
		return nil, e
	}

	r := &Response{
		Content:      content,
		Model:        cc.Model,
		FinishReason: choice.FinishReason,
		Status:       status,
	}
	if cc.Usage != nil {
		r.Usage = &Usage{InputTokens: cc.Usage.PromptTokens, OutputTokens: cc.Usage.CompletionTokens}
	}
	return r, nil
}

// contentText reads message.content, which is a string, null, or (on some
// compatible servers) an array of {"type": "text", "text": ...} parts. It
// reports false for any other shape.
func contentText(raw json.RawMessage) (string, bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return "", true
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, true
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &parts) != nil {
		return "", false
	}
	var b strings.Builder
	for _, p := range parts {
		if p.Type == "text" {
			b.WriteString(p.Text)
		}
	}
	return b.String(), true
}
