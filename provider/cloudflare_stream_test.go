package provider_test

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tollgate/tollgate/provider"
)

func TestWorkersAIStream(t *testing.T) {
	t.Parallel()
	user := []provider.Message{{Role: "user", Content: provider.Text("hi")}}
	chat := provider.Chat{Model: llama, Messages: user, MaxTokens: 32}
	streamBody := `{"messages": [{"role": "user", "content": "hi"}], "max_tokens": 32, "stream": true}`
	assistant := func(content string, calls ...provider.ToolCall) provider.Message {
		return provider.Message{Role: "assistant", Content: provider.Text(content), ToolCalls: calls}
	}
	tests := []struct {
		name        string
		chat        provider.Chat
		contentType string
		body        string
		wantBody    string
		wantDeltas  []provider.Delta
		want        *provider.Response
		wantErr     *provider.Error
	}{
		{
			name: "text, usage in the last event",
			chat: chat, contentType: "text/event-stream",
			body: sse(false, `{"response":"Hel","p":"abdef"}`, `{"response":"lo","p":"ab"}`,
				`{"response":"","usage":{"prompt_tokens":12,"completion_tokens":2,"total_tokens":14}}`),
			wantBody:   streamBody,
			wantDeltas: []provider.Delta{{Content: "Hel"}, {Content: "lo"}},
			want: &provider.Response{Status: 200, Usage: &provider.Usage{InputTokens: 12, OutputTokens: 2},
				Choices: []provider.Choice{{Message: assistant("Hello")}}},
		},
		{
			name: "tool calls, each whole",
			chat: chat, contentType: "text/event-stream",
			body: sse(false, `{"response":"","tool_calls":[{"name":"get_weather","arguments":{"city":"Paris"}}]}`,
				`{"response":"","tool_calls":[{"name":"get_weather","arguments":{"city":"Oslo"}}]}`,
				`{"response":"","usage":{"prompt_tokens":30,"completion_tokens":20}}`),
			wantBody: streamBody,
			wantDeltas: []provider.Delta{
				callDelta(0, 0, "call_0", "get_weather", `{"city":"Paris"}`),
				callDelta(0, 1, "call_1", "get_weather", `{"city":"Oslo"}`),
			},
			want: &provider.Response{Status: 200, Usage: &provider.Usage{InputTokens: 30, OutputTokens: 20},
				Choices: []provider.Choice{{FinishReason: "tool_calls", Message: assistant("",
					toolCall("call_0", "get_weather", `{"city":"Paris"}`), toolCall("call_1", "get_weather", `{"city":"Oslo"}`))}}},
		},
		{
			name: "OpenAI-shaped chunks",
			chat: chat, contentType: "text/event-stream",
			body: sse(false, `{"id":"x","object":"chat.completion.chunk","model":"@cf/openai/gpt-oss-20b","choices":[{"index":0,"delta":{"content":"Hi"}}]}`,
				`{"id":"x","object":"chat.completion.chunk","model":"@cf/openai/gpt-oss-20b","choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":1}}`),
			wantBody:   streamBody,
			wantDeltas: []provider.Delta{{Content: "Hi"}},
			want: &provider.Response{Model: "@cf/openai/gpt-oss-20b", Status: 200, Usage: &provider.Usage{InputTokens: 3, OutputTokens: 1},
				Choices: []provider.Choice{{FinishReason: "stop", Message: assistant("Hi")}}},
		},
		{
			name: "JSON mode does not stream: asked whole, relayed whole",
			chat: provider.Chat{Model: llama, Messages: user, ResponseFormat: &provider.ResponseFormat{Type: "json_object"}},
			// An event stream here would fail to parse: the request must be whole.
			contentType: "application/json",
			body:        `{"result":{"response":{"a":1},"usage":{"prompt_tokens":5,"completion_tokens":4}},"success":true,"errors":[],"messages":[]}`,
			wantBody:    `{"messages": [{"role": "user", "content": "hi"}], "response_format": {"type": "json_object"}}`,
			wantDeltas:  []provider.Delta{{Content: `{"a":1}`}},
			want: &provider.Response{Status: 200, Usage: &provider.Usage{InputTokens: 5, OutputTokens: 4},
				Choices: []provider.Choice{{FinishReason: "stop", Message: assistant(`{"a":1}`)}}},
		},
		{
			name: "a server that answers whole",
			chat: chat, contentType: "application/json",
			body:       `{"result":{"response":null,"tool_calls":[{"name":"f","arguments":{}}]},"success":true,"errors":[],"messages":[]}`,
			wantBody:   streamBody,
			wantDeltas: []provider.Delta{callDelta(0, 0, "call_0", "f", "{}")},
			want: &provider.Response{Status: 200, Choices: []provider.Choice{{FinishReason: "tool_calls",
				Message: assistant("", toolCall("call_0", "f", "{}"))}}},
		},
		{
			name: "cut",
			chat: chat, contentType: "text/event-stream",
			body:       sse(true, `{"response":"Hel"}`),
			wantBody:   streamBody,
			wantDeltas: []provider.Delta{{Content: "Hel"}},
			want:       &provider.Response{Status: 200, Choices: []provider.Choice{{Message: assistant("Hel")}}},
			wantErr:    &provider.Error{Class: provider.ClassAmbiguous, Status: 200, Code: provider.CodeStreamCut},
		},
		{
			name: "nothing but usage",
			chat: chat, contentType: "text/event-stream",
			body:     sse(false, `{"response":"","usage":{"prompt_tokens":3,"completion_tokens":0}}`),
			wantBody: streamBody,
			want: &provider.Response{Status: 200, Usage: &provider.Usage{InputTokens: 3},
				Choices: []provider.Choice{{Message: provider.Message{Role: "assistant"}}}},
			wantErr: &provider.Error{Class: provider.ClassTransient, Status: 200, Code: provider.CodeEmptyOutput},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := serveCanned(t, 200, tt.contentType, tt.body)
			var deltas []provider.Delta
			got, err := provider.NewCloudflare(s.URL, "acc-1", apiKey, s.Client()).Stream(t.Context(), provider.Request{Chat: tt.chat},
				func(d provider.Delta) { deltas = append(deltas, d) })
			if tt.wantErr != nil {
				if diff := cmp.Diff(tt.wantErr, asError(t, err), ignoreRaw); diff != "" {
					t.Errorf("error mismatch (-want +got):\n%s", diff)
				}
			} else if err != nil {
				t.Fatalf("Stream: %v", err)
			}
			if diff := cmp.Diff(decodeJSON(t, []byte(tt.wantBody)), s.onlyBody(t)); diff != "" {
				t.Errorf("body mismatch (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantDeltas, deltas); diff != "" {
				t.Errorf("deltas mismatch (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Stream mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestWorkersAIStreamRefuses checks that Stream refuses what Check refuses,
// sending nothing.
func TestWorkersAIStreamRefuses(t *testing.T) {
	t.Parallel()
	s := serveCanned(t, 200, "text/event-stream", sse(false, `{"response":"x"}`))
	chat := provider.Chat{Model: llama, Messages: []provider.Message{{Role: "user", Content: provider.Text("hi")}},
		Extra: map[string]json.RawMessage{"service_tier": json.RawMessage(`"flex"`)}}
	_, err := provider.NewCloudflare(s.URL, "acc-1", apiKey, s.Client()).Stream(t.Context(), provider.Request{Chat: chat}, nil)
	want := &provider.Unsupported{Field: "service_tier", Reason: "Workers AI has no service_tier"}
	if diff := cmp.Diff(want, asUnsupported(t, err)); diff != "" {
		t.Errorf("Stream's cause mismatch (-want +got):\n%s", diff)
	}
	if n := len(s.received()); n != 0 {
		t.Errorf("server received %d requests, want 0", n)
	}
}

// TestWorkersAIStreamAgainstFake streams from the fake provider, which
// answers Workers AI whole.
func TestWorkersAIStreamAgainstFake(t *testing.T) {
	t.Parallel()
	msgs := []provider.Message{{Role: "user", Content: provider.Text("Say hi")}}
	_, c := startFakeKind(t, provider.KindCloudflare)
	s, ok := c.(provider.Streamer)
	if !ok {
		t.Fatalf("%T is not a provider.Streamer", c)
	}
	var text string
	got, err := s.Stream(t.Context(), provider.Request{Chat: provider.Chat{Model: llama, Messages: msgs, MaxTokens: 64}}, func(d provider.Delta) { text += d.Content })
	if err != nil {
		t.Fatalf("Stream: %v", err)
	}
	if want := fakeContent(t, msgs); got.Text() != want || text != want {
		t.Errorf("Stream text = %q, relayed %q, want %q", got.Text(), text, want)
	}
}
