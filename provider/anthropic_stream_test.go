package provider_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tollgate/tollgate/provider"
)

// sseEvents writes Anthropic's stream framing: an event line, a data line
// and a blank line per event.
func sseEvents(events ...string) string {
	var b strings.Builder
	for _, ev := range events {
		name, data, _ := strings.Cut(ev, " ")
		b.WriteString("event: " + name + "\ndata: " + data + "\n\n")
	}
	return b.String()
}

const (
	streamStart = `message_start {"type":"message_start","message":{"id":"msg_014p7gG3wDgGV9EUtLvnow3U","type":"message","role":"assistant","model":"claude-sonnet-4-5-20250929","stop_sequence":null,"usage":{"input_tokens":472,"cache_creation_input_tokens":100,"cache_read_input_tokens":2000,"output_tokens":2},"content":[],"stop_reason":null}}`
	streamStop  = `message_stop {"type":"message_stop"}`
)

func TestAnthropicStream(t *testing.T) {
	t.Parallel()
	interleaved := sseEvents(
		streamStart,
		`content_block_start {"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}}`,
		`content_block_delta {"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"Two tools."}}`,
		`content_block_delta {"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"EqQBCgIYAhIM"}}`,
		`content_block_stop {"type":"content_block_stop","index":0}`,
		`ping {"type": "ping"}`,
		`content_block_start {"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}`,
		`content_block_delta {"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"Checking "}}`,
		`content_block_stop {"type":"content_block_stop","index":1}`,
		`content_block_start {"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"toolu_01T1x1fJ34qAmk2tNTrN7Up6","name":"get_weather","input":{}}}`,
		`content_block_delta {"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":""}}`,
		`content_block_delta {"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"{\"city\": \"Pa"}}`,
		`content_block_delta {"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"ris\"}"}}`,
		`content_block_stop {"type":"content_block_stop","index":2}`,
		`content_block_start {"type":"content_block_start","index":3,"content_block":{"type":"text","text":""}}`,
		`content_block_delta {"type":"content_block_delta","index":3,"delta":{"type":"text_delta","text":"and the time."}}`,
		`content_block_stop {"type":"content_block_stop","index":3}`,
		`content_block_start {"type":"content_block_start","index":4,"content_block":{"type":"tool_use","id":"toolu_02","name":"now","input":{}}}`,
		`content_block_delta {"type":"content_block_delta","index":4,"delta":{"type":"input_json_delta","partial_json":""}}`,
		`content_block_stop {"type":"content_block_stop","index":4}`,
		`message_delta {"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":89}}`,
		streamStop,
	)
	calls := []provider.ToolCall{
		{ID: "toolu_01T1x1fJ34qAmk2tNTrN7Up6", Type: "function", Function: provider.FunctionCall{Name: "get_weather", Arguments: `{"city": "Paris"}`}},
		{ID: "toolu_02", Type: "function", Function: provider.FunctionCall{Name: "now", Arguments: `{}`}},
	}
	tests := []struct {
		name        string
		contentType string
		body        string
		wantDeltas  []provider.Delta
		want        *provider.Response
		wantErr     *provider.Error
	}{
		{
			name: "thinking, interleaved text and two tool calls",
			body: interleaved,
			wantDeltas: []provider.Delta{
				{Thinking: "Two tools."},
				{Signature: "EqQBCgIYAhIM"},
				{Content: "Checking "},
				{ToolCall: &provider.ToolCallDelta{Index: 0, ID: "toolu_01T1x1fJ34qAmk2tNTrN7Up6", Name: "get_weather"}},
				{ToolCall: &provider.ToolCallDelta{Index: 0, Arguments: `{"city": "Pa`}},
				{ToolCall: &provider.ToolCallDelta{Index: 0, Arguments: `ris"}`}},
				{Content: "and the time."},
				{ToolCall: &provider.ToolCallDelta{Index: 1, ID: "toolu_02", Name: "now"}},
				{ToolCall: &provider.ToolCallDelta{Index: 1, Arguments: `{}`}},
			},
			want: &provider.Response{
				Choices: []provider.Choice{{
					Message: provider.Message{Role: "assistant", Content: provider.Content{Parts: []provider.Part{
						{Type: "thinking", Thinking: "Two tools.", Signature: "EqQBCgIYAhIM"},
						{Type: "text", Text: "Checking "}, {Type: "text", Text: "and the time."},
					}}, ToolCalls: calls},
					FinishReason: "tool_calls",
				}},
				Model:  "claude-sonnet-4-5-20250929",
				Usage:  &provider.Usage{InputTokens: 2572, OutputTokens: 89, CachedInputTokens: 2000, CacheWriteTokens: 100},
				Status: 200,
			},
		},
		{
			name: "cut inside a tool call",
			body: sseEvents(streamStart,
				`content_block_start {"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_9","name":"get_weather","input":{}}}`,
				`content_block_delta {"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"ci"}}`,
			),
			wantDeltas: []provider.Delta{
				{ToolCall: &provider.ToolCallDelta{Index: 0, ID: "toolu_9", Name: "get_weather"}},
				{ToolCall: &provider.ToolCallDelta{Index: 0, Arguments: `{"ci`}},
			},
			want: &provider.Response{
				Choices: []provider.Choice{{Message: provider.Message{Role: "assistant", ToolCalls: []provider.ToolCall{
					{ID: "toolu_9", Type: "function", Function: provider.FunctionCall{Name: "get_weather", Arguments: `{"ci`}},
				}}}},
				Model:  "claude-sonnet-4-5-20250929",
				Usage:  &provider.Usage{InputTokens: 2572, OutputTokens: 2, CachedInputTokens: 2000, CacheWriteTokens: 100},
				Status: 200,
			},
			wantErr: &provider.Error{Class: provider.ClassAmbiguous, Status: 200, Code: "stream_cut"},
		},
		{
			name: "refusal before any text",
			body: sseEvents(streamStart,
				`message_delta {"type":"message_delta","delta":{"stop_reason":"refusal","stop_sequence":null},"usage":{"output_tokens":0}}`,
				streamStop),
			want: &provider.Response{
				Choices: []provider.Choice{{Message: provider.Message{Role: "assistant"}, FinishReason: "content_filter"}},
				Model:   "claude-sonnet-4-5-20250929",
				Usage:   &provider.Usage{InputTokens: 2572, CachedInputTokens: 2000, CacheWriteTokens: 100},
				Status:  200,
			},
			wantErr: &provider.Error{Class: provider.ClassRejected, Status: 200, Code: "refusal"},
		},
		{
			name: "redacted thinking, and a stop sequence",
			body: sseEvents(streamStart,
				`content_block_start {"type":"content_block_start","index":0,"content_block":{"type":"redacted_thinking","data":"EmwKAhgBEgy3va"}}`,
				`content_block_stop {"type":"content_block_stop","index":0}`,
				`content_block_start {"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}`,
				`content_block_delta {"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"one, two"}}`,
				`content_block_stop {"type":"content_block_stop","index":1}`,
				`message_delta {"type":"message_delta","delta":{"stop_reason":"stop_sequence","stop_sequence":"three"},"usage":{"output_tokens":4}}`,
				streamStop),
			wantDeltas: []provider.Delta{{RedactedThinking: "EmwKAhgBEgy3va"}, {Content: "one, two"}},
			want: &provider.Response{
				Choices: []provider.Choice{{Message: provider.Message{Role: "assistant", Content: provider.Content{Parts: []provider.Part{
					{Type: "redacted_thinking", Data: "EmwKAhgBEgy3va"}, {Type: "text", Text: "one, two"},
				}}}, FinishReason: "stop", StopReason: "stop_sequence", StopSequence: "three"}},
				Model:  "claude-sonnet-4-5-20250929",
				Usage:  &provider.Usage{InputTokens: 2572, OutputTokens: 4, CachedInputTokens: 2000, CacheWriteTokens: 100},
				Status: 200,
			},
		},
		{
			name:        "a whole message instead of a stream",
			contentType: "application/json",
			body:        `{"id":"msg_1","type":"message","role":"assistant","model":"claude-x","content":[{"type":"tool_use","id":"toolu_1","name":"now","input":{}}],"stop_reason":"tool_use","usage":{"input_tokens":5,"cache_read_input_tokens":7,"output_tokens":9}}`,
			wantDeltas: []provider.Delta{
				{ToolCall: &provider.ToolCallDelta{Index: 0, ID: "toolu_1", Name: "now", Arguments: "{}"}},
			},
			want: &provider.Response{
				Choices: []provider.Choice{{Message: provider.Message{Role: "assistant", ToolCalls: []provider.ToolCall{
					{ID: "toolu_1", Type: "function", Function: provider.FunctionCall{Name: "now", Arguments: "{}"}},
				}}, FinishReason: "tool_calls"}},
				Model:  "claude-x",
				Usage:  &provider.Usage{InputTokens: 12, OutputTokens: 9, CachedInputTokens: 7},
				Status: 200,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				b, _ := io.ReadAll(r.Body)
				if !strings.Contains(string(b), `"stream":true`) {
					t.Errorf("request %s does not ask for a stream", b)
				}
				ct := tt.contentType
				if ct == "" {
					ct = "text/event-stream"
				}
				w.Header().Set("Content-Type", ct)
				_, _ = io.WriteString(w, tt.body)
			}))
			t.Cleanup(ts.Close)
			var deltas []provider.Delta
			req := provider.Request{Chat: provider.Chat{Model: "claude-x", MaxTokens: 256, Messages: []provider.Message{anthUser("hi")}}}
			got, err := provider.NewAnthropic(ts.URL, apiKey, ts.Client()).Stream(t.Context(), req, func(d provider.Delta) {
				deltas = append(deltas, d)
			})
			if tt.wantErr == nil && err != nil {
				t.Fatalf("Stream: %v", err)
			}
			if tt.wantErr != nil {
				if diff := cmp.Diff(tt.wantErr, asError(t, err), ignoreRaw); diff != "" {
					t.Errorf("Stream error mismatch (-want +got):\n%s", diff)
				}
			}
			if diff := cmp.Diff(tt.wantDeltas, deltas); diff != "" {
				t.Errorf("deltas mismatch (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Stream response mismatch (-want +got):\n%s", diff)
			}
		})
	}
}
