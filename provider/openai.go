package provider

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"time"
)

// OpenAI is a Client for the OpenAI-compatible chat completions API. It is
// safe for concurrent use.
type OpenAI struct {
	endpoint string
	apiKey   string
	hc       *http.Client
}

var _ Client = (*OpenAI)(nil)

// NewOpenAI returns a client that POSTs to baseURL + "/chat/completions"
// (baseURL such as "https://api.openai.com/v1", /v1 included as in OpenAI's
// own SDKs) with apiKey as a bearer token. A nil hc means a plain
// http.Client; redirects are never followed (NoRedirects); deadlines come
// from the ctx passed to Complete.
func NewOpenAI(baseURL, apiKey string, hc *http.Client) *OpenAI {
	hc = NoRedirects(hc)
	return &OpenAI{
		endpoint: strings.TrimRight(baseURL, "/") + "/chat/completions",
		apiKey:   apiKey,
		hc:       hc,
	}
}

type chatRequest struct {
	Model          string          `json:"model"`
	Messages       []Message       `json:"messages"`
	MaxTokens      int             `json:"max_tokens,omitempty"`
	ResponseFormat *responseFormat `json:"response_format,omitempty"`
}

// responseFormat is OpenAI's (and Workers AI's) JSON mode switch.
type responseFormat struct {
	Type string `json:"type"`
}

func jsonMode(f *ResponseFormat) *responseFormat {
	if f == nil || f.Type != FormatJSONObject {
		return nil
	}
	return &responseFormat{Type: "json_object"}
}

// Complete sends req once. On failure it returns a *Error: the classified
// provider answer for a non-2xx status (see ClassifyOpenAI); ClassTransient
// "connection_error" (or "timeout"/"canceled") when nothing was sent;
// ClassAmbiguous "timeout", "canceled" or "connection_cut" when the request
// was sent but no full answer came back; ClassTransient "malformed_response"
// or "empty_output" for a 2xx that carries no usable completion;
// ClassRejected "refusal" or "content_policy" when the model declined.
func (c *OpenAI) Complete(ctx context.Context, req Request) (*Response, error) {
	msgs := req.Messages
	if msgs == nil {
		msgs = []Message{}
	}
	h := http.Header{}
	if c.apiKey != "" {
		h.Set("Authorization", "Bearer "+c.apiKey)
	}
	return call{
		hc:       c.hc,
		url:      c.endpoint,
		header:   h,
		payload:  chatRequest{Model: req.Model, Messages: msgs, MaxTokens: req.OutputLimit(), ResponseFormat: jsonMode(req.ResponseFormat)},
		key:      req.IdempotencyKey,
		classify: ClassifyOpenAI,
		parse:    parseCompletion,
	}.do(ctx)
}

// ClassifyOpenAI classifies a non-2xx response from an OpenAI-compatible
// server (OpenAI, Azure, vLLM, llama.cpp, OpenRouter, Gemini's compatible
// endpoint...). It always returns a non-nil *Error; a body it cannot parse is
// read as plain text and the status decides.
//
// It reads the error's code and type fields first, then robust hints in the
// message (billing failures hide behind 400 and 429, types mislead), then the
// status: unknown 4xx are rejected, unknown 5xx transient. An account whose
// key is refused (invalid_api_key, account_deactivated, 401, 403) is
// exhausted. A Retry-After date is measured against the response's Date
// header, else the local clock.
func ClassifyOpenAI(status int, header http.Header, body []byte) *Error {
	return classifyOpenAI(status, header, body, time.Now)
}

func classifyOpenAI(status int, header http.Header, body []byte, now func() time.Time) *Error {
	return classify(status, header, body, now, openAICodes)
}

// openAICodes adds nothing to the shared codes: the OpenAI format is the
// one the others are measured against.
func openAICodes(errorFields) (Class, string, bool) { return "", "", false }

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
		PromptTokens     tokenCount `json:"prompt_tokens"`
		CompletionTokens tokenCount `json:"completion_tokens"`
	} `json:"usage"`
	Error json.RawMessage `json:"error"`
}

// parseCompletion turns a 2xx body into a Response, or into a *Error when it
// holds no usable completion.
func parseCompletion(status int, header http.Header, body []byte) (*Response, error) {
	var cc chatCompletion
	if err := json.Unmarshal(body, &cc); err != nil {
		return nil, malformed(status, err)
	}
	if len(cc.Choices) == 0 {
		if hasJSON(cc.Error) {
			// Some compatible servers and proxies report failures as 200
			// with an error body; it classifies like any other.
			return nil, ClassifyOpenAI(status, header, body)
		}
		return nil, malformed(status, nil)
	}

	choice := cc.Choices[0]
	content, ok := contentText(choice.Message.Content)
	if !ok {
		return nil, malformed(status, nil)
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

	r := TextResponse(content, choice.FinishReason)
	r.Model, r.Status = cc.Model, status
	if cc.Usage != nil {
		r.Usage = &Usage{InputTokens: int64(cc.Usage.PromptTokens), OutputTokens: int64(cc.Usage.CompletionTokens)}
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
