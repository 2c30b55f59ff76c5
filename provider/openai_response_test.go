package provider_test

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tollgate/tollgate/provider"
)

func toolCall(id, name, args string) provider.ToolCall {
	return provider.ToolCall{ID: id, Type: "function", Function: provider.FunctionCall{Name: name, Arguments: args}}
}

func TestOpenAIResponses(t *testing.T) {
	t.Parallel()
	assistant := func(content string, calls ...provider.ToolCall) provider.Message {
		return provider.Message{Role: "assistant", Content: provider.Text(content), ToolCalls: calls}
	}
	tests := []struct {
		name    string
		body    string
		want    *provider.Response
		wantErr *provider.Error
	}{
		{
			name: "tool call, arguments unchanged",
			body: `{"id":"chatcmpl-B9","object":"chat.completion","created":1741569952,"model":"gpt-4.1-2025-04-14",
				"choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_12345xyz","type":"function",
				"function":{"name":"get_weather","arguments":"{\"location\": \"Paris, France\"}"}}],"refusal":null,"annotations":[]},
				"logprobs":null,"finish_reason":"tool_calls"}],
				"usage":{"prompt_tokens":82,"completion_tokens":17,"total_tokens":99,
				"prompt_tokens_details":{"cached_tokens":0,"audio_tokens":0},
				"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}},
				"service_tier":"default","system_fingerprint":"fp_b376dfbbd5"}`,
			want: &provider.Response{Model: "gpt-4.1-2025-04-14", SystemFingerprint: "fp_b376dfbbd5", Status: 200,
				Usage: &provider.Usage{InputTokens: 82, OutputTokens: 17},
				Choices: []provider.Choice{{FinishReason: "tool_calls",
					Message: assistant("", toolCall("call_12345xyz", "get_weather", `{"location": "Paris, France"}`))}}},
		},
		{
			name: "parallel tool calls",
			body: `{"model":"gpt-4o","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[
				{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}},
				{"id":"call_2","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Tokyo\"}"}}]},
				"finish_reason":"tool_calls"}]}`,
			want: &provider.Response{Model: "gpt-4o", Status: 200, Choices: []provider.Choice{{FinishReason: "tool_calls",
				Message: assistant("", toolCall("call_1", "get_weather", `{"city":"Paris"}`), toolCall("call_2", "get_weather", `{"city":"Tokyo"}`))}}},
		},
		{
			name: "text beside a tool call, arguments as an object on a compatible server",
			body: `{"model":"qwen","choices":[{"index":0,"message":{"role":"assistant","content":"Checking.","tool_calls":[
				{"id":"c1","type":"function","function":{"name":"f","arguments":{ "a" : [1, 2] }}}]},"finish_reason":"tool_calls"}]}`,
			want: &provider.Response{Model: "qwen", Status: 200, Choices: []provider.Choice{{FinishReason: "tool_calls",
				Message: assistant("Checking.", toolCall("c1", "f", `{"a":[1,2]}`))}}},
		},
		{
			name: "refusal",
			body: `{"model":"gpt-4o-2024-08-06","choices":[{"index":0,"message":{"role":"assistant","content":null,
				"refusal":"I'm sorry, I can't assist with that request."},"logprobs":null,"finish_reason":"stop"}],
				"usage":{"prompt_tokens":30,"completion_tokens":10,"total_tokens":40}}`,
			want: &provider.Response{Model: "gpt-4o-2024-08-06", Status: 200, Usage: &provider.Usage{InputTokens: 30, OutputTokens: 10},
				Choices: []provider.Choice{{FinishReason: "stop",
					Message: provider.Message{Role: "assistant", Refusal: "I'm sorry, I can't assist with that request."}}}},
		},
		{
			name: "logprobs kept as given",
			body: `{"model":"gpt-4o","choices":[{"index":0,"message":{"role":"assistant","content":"Hi"},
				"logprobs":{"content":[{"token":"Hi","logprob":-0.0001,"bytes":[72,105],"top_logprobs":[{"token":"Hi","logprob":-0.0001,"bytes":[72,105]}]}],"refusal":null},
				"finish_reason":"stop"}]}`,
			want: &provider.Response{Model: "gpt-4o", Status: 200, Choices: []provider.Choice{{FinishReason: "stop", Message: assistant("Hi"),
				Logprobs: json.RawMessage(`{"content":[{"token":"Hi","logprob":-0.0001,"bytes":[72,105],"top_logprobs":[{"token":"Hi","logprob":-0.0001,"bytes":[72,105]}]}],"refusal":null}`)}}},
		},
		{
			name: "n = 2, out of order",
			body: `{"model":"gpt-4o","choices":[
				{"index":1,"message":{"role":"assistant","content":"Two"},"finish_reason":"length"},
				{"index":0,"message":{"role":"assistant","content":"One"},"finish_reason":"stop"}],
				"usage":{"prompt_tokens":5,"completion_tokens":4}}`,
			want: &provider.Response{Model: "gpt-4o", Status: 200, Usage: &provider.Usage{InputTokens: 5, OutputTokens: 4}, Choices: []provider.Choice{
				{Index: 0, FinishReason: "stop", Message: assistant("One")},
				{Index: 1, FinishReason: "length", Message: assistant("Two")}}},
		},
		{
			name: "n = 2, one of them empty",
			body: `{"model":"m","choices":[{"index":0,"message":{"content":""},"finish_reason":"length"},{"index":1,"message":{"content":"B"},"finish_reason":"stop"}]}`,
			want: &provider.Response{Model: "m", Status: 200, Choices: []provider.Choice{
				{Index: 0, FinishReason: "length", Message: assistant("")},
				{Index: 1, FinishReason: "stop", Message: assistant("B")}}},
		},
		{
			name: "usage classes: cached input and reasoning output",
			body: `{"model":"o4-mini","choices":[{"index":0,"message":{"role":"assistant","content":"42"},"finish_reason":"stop"}],
				"usage":{"prompt_tokens":2006,"completion_tokens":300,"total_tokens":2306,
				"prompt_tokens_details":{"cached_tokens":1920,"audio_tokens":0},
				"completion_tokens_details":{"reasoning_tokens":256,"audio_tokens":0}}}`,
			want: &provider.Response{Model: "o4-mini", Status: 200, Choices: []provider.Choice{{FinishReason: "stop", Message: assistant("42")}},
				Usage: &provider.Usage{InputTokens: 2006, OutputTokens: 300, CachedInputTokens: 1920, ReasoningTokens: 256}},
		},
		{
			name: "usage details null",
			body: `{"model":"m","choices":[{"message":{"content":"x"},"finish_reason":"stop"}],
				"usage":{"prompt_tokens":3,"completion_tokens":1,"prompt_tokens_details":null,"completion_tokens_details":null}}`,
			want: &provider.Response{Model: "m", Status: 200, Usage: &provider.Usage{InputTokens: 3, OutputTokens: 1},
				Choices: []provider.Choice{{FinishReason: "stop", Message: assistant("x")}}},
		},
		{
			name:    "every choice withheld by the filter",
			body:    `{"model":"m","choices":[{"index":0,"message":{"content":null},"finish_reason":"content_filter"},{"index":1,"message":{"content":""},"finish_reason":"stop"}]}`,
			wantErr: &provider.Error{Class: provider.ClassRejected, Status: 200, Code: "content_policy"},
		},
		{
			name:    "no choice holds anything",
			body:    `{"model":"m","choices":[{"index":0,"message":{"content":" "},"finish_reason":"stop"},{"index":1,"message":{"tool_calls":[]},"finish_reason":"stop"}]}`,
			wantErr: &provider.Error{Class: provider.ClassTransient, Status: 200, Code: "empty_output"},
		},
		{
			name:    "tool calls of the wrong shape",
			body:    `{"model":"m","choices":[{"message":{"tool_calls":{"id":"c","function":{"name":"f","arguments":"{}"}}}}]}`,
			wantErr: &provider.Error{Class: provider.ClassTransient, Status: 200, Code: "malformed_response"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := serveCanned(t, 200, "application/json", tt.body)
			got, err := provider.NewOpenAI(s.URL, apiKey, s.Client()).Complete(t.Context(), provider.Request{Chat: agentChat()})
			if tt.wantErr != nil {
				if diff := cmp.Diff(tt.wantErr, asError(t, err), ignoreRaw); diff != "" {
					t.Errorf("error mismatch (-want +got):\n%s", diff)
				}
				return
			}
			if err != nil {
				t.Fatalf("Complete: %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Complete mismatch (-want +got):\n%s", diff)
			}
		})
	}
}
