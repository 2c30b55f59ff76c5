package provider_test

import (
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tollgate/tollgate/provider"
	"github.com/tollgate/tollgate/provider/fake"
)

func TestAnthropicCompleteAgainstFake(t *testing.T) {
	t.Parallel()
	msgs := []provider.Message{
		{Role: "system", Content: provider.Text("You are terse.")}, // 14 bytes: 4+4 tokens
		{Role: "user", Content: provider.Text("Say hi")},           // 6 bytes: 2+4 tokens
	}
	tests := []struct {
		name      string
		maxTokens int
		wantOut   int64
	}{
		{"small max tokens", 5, 5},
		{"large max tokens", 500, 16},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f, c := startFakeKind(t, provider.KindAnthropic)
			got, err := c.Complete(t.Context(), provider.Request{Chat: provider.Chat{Model: "claude-test", Messages: msgs, MaxTokens: tt.maxTokens}, IdempotencyKey: "task-1:1"})
			if err != nil {
				t.Fatalf("Complete: %v", err)
			}
			// The fake answers the same conversation alike on every
			// endpoint: the system prompt went out as "system".
			want := withMeta(provider.TextResponse(fakeContent(t, msgs), "stop"), "claude-test",
				&provider.Usage{InputTokens: 14, OutputTokens: tt.wantOut}, 200)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("Complete mismatch (-want +got):\n%s", diff)
			}
			calls := f.Calls()
			if len(calls) != 1 || calls[0].IdempotencyKey != "task-1:1" || calls[0].Model != "claude-test" {
				t.Errorf("call log = %+v, want one call for claude-test with key task-1:1", calls)
			}
		})
	}
}

func TestAnthropicCompleteScripted(t *testing.T) {
	t.Parallel()
	const ok = `{"id":"msg_01","type":"message","role":"assistant","model":"claude-real-2026","content":%s,"stop_reason":"%s","stop_sequence":null%s}`
	body := func(content, stop, extra string) string {
		return fmt.Sprintf(ok, content, stop, extra)
	}
	const usage = `,"usage":{"input_tokens":3,"output_tokens":2}`
	errBody := func(typ, msg string) string {
		return `{"type":"error","error":{"type":"` + typ + `","message":"` + msg + `"},"request_id":"req_011CX"}`
	}
	runScripted(t, provider.KindAnthropic, provider.Request{Chat: provider.Chat{Model: "claude-test", Messages: []provider.Message{{Role: "user", Content: provider.Text("hi")}}, MaxTokens: 64}, IdempotencyKey: "task-7:3"}, []scriptedCase{
		{
			name:   "success without usage",
			script: fake.Scripted{Body: body(`[{"type":"text","text":"hello"}]`, "end_turn", "")},
			want:   withMeta(provider.TextResponse("hello", "stop"), "claude-real-2026", nil, 200),
		},
		{
			name: "thinking kept beside the text blocks, tool use a call, cache classes counted",
			script: fake.Scripted{Body: body(`[{"type":"thinking","thinking":"hmm","signature":"x"},{"type":"text","text":"hel"},{"type":"tool_use","id":"t","name":"f","input":{}},{"type":"text","text":"lo"}]`,
				"max_tokens", `,"usage":{"input_tokens":3,"cache_creation_input_tokens":10,"cache_read_input_tokens":100,"output_tokens":2}`)},
			want: withMeta(&provider.Response{Choices: []provider.Choice{{
				Message: provider.Message{Role: "assistant", Content: provider.Content{Parts: []provider.Part{
					{Type: "thinking", Thinking: "hmm", Signature: "x"}, {Type: "text", Text: "hel"}, {Type: "text", Text: "lo"},
				}},
					ToolCalls: []provider.ToolCall{{ID: "t", Type: "function", Function: provider.FunctionCall{Name: "f", Arguments: "{}"}}}},
				FinishReason: "length",
			}}}, "claude-real-2026", &provider.Usage{InputTokens: 113, OutputTokens: 2, CachedInputTokens: 100, CacheWriteTokens: 10}, 200),
		},
		{
			name: "one tool call after text",
			script: fake.Scripted{Body: body(`[{"type":"text","text":"Let me check."},{"type":"tool_use","id":"toolu_01A09q90qw90lq917835lq9","name":"get_weather","input":{"city": "Paris", "unit": "celsius"}}]`,
				"tool_use", `,"usage":{"input_tokens":384,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":62}`)},
			want: withMeta(&provider.Response{Choices: []provider.Choice{{
				Message: provider.Message{Role: "assistant", Content: provider.Text("Let me check."), ToolCalls: []provider.ToolCall{
					{ID: "toolu_01A09q90qw90lq917835lq9", Type: "function", Function: provider.FunctionCall{Name: "get_weather", Arguments: `{"city":"Paris","unit":"celsius"}`}},
				}},
				FinishReason: "tool_calls",
			}}}, "claude-real-2026", &provider.Usage{InputTokens: 384, OutputTokens: 62}, 200),
		},
		{
			name: "parallel tool calls without text",
			script: fake.Scripted{Body: body(`[{"type":"tool_use","id":"toolu_1","name":"get_weather","input":{"city":"Paris"}},{"type":"tool_use","id":"toolu_2","name":"get_time","input":{}}]`,
				"tool_use", usage)},
			want: withMeta(&provider.Response{Choices: []provider.Choice{{
				Message: provider.Message{Role: "assistant", ToolCalls: []provider.ToolCall{
					{ID: "toolu_1", Type: "function", Function: provider.FunctionCall{Name: "get_weather", Arguments: `{"city":"Paris"}`}},
					{ID: "toolu_2", Type: "function", Function: provider.FunctionCall{Name: "get_time", Arguments: `{}`}},
				}},
				FinishReason: "tool_calls",
			}}}, "claude-real-2026", &provider.Usage{InputTokens: 3, OutputTokens: 2}, 200),
		},
		{
			name:   "refusal after partial text is a filtered answer",
			script: fake.Scripted{Body: body(`[{"type":"text","text":"I will"}]`, "refusal", usage)},
			want:   withMeta(provider.TextResponse("I will", "content_filter"), "claude-real-2026", &provider.Usage{InputTokens: 3, OutputTokens: 2}, 200),
		},
		{
			name: "stop sequence is stop, the reason and the sequence kept beside it",
			script: fake.Scripted{Body: strings.Replace(body(`[{"type":"text","text":"one, two"}]`, "stop_sequence", usage),
				`"stop_sequence":null`, `"stop_sequence":"three"`, 1)},
			want: withMeta(&provider.Response{Choices: []provider.Choice{{
				Message: provider.Message{Role: "assistant", Content: provider.Text("one, two")}, FinishReason: "stop",
				StopReason: "stop_sequence", StopSequence: "three",
			}}}, "claude-real-2026", &provider.Usage{InputTokens: 3, OutputTokens: 2}, 200),
		},
		{
			name:   "prompt cache read and written",
			script: fake.Scripted{Body: body(`[{"type":"text","text":"hi"}]`, "end_turn", `,"usage":{"input_tokens":21,"cache_creation_input_tokens":188086,"cache_read_input_tokens":4000,"output_tokens":393}`)},
			want: withMeta(provider.TextResponse("hi", "stop"), "claude-real-2026",
				&provider.Usage{InputTokens: 192107, OutputTokens: 393, CachedInputTokens: 4000, CacheWriteTokens: 188086}, 200),
		},
		{
			name:    "500 api_error",
			script:  fake.Scripted{Status: 500, Body: errBody("api_error", "Internal server error")},
			wantErr: &provider.Error{Class: provider.ClassTransient, Status: 500, Code: "server_error"},
			wantRaw: true,
		},
		{
			name:    "529 overloaded",
			script:  fake.Scripted{Status: 529, Body: errBody("overloaded_error", "Overloaded")},
			wantErr: &provider.Error{Class: provider.ClassTransient, Status: 529, Code: "overloaded"},
			wantRaw: true,
		},
		{
			name:    "429 with retry-after",
			script:  fake.Scripted{Status: 429, Headers: map[string]string{"retry-after": "3"}, Body: errBody("rate_limit_error", "Number of request tokens has exceeded your per-minute rate limit")},
			wantErr: &provider.Error{Class: provider.ClassThrottled, Status: 429, Code: "rate_limit_exceeded", RetryAfter: 3 * time.Second},
			wantRaw: true,
		},
		{
			name:    "429 spend limit",
			script:  fake.Scripted{Status: 429, Body: `{"type":"error","error":{"type":"rate_limit_error","message":"limit reached","details":{"error_code":"enforced_spend_limit_reached"}}}`},
			wantErr: &provider.Error{Class: provider.ClassExhausted, Status: 429, Code: "insufficient_quota"},
			wantRaw: true,
		},
		{
			name:    "400 out of credit",
			script:  fake.Scripted{Status: 400, Body: errBody("invalid_request_error", "Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing to upgrade or purchase credits.")},
			wantErr: &provider.Error{Class: provider.ClassExhausted, Status: 400, Code: "insufficient_quota"},
			wantRaw: true,
		},
		{
			name:    "400 context too long",
			script:  fake.Scripted{Status: 400, Body: errBody("invalid_request_error", "prompt is too long: 200251 tokens > 200000 maximum")},
			wantErr: &provider.Error{Class: provider.ClassRejected, Status: 400, Code: "context_length_exceeded", ContextWindow: 200000, ContextTokens: 200251},
			wantRaw: true,
		},
		{
			name:    "401 key refused",
			script:  fake.Scripted{Status: 401, Body: errBody("authentication_error", "invalid x-api-key")},
			wantErr: &provider.Error{Class: provider.ClassExhausted, Status: 401, Code: "unauthorized"},
			wantRaw: true,
		},
		{
			name:    "200 malformed JSON",
			script:  fake.Scripted{Body: `{"content":[{"type":`},
			wantErr: &provider.Error{Class: provider.ClassTransient, Status: 200, Code: "malformed_response"},
		},
		{
			name:    "200 not JSON at all",
			script:  fake.Scripted{Headers: map[string]string{"Content-Type": "text/html"}, Body: `<html>captive portal</html>`},
			wantErr: &provider.Error{Class: provider.ClassTransient, Status: 200, Code: "malformed_response"},
		},
		{
			name:    "200 without content",
			script:  fake.Scripted{Body: `{"id":"msg_01","type":"message","role":"assistant"}`},
			wantErr: &provider.Error{Class: provider.ClassTransient, Status: 200, Code: "malformed_response"},
		},
		{
			name:    "200 content of the wrong shape",
			script:  fake.Scripted{Body: body(`"hello"`, "end_turn", usage)},
			wantErr: &provider.Error{Class: provider.ClassTransient, Status: 200, Code: "malformed_response"},
		},
		{
			name:    "200 empty content",
			script:  fake.Scripted{Body: body(`[]`, "end_turn", usage)},
			wantErr: &provider.Error{Class: provider.ClassTransient, Status: 200, Code: "empty_output"},
		},
		{
			name:    "200 blank text",
			script:  fake.Scripted{Body: body(`[{"type":"text","text":" \n"}]`, "end_turn", usage)},
			wantErr: &provider.Error{Class: provider.ClassTransient, Status: 200, Code: "empty_output"},
		},
		{
			name:    "200 refusal without text",
			script:  fake.Scripted{Body: body(`[]`, "refusal", usage)},
			wantErr: &provider.Error{Class: provider.ClassRejected, Status: 200, Code: "refusal"},
		},
		{
			name:    "200 tool use whose input is not an object",
			script:  fake.Scripted{Body: body(`[{"type":"tool_use","id":"t","name":"f","input":[1]}]`, "tool_use", usage)},
			wantErr: &provider.Error{Class: provider.ClassTransient, Status: 200, Code: "malformed_response"},
		},
		{
			name:   "200 negative usage",
			script: fake.Scripted{Body: body(`[{"type":"text","text":"hi"}]`, "end_turn", `,"usage":{"input_tokens":3,"output_tokens":-1}`)},
			want:   withMeta(provider.TextResponse("hi", "stop"), "claude-real-2026", &provider.Usage{InputTokens: 3, OutputTokens: -1}, 200),
		},
		{
			// The prompt's parts summed would wrap to a negative count.
			name:   "200 cached tokens summing past an int64",
			script: fake.Scripted{Body: body(`[{"type":"text","text":"hi"}]`, "end_turn", `,"usage":{"input_tokens":9223372036854775807,"cache_read_input_tokens":9223372036854775807,"output_tokens":1}`)},
			want:   withMeta(provider.TextResponse("hi", "stop"), "claude-real-2026", &provider.Usage{InputTokens: math.MaxInt64, OutputTokens: 1, CachedInputTokens: math.MaxInt64}, 200),
		},
		{
			name:    "200 carrying an error body",
			script:  fake.Scripted{Body: errBody("overloaded_error", "Overloaded")},
			wantErr: &provider.Error{Class: provider.ClassTransient, Status: 200, Code: "overloaded"},
			wantRaw: true,
		},
	})
}

func TestAnthropicRequiresMaxTokens(t *testing.T) {
	t.Parallel()
	f, c := startFakeKind(t, provider.KindAnthropic)
	_, err := c.Complete(t.Context(), provider.Request{Chat: provider.Chat{Model: "claude-test", Messages: []provider.Message{{Role: "user", Content: provider.Text("hi")}}}})
	want := &provider.Error{Class: provider.ClassRejected, Code: "invalid_request"}
	if diff := cmp.Diff(want, asError(t, err), ignoreRaw); diff != "" {
		t.Errorf("Complete error mismatch (-want +got):\n%s", diff)
	}
	if n := f.CallCount(); n != 0 {
		t.Errorf("CallCount() = %d, want 0: nothing should be sent", n)
	}
}

// TestAnthropicWireRequest checks what goes over the wire, which the fake
// does not record in full.
func TestAnthropicWireRequest(t *testing.T) {
	t.Parallel()
	conversation := []provider.Message{
		{Role: "system", Content: provider.Text("Be brief.")},
		{Role: "user", Content: provider.Text("hi")},
		{Role: "system", Content: provider.Text("Be kind.")},
		{Role: "assistant", Content: provider.Text("yo")},
		{Role: "user", Content: provider.Text("again")},
	}
	tests := []struct {
		name     string
		baseURL  string
		req      provider.Request
		wantBody string
		wantKey  string
	}{
		{
			name:     "system messages lifted out",
			req:      provider.Request{Chat: provider.Chat{Model: "claude-x", Messages: conversation, MaxTokens: 7}, IdempotencyKey: "t:2"},
			wantBody: `{"model":"claude-x","max_tokens":7,"system":[{"type":"text","text":"Be brief."},{"type":"text","text":"Be kind."}],"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"yo"},{"role":"user","content":"again"}]}`,
			wantKey:  "t:2",
		},
		{
			name:     "no system, trailing slash",
			baseURL:  "/",
			req:      provider.Request{Chat: provider.Chat{Model: "m", Messages: []provider.Message{{Role: "user", Content: provider.Text("hi")}}, MaxTokens: 1}},
			wantBody: `{"model":"m","max_tokens":1,"messages":[{"role":"user","content":"hi"}]}`,
		},
		{
			name:     "base URL with /v1 reaches the same endpoint",
			baseURL:  "/v1/",
			req:      provider.Request{Chat: provider.Chat{Model: "m", MaxTokens: 1}},
			wantBody: `{"model":"m","max_tokens":1,"messages":[]}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			type seen struct {
				Method, Path, APIKey, Version, Auth, Key, ContentType, Body string
			}
			got := make(chan seen, 1)
			f := fake.New()
			ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				b, _ := io.ReadAll(r.Body)
				got <- seen{r.Method, r.URL.Path, r.Header.Get("x-api-key"), r.Header.Get("anthropic-version"),
					r.Header.Get("Authorization"), r.Header.Get("Idempotency-Key"), r.Header.Get("Content-Type"), string(b)}
				r.Body = io.NopCloser(strings.NewReader(string(b)))
				f.ServeHTTP(w, r)
			}))
			t.Cleanup(ts.Close)
			if _, err := provider.NewAnthropic(ts.URL+tt.baseURL, apiKey, ts.Client()).Complete(t.Context(), tt.req); err != nil {
				t.Fatalf("Complete: %v", err)
			}
			want := seen{"POST", "/v1/messages", apiKey, "2023-06-01", "", tt.wantKey, "application/json", tt.wantBody}
			if diff := cmp.Diff(want, <-got); diff != "" {
				t.Errorf("request mismatch (-want +got):\n%s", diff)
			}
		})
	}
}
