package provider

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"time"
)

// OpenAI is a Client for the OpenAI-compatible chat completions API. It is
// safe for concurrent use.
//
// It sends a Chat as the client wrote it, since Chat is OpenAI's request
// field for field, with Chat.Extra merged at the top level of the body.
// Anthropic's top-level top_k, thinking and cache_control go under those
// names, as any top-level field the chat completions API lacks would go
// as a passthrough field: OpenAI-compatible servers that know them (vLLM,
// OpenRouter) act on them, and OpenAI answers for what it refuses. Its
// Check refuses what chat completions have no place for at all (see
// Check), and a passthrough key that names a field Chat models (or that
// the adapter sets itself, stream and stream_options): such a key would
// override a field Tollgate validated, hashed and budgeted, so it is
// never sent.
type OpenAI struct {
	endpoint   string
	embeddings string // the embeddings endpoint (embed.go)
	// responsesURL is the Responses endpoint, and responses how
	// Responses requests go (ResponsesAuto, ResponsesNative or
	// ResponsesChat; openai_responses.go).
	responsesURL string
	responses    string
	apiKey       string
	hc           *http.Client
}

var (
	_ Client   = (*OpenAI)(nil)
	_ Streamer = (*OpenAI)(nil)
	_ Checker  = (*OpenAI)(nil)
)

// NewOpenAI returns a client that POSTs to baseURL + "/chat/completions"
// (and embeddings to baseURL + "/embeddings")
// (baseURL such as "https://api.openai.com/v1", /v1 included as in OpenAI's
// own SDKs) with apiKey as a bearer token. A nil hc means a plain
// http.Client; redirects are never followed (NoRedirects); deadlines come
// from the ctx passed to Complete.
func NewOpenAI(baseURL, apiKey string, hc *http.Client) *OpenAI {
	hc = NoRedirects(hc)
	return &OpenAI{
		endpoint:   strings.TrimRight(baseURL, "/") + "/chat/completions",
		embeddings: strings.TrimRight(baseURL, "/") + "/embeddings",
		// A Responses request carried natively (openai_responses.go).
		responsesURL: strings.TrimRight(baseURL, "/") + "/responses",
		apiKey:       apiKey,
		hc:           hc,
	}
}

// Check returns an *Unsupported for the first field chat completions
// have no place for, or nil. Fields are taken in this order: messages, in
// order (a thinking or redacted_thinking part, cache_control on a
// message, part or tool call, a tool result's is_error, an image in a
// tool result, a tool message without content), tools (cache_control),
// anthropic_beta (a header of Anthropic's), then the first passthrough
// key, in sorted order, that names a field of the request Tollgate models
// itself. Every other field is carried as is.
func (c *OpenAI) Check(chat Chat) error {
	if u := openAIAnthropicFields(chat); u != nil {
		return u
	}
	return checkPassthrough(chat.Extra)
}

// openAIAnthropicFields names the first of Anthropic's block-level fields
// in chat, which chat completions cannot carry; nil when there is none.
func openAIAnthropicFields(chat Chat) *Unsupported {
	for i, m := range chat.Messages {
		at := fmt.Sprintf("messages[%d]", i)
		for j, p := range m.Content.Parts {
			pat := fmt.Sprintf("%s.content[%d]", at, j)
			switch {
			case p.Type == PartThinking || p.Type == PartRedactedThinking:
				return &Unsupported{Field: pat, Reason: "OpenAI's chat completions have no " + p.Type + " block"}
			case p.CacheControl != nil:
				return &Unsupported{Field: pat + ".cache_control", Reason: "OpenAI's chat completions have no cache_control (OpenAI caches prompts on its own)"}
			case p.Type == PartImage && m.Role == "tool":
				return &Unsupported{Field: pat, Reason: "OpenAI's tool messages hold text only"}
			}
		}
		for j, tc := range m.ToolCalls {
			if tc.CacheControl != nil {
				return &Unsupported{Field: fmt.Sprintf("%s.tool_calls[%d].cache_control", at, j), Reason: "OpenAI's chat completions have no cache_control (OpenAI caches prompts on its own)"}
			}
		}
		switch {
		case m.CacheControl != nil:
			return &Unsupported{Field: at + ".cache_control", Reason: "OpenAI's chat completions have no cache_control (OpenAI caches prompts on its own)"}
		case m.IsError:
			return &Unsupported{Field: at + ".is_error", Reason: "OpenAI's tool messages have no is_error"}
		case m.Role == "tool" && m.Content.IsZero():
			return &Unsupported{Field: at + ".content", Reason: "OpenAI's tool messages need content"}
		}
	}
	for i, t := range chat.Tools {
		if t.CacheControl != nil {
			return &Unsupported{Field: fmt.Sprintf("tools[%d].cache_control", i), Reason: "OpenAI's chat completions have no cache_control (OpenAI caches prompts on its own)"}
		}
	}
	if len(chat.Betas) > 0 {
		return &Unsupported{Field: "anthropic_beta", Reason: "OpenAI's chat completions have no anthropic-beta"}
	}
	return nil
}

func checkPassthrough(extra map[string]json.RawMessage) error {
	for _, k := range slices.Sorted(maps.Keys(extra)) {
		if openAIKnownFields[k] {
			return &Unsupported{Field: k, Reason: "a passthrough field must not override the request's own " + k}
		}
	}
	return nil
}

// Complete sends req once. On failure it returns a *Error: the classified
// provider answer for a non-2xx status (see ClassifyOpenAI); ClassTransient
// "connection_error" (or "timeout"/"canceled") when nothing was sent;
// ClassAmbiguous "timeout", "canceled" or "connection_cut" when the request
// was sent but no full answer came back; ClassTransient "malformed_response"
// or "empty_output" for a 2xx that carries no usable completion;
// ClassRejected "content_policy" when the provider's filter withheld every
// answer. A refusal is an answer: it comes back in its choice's
// Message.Refusal. A request Check refuses is ClassRejected
// "invalid_request", sent nowhere.
func (c *OpenAI) Complete(ctx context.Context, req Request) (*Response, error) {
	if c.nativeCall(req.Chat) {
		return c.completeResponses(ctx, req)
	}
	body, err := openAIBody(req.Chat, false)
	if err != nil {
		return nil, err
	}
	return call{
		hc:       c.hc,
		url:      c.endpoint,
		header:   c.headers(),
		payload:  body,
		key:      req.IdempotencyKey,
		classify: ClassifyOpenAI,
		parse:    parseCompletion,
	}.do(ctx)
}

func (c *OpenAI) headers() http.Header {
	h := http.Header{}
	if c.apiKey != "" {
		h.Set("Authorization", "Bearer "+c.apiKey)
	}
	return h
}

// openAIKnownFields are the body's names that Chat models, and those the
// adapter sets for a stream: a passthrough key among them is never sent.
var openAIKnownFields = func() map[string]bool {
	known := map[string]bool{"stream": true, "stream_options": true}
	var walk func(t reflect.Type)
	walk = func(t reflect.Type) {
		for i := range t.NumField() {
			f := t.Field(i)
			if f.Anonymous {
				walk(f.Type)
				continue
			}
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name != "" && name != "-" && name != "passthrough" {
				known[name] = true
			}
		}
	}
	walk(reflect.TypeFor[Chat]())
	return known
}()

// openAIBody is the chat completions body for chat: its fields under
// OpenAI's names, then its passthrough fields at the top level, keys
// sorted. A stream asks for usage in its last chunk. It fails, as
// ClassRejected "invalid_request" with the *Unsupported as its cause, for
// what Check refuses.
func openAIBody(chat Chat, stream bool) (json.RawMessage, error) {
	if u := openAIAnthropicFields(chat); u != nil {
		return nil, rejectedLocally(u)
	}
	if err := checkPassthrough(chat.Extra); err != nil {
		return nil, rejectedLocally(err)
	}
	extra := chat.Extra
	chat.Extra = nil
	if chat.Messages == nil {
		chat.Messages = []Message{}
	}
	b, err := marshalNoEscape(chat)
	if err != nil {
		return nil, rejectedLocally(err)
	}
	var buf bytes.Buffer
	buf.Write(b[:len(b)-1]) // all but the closing brace
	if stream {
		buf.WriteString(`,"stream":true,"stream_options":{"include_usage":true}`)
	}
	for _, k := range slices.Sorted(maps.Keys(extra)) {
		v := bytes.TrimSpace(extra[k])
		if !json.Valid(v) {
			return nil, rejectedLocally(&Unsupported{Field: k, Reason: "the passthrough value is not valid JSON"})
		}
		name, err := marshalNoEscape(k)
		if err != nil {
			return nil, rejectedLocally(err)
		}
		buf.WriteByte(',')
		buf.Write(name)
		buf.WriteByte(':')
		buf.Write(v)
	}
	buf.WriteByte('}')
	return buf.Bytes(), nil
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
