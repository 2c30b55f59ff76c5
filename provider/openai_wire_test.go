package provider_test

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tollgate/tollgate/provider"
)

// cannedServer answers every request with one canned body and keeps the
// bodies it received.
type cannedServer struct {
	*httptest.Server
	mu     sync.Mutex
	bodies [][]byte
}

// serveCanned starts a server that answers status with body, as
// contentType ("application/json" or "text/event-stream").
func serveCanned(t *testing.T, status int, contentType, body string) *cannedServer {
	t.Helper()
	s := &cannedServer{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		s.bodies = append(s.bodies, b)
		s.mu.Unlock()
		w.Header().Set("Content-Type", contentType)
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *cannedServer) received() [][]byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.bodies
}

// onlyBody is the one body the server received, decoded.
func (s *cannedServer) onlyBody(t *testing.T) any {
	t.Helper()
	got := s.received()
	if len(got) != 1 {
		t.Fatalf("server received %d requests, want 1", len(got))
	}
	return decodeJSON(t, got[0])
}

// asUnsupported unwraps err to the *provider.Unsupported behind it.
func asUnsupported(t *testing.T, err error) *provider.Unsupported {
	t.Helper()
	var u *provider.Unsupported
	if !errors.As(err, &u) {
		t.Fatalf("error %v is not, and does not wrap, a *provider.Unsupported", err)
	}
	return u
}

func ptr[T any](v T) *T { return &v }

const okCompletion = `{"id":"chatcmpl-1","object":"chat.completion","model":"gpt-4.1","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}]}`

// agentChat is a whole tool loop with every field a client may send.
func agentChat() provider.Chat {
	return provider.Chat{
		Model: "gpt-4.1",
		Messages: []provider.Message{
			{Role: "system", Content: provider.Text("You are terse.")},
			{Role: "developer", Content: provider.Text("Use tools.")},
			{Role: "user", Name: "ann", Content: provider.Content{Parts: []provider.Part{
				{Type: "text", Text: "What is in this picture, and the weather in Paris?"},
				{Type: "image_url", ImageURL: &provider.ImageURL{URL: "https://example.com/cat.png?sig=s3cret", Detail: "low"}},
			}}},
			{Role: "assistant", ToolCalls: []provider.ToolCall{
				{ID: "call_a", Type: "function", Function: provider.FunctionCall{Name: "get_weather", Arguments: `{"city": "Paris"}`}},
				{ID: "call_b", Type: "function", Function: provider.FunctionCall{Name: "get_time", Arguments: `{"tz":"Europe/Paris"}`}},
			}},
			{Role: "tool", ToolCallID: "call_a", Content: provider.Text(`{"temp_c":21}`)},
			{Role: "tool", ToolCallID: "call_b", Content: provider.Text("14:02")},
			{Role: "assistant", Refusal: "I can't describe people."},
		},
		MaxCompletionTokens: 300,
		Tools: []provider.Tool{
			{Type: "function", Function: provider.FunctionDef{Name: "get_weather", Description: "Weather now", Strict: ptr(true),
				Parameters: json.RawMessage(`{"additionalProperties":false,"properties":{"city":{"type":"string"}},"required":["city"],"type":"object"}`)}},
			{Type: "function", Function: provider.FunctionDef{Name: "get_time"}},
		},
		ToolChoice:        &provider.ToolChoice{Function: "get_weather"},
		ParallelToolCalls: ptr(false),
		ResponseFormat: &provider.ResponseFormat{Type: "json_schema", JSONSchema: &provider.JSONSchema{Name: "answer", Strict: ptr(true),
			Schema: json.RawMessage(`{"properties":{"a":{"type":"string"}},"type":"object"}`)}},
		Params: provider.Params{
			Temperature: ptr(0.2), TopP: ptr(0.9), Seed: ptr(int64(42)), Stop: provider.Stop{"END", "STOP"},
			PresencePenalty: ptr(0.5), FrequencyPenalty: ptr(-0.5), LogitBias: map[string]int{"50256": -100},
			Logprobs: ptr(true), TopLogprobs: ptr(2), N: 2, User: "u-1", SafetyIdentifier: "sid-1",
			ReasoningEffort: "low", Verbosity: "high",
		},
	}
}

// agentBody is agentChat as OpenAI must receive it.
const agentBody = `{
	"model": "gpt-4.1",
	"messages": [
		{"role": "system", "content": "You are terse."},
		{"role": "developer", "content": "Use tools."},
		{"role": "user", "name": "ann", "content": [
			{"type": "text", "text": "What is in this picture, and the weather in Paris?"},
			{"type": "image_url", "image_url": {"url": "https://example.com/cat.png?sig=s3cret", "detail": "low"}}
		]},
		{"role": "assistant", "tool_calls": [
			{"id": "call_a", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}},
			{"id": "call_b", "type": "function", "function": {"name": "get_time", "arguments": "{\"tz\":\"Europe/Paris\"}"}}
		]},
		{"role": "tool", "tool_call_id": "call_a", "content": "{\"temp_c\":21}"},
		{"role": "tool", "tool_call_id": "call_b", "content": "14:02"},
		{"role": "assistant", "refusal": "I can't describe people."}
	],
	"max_completion_tokens": 300,
	"tools": [
		{"type": "function", "function": {"name": "get_weather", "description": "Weather now", "strict": true,
			"parameters": {"additionalProperties": false, "properties": {"city": {"type": "string"}}, "required": ["city"], "type": "object"}}},
		{"type": "function", "function": {"name": "get_time"}}
	],
	"tool_choice": {"type": "function", "function": {"name": "get_weather"}},
	"parallel_tool_calls": false,
	"response_format": {"type": "json_schema", "json_schema": {"name": "answer", "strict": true,
		"schema": {"properties": {"a": {"type": "string"}}, "type": "object"}}},
	"temperature": 0.2, "top_p": 0.9, "seed": 42, "stop": ["END", "STOP"],
	"presence_penalty": 0.5, "frequency_penalty": -0.5, "logit_bias": {"50256": -100},
	"logprobs": true, "top_logprobs": 2, "n": 2, "user": "u-1", "safety_identifier": "sid-1",
	"reasoning_effort": "low", "verbosity": "high"
}`

func TestOpenAIRequestBody(t *testing.T) {
	t.Parallel()
	withExtra := func(c provider.Chat, extra map[string]string) provider.Chat {
		c.Extra = map[string]json.RawMessage{}
		for k, v := range extra {
			c.Extra[k] = json.RawMessage(v)
		}
		return c
	}
	plain := provider.Chat{Model: "gpt-4o-mini", Messages: []provider.Message{{Role: "user", Content: provider.Text("hi")}}}
	tests := []struct {
		name   string
		chat   provider.Chat
		stream bool
		want   string
	}{
		{name: "every field", chat: agentChat(), want: agentBody},
		{name: "every field, streamed", chat: agentChat(), stream: true,
			want: agentBody[:len(agentBody)-1] + `, "stream": true, "stream_options": {"include_usage": true}}`},
		{
			name: "max_tokens as the client named it",
			chat: provider.Chat{Model: "m", Messages: plain.Messages, MaxTokens: 7},
			want: `{"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 7}`,
		},
		{
			name: "no limit is sent as none",
			chat: plain,
			want: `{"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]}`,
		},
		{
			name: "passthrough fields merge at the top level",
			chat: withExtra(plain, map[string]string{
				"service_tier":     `"flex"`,
				"prompt_cache_key": `"user-42"`,
				"prediction":       `{"type": "content", "content": "hello <b>"}`,
				"metadata":         `{"k": "v"}`,
			}),
			want: `{"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}],
				"service_tier": "flex", "prompt_cache_key": "user-42", "metadata": {"k": "v"},
				"prediction": {"type": "content", "content": "hello <b>"}}`,
		},
		{
			name:   "passthrough fields beside the stream's own",
			chat:   withExtra(plain, map[string]string{"store": `true`}),
			stream: true,
			want: `{"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}], "store": true,
				"stream": true, "stream_options": {"include_usage": true}}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var s *cannedServer
			c := func() *provider.OpenAI { return provider.NewOpenAI(s.URL, apiKey, s.Client()) }
			var err error
			if tt.stream {
				s = serveCanned(t, 200, "text/event-stream", "data: "+`{"choices":[{"index":0,"delta":{"content":"ok"}}]}`+"\n\ndata: [DONE]\n\n")
				_, err = c().Stream(t.Context(), provider.Request{Chat: tt.chat}, nil)
			} else {
				s = serveCanned(t, 200, "application/json", okCompletion)
				_, err = c().Complete(t.Context(), provider.Request{Chat: tt.chat})
			}
			if err != nil {
				t.Fatalf("call: %v", err)
			}
			if diff := cmp.Diff(decodeJSON(t, []byte(tt.want)), s.onlyBody(t)); diff != "" {
				t.Errorf("body mismatch (-want +got):\n%s", diff)
			}
			if err := c().Check(tt.chat); err != nil {
				t.Errorf("Check = %v, want nil", err)
			}
		})
	}
}

// TestOpenAIRefusesPassthroughThatOverridesAField checks that a
// passthrough key naming a field Tollgate models is refused by Check and
// never sent: it would replace what Tollgate validated, hashed and
// budgeted.
func TestOpenAIRefusesPassthroughThatOverridesAField(t *testing.T) {
	t.Parallel()
	for _, key := range []string{"model", "messages", "temperature", "max_tokens", "tools", "n", "stream", "stream_options"} {
		t.Run(key, func(t *testing.T) {
			t.Parallel()
			s := serveCanned(t, 200, "application/json", okCompletion)
			c := provider.NewOpenAI(s.URL, apiKey, s.Client())
			chat := provider.Chat{Model: "m", Messages: []provider.Message{{Role: "user", Content: provider.Text("hi")}},
				Extra: map[string]json.RawMessage{"service_tier": json.RawMessage(`"flex"`), key: json.RawMessage(`1`)}}
			want := &provider.Unsupported{Field: key, Reason: "a passthrough field must not override the request's own " + key}
			if diff := cmp.Diff(want, asUnsupported(t, c.Check(chat))); diff != "" {
				t.Errorf("Check mismatch (-want +got):\n%s", diff)
			}
			_, err := c.Complete(t.Context(), provider.Request{Chat: chat})
			pe := asError(t, err)
			if pe.Class != provider.ClassRejected || pe.Code != provider.CodeInvalidRequest {
				t.Errorf("Complete error = %v, want rejected/invalid_request", pe)
			}
			if diff := cmp.Diff(want, asUnsupported(t, err)); diff != "" {
				t.Errorf("Complete's cause mismatch (-want +got):\n%s", diff)
			}
			_, err = c.Stream(t.Context(), provider.Request{Chat: chat}, nil)
			asUnsupported(t, err)
			if n := len(s.received()); n != 0 {
				t.Errorf("server received %d requests, want 0", n)
			}
		})
	}
}
