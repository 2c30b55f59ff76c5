package provider_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tollgate/tollgate/provider"
)

// sse writes chunks as a Server-Sent Event stream, ended by [DONE] unless
// cut.
func sse(cut bool, chunks ...string) string {
	var b strings.Builder
	for _, c := range chunks {
		b.WriteString("data: " + c + "\n\n")
	}
	if !cut {
		b.WriteString("data: [DONE]\n\n")
	}
	return b.String()
}

func callDelta(choice, index int, id, name, args string) provider.Delta {
	return provider.Delta{Choice: choice, ToolCall: &provider.ToolCallDelta{Index: index, ID: id, Name: name, Arguments: args}}
}

func TestOpenAIStream(t *testing.T) {
	t.Parallel()
	const head = `"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4.1","system_fingerprint":"fp_1"`
	chunk := func(rest string) string { return "{" + head + "," + rest + "}" }
	usage := chunk(`"choices":[],"usage":{"prompt_tokens":40,"completion_tokens":20,"total_tokens":60,"prompt_tokens_details":{"cached_tokens":32},"completion_tokens_details":{"reasoning_tokens":8}}`)
	wantUsage := &provider.Usage{InputTokens: 40, OutputTokens: 20, CachedInputTokens: 32, ReasoningTokens: 8}
	meta := func(u *provider.Usage, choices ...provider.Choice) *provider.Response {
		return &provider.Response{Model: "gpt-4.1", SystemFingerprint: "fp_1", Usage: u, Status: 200, Choices: choices}
	}
	tests := []struct {
		name       string
		body       string
		wantDeltas []provider.Delta
		want       *provider.Response
		wantErr    *provider.Error
	}{
		{
			name: "text, usage classes from the final chunk",
			body: sse(false,
				chunk(`"choices":[{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":null}],"usage":null`),
				chunk(`"choices":[{"index":0,"delta":{"content":"Hel"},"finish_reason":null}],"usage":null`),
				chunk(`"choices":[{"index":0,"delta":{"content":"lo"},"finish_reason":null}],"usage":null`),
				chunk(`"choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":null`),
				usage),
			wantDeltas: []provider.Delta{{Content: "Hel"}, {Content: "lo"}},
			want:       meta(wantUsage, provider.Choice{FinishReason: "stop", Message: provider.Message{Role: "assistant", Content: provider.Text("Hello")}}),
		},
		{
			name: "one tool call, arguments in fragments across chunks",
			body: sse(false,
				chunk(`"choices":[{"index":0,"delta":{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_DdmO9pD3xa9XTPNJ32zg2hcA","type":"function","function":{"name":"get_weather","arguments":""}}],"refusal":null},"finish_reason":null}]`),
				chunk(`"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\""}}]},"finish_reason":null}]`),
				chunk(`"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"location"}}]},"finish_reason":null}]`),
				chunk(`"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\":\"Paris, France\"}"}}]},"finish_reason":null}]`),
				chunk(`"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]`),
				usage),
			wantDeltas: []provider.Delta{
				callDelta(0, 0, "call_DdmO9pD3xa9XTPNJ32zg2hcA", "get_weather", ""),
				callDelta(0, 0, "", "", `{"`),
				callDelta(0, 0, "", "", `location`),
				callDelta(0, 0, "", "", `":"Paris, France"}`),
			},
			want: meta(wantUsage, provider.Choice{FinishReason: "tool_calls", Message: provider.Message{Role: "assistant", Content: provider.Text(""),
				ToolCalls: []provider.ToolCall{toolCall("call_DdmO9pD3xa9XTPNJ32zg2hcA", "get_weather", `{"location":"Paris, France"}`)}}}),
		},
		{
			name: "two parallel calls interleaved",
			body: sse(false,
				chunk(`"choices":[{"index":0,"delta":{"role":"assistant","tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"get_weather","arguments":""}}]}}]`),
				chunk(`"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"call_b","type":"function","function":{"name":"get_time","arguments":"{\"tz\":"}}]}}]`),
				chunk(`"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"city\":"}}]}}]`),
				chunk(`"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"function":{"arguments":"\"UTC\"}"}},{"index":0,"function":{"arguments":"\"Oslo\"}"}}]}}]`),
				chunk(`"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]`)),
			wantDeltas: []provider.Delta{
				callDelta(0, 0, "call_a", "get_weather", ""),
				callDelta(0, 1, "call_b", "get_time", `{"tz":`),
				callDelta(0, 0, "", "", `{"city":`),
				callDelta(0, 1, "", "", `"UTC"}`),
				callDelta(0, 0, "", "", `"Oslo"}`),
			},
			want: meta(nil, provider.Choice{FinishReason: "tool_calls", Message: provider.Message{Role: "assistant", Content: provider.Text(""),
				ToolCalls: []provider.ToolCall{toolCall("call_a", "get_weather", `{"city":"Oslo"}`), toolCall("call_b", "get_time", `{"tz":"UTC"}`)}}}),
		},
		{
			name: "n = 2 interleaved, logprobs gathered",
			body: sse(false,
				chunk(`"choices":[{"index":1,"delta":{"content":"B"},"logprobs":{"content":[{"token":"B","logprob":-1,"bytes":[66],"top_logprobs":[]}],"refusal":null}}]`),
				chunk(`"choices":[{"index":0,"delta":{"content":"A"},"logprobs":{"content":[{"token":"A","logprob":-2,"bytes":[65],"top_logprobs":[]}],"refusal":null}}]`),
				chunk(`"choices":[{"index":0,"delta":{"content":"a"},"logprobs":{"content":[{"token":"a","logprob":-3,"bytes":[97],"top_logprobs":[]}],"refusal":null},"finish_reason":"stop"}]`),
				chunk(`"choices":[{"index":1,"delta":{},"logprobs":null,"finish_reason":"length"}]`)),
			wantDeltas: []provider.Delta{{Choice: 1, Content: "B"}, {Choice: 0, Content: "A"}, {Choice: 0, Content: "a"}},
			want: meta(nil,
				provider.Choice{Index: 0, FinishReason: "stop", Message: provider.Message{Role: "assistant", Content: provider.Text("Aa")},
					Logprobs: json.RawMessage(`{"content":[{"token":"A","logprob":-2,"bytes":[65],"top_logprobs":[]},{"token":"a","logprob":-3,"bytes":[97],"top_logprobs":[]}],"refusal":null}`)},
				provider.Choice{Index: 1, FinishReason: "length", Message: provider.Message{Role: "assistant", Content: provider.Text("B")},
					Logprobs: json.RawMessage(`{"content":[{"token":"B","logprob":-1,"bytes":[66],"top_logprobs":[]}],"refusal":null}`)}),
		},
		{
			name: "refusal",
			body: sse(false,
				chunk(`"choices":[{"index":0,"delta":{"role":"assistant","content":null,"refusal":""}}]`),
				chunk(`"choices":[{"index":0,"delta":{"refusal":"I'm sorry, "}}]`),
				chunk(`"choices":[{"index":0,"delta":{"refusal":"I can't."}}]`),
				chunk(`"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]`)),
			wantDeltas: []provider.Delta{{Refusal: "I'm sorry, "}, {Refusal: "I can't."}},
			want: meta(nil, provider.Choice{FinishReason: "stop", Message: provider.Message{Role: "assistant", Content: provider.Text(""),
				Refusal: "I'm sorry, I can't."}}),
		},
		{
			name: "cut inside a tool call: the partial answer comes back",
			body: sse(true,
				chunk(`"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"f","arguments":"{\"x\""}}]}}]`)),
			wantDeltas: []provider.Delta{callDelta(0, 0, "call_a", "f", `{"x"`)},
			want: meta(nil, provider.Choice{Message: provider.Message{Role: "assistant", Content: provider.Text(""),
				ToolCalls: []provider.ToolCall{toolCall("call_a", "f", `{"x"`)}}}),
			wantErr: &provider.Error{Class: provider.ClassAmbiguous, Status: 200, Code: provider.CodeStreamCut},
		},
		{
			name:    "a choice index out of bounds",
			body:    sse(false, chunk(`"choices":[{"index":100000000,"delta":{"content":"x"}}]`)),
			want:    meta(nil, provider.Choice{Message: provider.Message{Role: "assistant"}}),
			wantErr: &provider.Error{Class: provider.ClassTransient, Status: 200, Code: provider.CodeMalformedResponse},
		},
		{
			name:    "a tool call index out of bounds",
			body:    sse(false, chunk(`"choices":[{"index":0,"delta":{"tool_calls":[{"index":-1,"id":"c","function":{"name":"f"}}]}}]`)),
			want:    meta(nil, provider.Choice{Message: provider.Message{Role: "assistant", Content: provider.Text("")}}),
			wantErr: &provider.Error{Class: provider.ClassTransient, Status: 200, Code: provider.CodeMalformedResponse},
		},
		{
			name:    "every choice filtered",
			body:    sse(false, chunk(`"choices":[{"index":0,"delta":{"content":""},"finish_reason":"content_filter"}]`)),
			want:    meta(nil, provider.Choice{FinishReason: "content_filter", Message: provider.Message{Role: "assistant", Content: provider.Text("")}}),
			wantErr: &provider.Error{Class: provider.ClassRejected, Status: 200, Code: provider.CodeContentPolicy},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := serveCanned(t, 200, "text/event-stream", tt.body)
			var deltas []provider.Delta
			got, err := provider.NewOpenAI(s.URL, apiKey, s.Client()).Stream(t.Context(), provider.Request{Chat: agentChat()},
				func(d provider.Delta) { deltas = append(deltas, d) })
			if tt.wantErr != nil {
				if diff := cmp.Diff(tt.wantErr, asError(t, err), ignoreRaw); diff != "" {
					t.Errorf("error mismatch (-want +got):\n%s", diff)
				}
			} else if err != nil {
				t.Fatalf("Stream: %v", err)
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

// TestOpenAIStreamWholeAnswer checks a server that ignores "stream" and
// answers one JSON body: the answer is relayed as the deltas a stream of
// it would carry.
func TestOpenAIStreamWholeAnswer(t *testing.T) {
	t.Parallel()
	s := serveCanned(t, 200, "application/json", `{"model":"m","choices":[
		{"index":0,"message":{"role":"assistant","content":"Let me check.","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]},"finish_reason":"tool_calls"},
		{"index":1,"message":{"role":"assistant","content":null,"refusal":"No."},"finish_reason":"stop"}],
		"usage":{"prompt_tokens":9,"completion_tokens":3}}`)
	var deltas []provider.Delta
	got, err := provider.NewOpenAI(s.URL, apiKey, s.Client()).Stream(t.Context(), provider.Request{Chat: agentChat()},
		func(d provider.Delta) { deltas = append(deltas, d) })
	if err != nil {
		t.Fatalf("Stream: %v", err)
	}
	wantDeltas := []provider.Delta{{Content: "Let me check."}, callDelta(0, 0, "c1", "f", "{}"), {Choice: 1, Refusal: "No."}}
	if diff := cmp.Diff(wantDeltas, deltas); diff != "" {
		t.Errorf("deltas mismatch (-want +got):\n%s", diff)
	}
	want := &provider.Response{Model: "m", Status: 200, Usage: &provider.Usage{InputTokens: 9, OutputTokens: 3}, Choices: []provider.Choice{
		{FinishReason: "tool_calls", Message: provider.Message{Role: "assistant", Content: provider.Text("Let me check."), ToolCalls: []provider.ToolCall{toolCall("c1", "f", "{}")}}},
		{Index: 1, FinishReason: "stop", Message: provider.Message{Role: "assistant", Content: provider.Text(""), Refusal: "No."}},
	}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Stream mismatch (-want +got):\n%s", diff)
	}
}
