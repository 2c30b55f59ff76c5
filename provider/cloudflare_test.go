package provider_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tollgate/tollgate/provider"
	"github.com/tollgate/tollgate/provider/fake"
)

const llama = "@cf/meta/llama-3.1-8b-instruct"

func TestCloudflareCompleteAgainstFake(t *testing.T) {
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
		{"default max tokens", 0, 16},
		{"small max tokens", 5, 5},
		{"large max tokens", 500, 16},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f, c := startFakeKind(t, provider.KindCloudflare)
			got, err := c.Complete(t.Context(), provider.Request{Chat: provider.Chat{Model: llama, Messages: msgs, MaxTokens: tt.maxTokens}, IdempotencyKey: "task-1:1"})
			if err != nil {
				t.Fatalf("Complete: %v", err)
			}
			// Workers AI reports neither the model nor a finish reason.
			want := withMeta(provider.TextResponse(fakeContent(t, msgs), "stop"), "", &provider.Usage{InputTokens: 14, OutputTokens: tt.wantOut}, 200)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("Complete mismatch (-want +got):\n%s", diff)
			}
			calls := f.Calls()
			if len(calls) != 1 || calls[0].IdempotencyKey != "task-1:1" || calls[0].Model != llama {
				t.Errorf("call log = %+v, want one call for %s with key task-1:1", calls, llama)
			}
		})
	}
}

func TestCloudflareCompleteScripted(t *testing.T) {
	t.Parallel()
	ok := func(result string) string {
		return `{"result":` + result + `,"success":true,"errors":[],"messages":[]}`
	}
	fail := func(code, msg string) string {
		return `{"result":null,"success":false,"errors":[{"code":` + code + `,"message":"` + msg + `"}],"messages":[]}`
	}
	const usage = `"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}`
	runScripted(t, provider.KindCloudflare, provider.Request{Chat: provider.Chat{Model: llama, Messages: []provider.Message{{Role: "user", Content: provider.Text("hi")}}, MaxTokens: 64}, IdempotencyKey: "task-7:3"}, []scriptedCase{
		{
			name:   "success without usage",
			script: fake.Scripted{Body: ok(`{"response":"hello"}`)},
			want:   withMeta(provider.TextResponse("hello", "stop"), "", nil, 200),
		},
		{
			name:   "JSON mode object re-encoded as text",
			script: fake.Scripted{Body: ok(`{"response":{ "answer" : 42, "tags": ["a"] },` + usage + `}`)},
			want:   withMeta(provider.TextResponse(`{"answer":42,"tags":["a"]}`, "stop"), "", &provider.Usage{InputTokens: 3, OutputTokens: 2}, 200),
		},
		{
			name:   "OpenAI-shaped result",
			script: fake.Scripted{Body: ok(`{"id":"x","object":"chat.completion","model":"@cf/openai/gpt-oss-120b","choices":[{"index":0,"message":{"role":"assistant","content":"hello"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":2}}`)},
			want:   withMeta(provider.TextResponse("hello", "stop"), "@cf/openai/gpt-oss-120b", &provider.Usage{InputTokens: 3, OutputTokens: 2}, 200),
		},
		{
			name:    "500",
			script:  fake.Scripted{Status: 500, Body: fail("7010", "Internal error")},
			wantErr: &provider.Error{Class: provider.ClassTransient, Status: 500, Code: "server_error"},
			wantRaw: true,
		},
		{
			name:    "429 with Retry-After",
			script:  fake.Scripted{Status: 429, Headers: map[string]string{"Retry-After": "3"}, Body: fail("971", "Please wait and consider throttling your request speed")},
			wantErr: &provider.Error{Class: provider.ClassThrottled, Status: 429, Code: "rate_limit_exceeded", RetryAfter: 3 * time.Second},
			wantRaw: true,
		},
		{
			name:    "429 capacity",
			script:  fake.Scripted{Status: 429, Body: fail("3040", "Capacity temporarily exceeded, please try again.")},
			wantErr: &provider.Error{Class: provider.ClassTransient, Status: 429, Code: "overloaded"},
			wantRaw: true,
		},
		{
			name:    "429 daily allocation used up",
			script:  fake.Scripted{Status: 429, Body: fail("3036", "You have used up your daily free allocation of 10,000 neurons.")},
			wantErr: &provider.Error{Class: provider.ClassExhausted, Status: 429, Code: "insufficient_quota"},
			wantRaw: true,
		},
		{
			name:    "400 out of credit",
			script:  fake.Scripted{Status: 400, Body: fail("9998", "Your account has insufficient credit balance to run this model.")},
			wantErr: &provider.Error{Class: provider.ClassExhausted, Status: 400, Code: "insufficient_quota"},
			wantRaw: true,
		},
		{
			name:    "400 context too long",
			script:  fake.Scripted{Status: 400, Body: fail("5021", "The estimated number of input and maximum output tokens (8810) exceeded this model context window limit (8192).")},
			wantErr: &provider.Error{Class: provider.ClassRejected, Status: 400, Code: "context_length_exceeded", ContextWindow: 8192, ContextTokens: 8810},
			wantRaw: true,
		},
		{
			name:    "408 upstream timeout",
			script:  fake.Scripted{Status: 408, Body: fail("3007", "Request timeout")},
			wantErr: &provider.Error{Class: provider.ClassTransient, Status: 408, Code: "upstream_timeout"},
			wantRaw: true,
		},
		{
			name:    "200 reporting a failure",
			script:  fake.Scripted{Body: fail("3036", "daily free allocation used up")},
			wantErr: &provider.Error{Class: provider.ClassExhausted, Status: 200, Code: "insufficient_quota"},
			wantRaw: true,
		},
		{
			name:    "200 malformed JSON",
			script:  fake.Scripted{Body: `{"result":{"response":`},
			wantErr: &provider.Error{Class: provider.ClassTransient, Status: 200, Code: "malformed_response"},
		},
		{
			name:    "200 without a result",
			script:  fake.Scripted{Body: `{"success":true,"errors":[],"messages":[]}`},
			wantErr: &provider.Error{Class: provider.ClassTransient, Status: 200, Code: "malformed_response"},
		},
		{
			name:    "200 response of the wrong shape",
			script:  fake.Scripted{Body: ok(`{"response":42}`)},
			wantErr: &provider.Error{Class: provider.ClassTransient, Status: 200, Code: "malformed_response"},
		},
		{
			name:    "200 empty output",
			script:  fake.Scripted{Body: ok(`{"response":"",` + usage + `}`)},
			wantErr: &provider.Error{Class: provider.ClassTransient, Status: 200, Code: "empty_output"},
		},
		{
			name:   "200 tool calls only",
			script: fake.Scripted{Body: ok(`{"response":null,"tool_calls":[{"name":"f","arguments":{}}]}`)},
			want: &provider.Response{Status: 200, Choices: []provider.Choice{{FinishReason: "tool_calls", Message: provider.Message{Role: "assistant",
				ToolCalls: []provider.ToolCall{{ID: "call_0", Type: "function", Function: provider.FunctionCall{Name: "f", Arguments: "{}"}}}}}}},
		},
		{
			name:   "200 negative usage",
			script: fake.Scripted{Body: ok(`{"response":"hi","usage":{"prompt_tokens":-3,"completion_tokens":2}}`)},
			want:   withMeta(provider.TextResponse("hi", "stop"), "", &provider.Usage{InputTokens: -3, OutputTokens: 2}, 200),
		},
	})
}

func TestCloudflareRefusesModelNamesThatLeaveTheRunPath(t *testing.T) {
	t.Parallel()
	for _, model := range []string{"", "../../tokens/verify", "@cf/./x", "@cf//x", "x/"} {
		t.Run(model, func(t *testing.T) {
			t.Parallel()
			f, c := startFakeKind(t, provider.KindCloudflare)
			_, err := c.Complete(t.Context(), provider.Request{Chat: provider.Chat{Model: model, MaxTokens: 1}})
			want := &provider.Error{Class: provider.ClassRejected, Code: "invalid_request"}
			if diff := cmp.Diff(want, asError(t, err), ignoreRaw); diff != "" {
				t.Errorf("Complete(%q) error mismatch (-want +got):\n%s", model, diff)
			}
			if n := f.CallCount(); n != 0 {
				t.Errorf("CallCount() = %d, want 0: nothing should be sent", n)
			}
		})
	}
}

// TestCloudflareWireRequest checks what goes over the wire, which the fake
// does not record in full.
func TestCloudflareWireRequest(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, baseURL, account string
		req                    provider.Request
		wantPath, wantBody     string
		wantKey                string
	}{
		{
			name:     "model with slashes",
			account:  "0123abcd",
			req:      provider.Request{Chat: provider.Chat{Model: llama, Messages: []provider.Message{{Role: "system", Content: provider.Text("Be brief.")}, {Role: "user", Content: provider.Text("hi")}}, MaxTokens: 7}, IdempotencyKey: "t:2"},
			wantPath: "/client/v4/accounts/0123abcd/ai/run/" + llama,
			wantBody: `{"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"hi"}],"max_tokens":7}`,
			wantKey:  "t:2",
		},
		{
			name:     "base URL with /client/v4, odd characters escaped",
			baseURL:  "/client/v4/",
			account:  "a b",
			req:      provider.Request{Chat: provider.Chat{Model: "@hf/x?y#z"}},
			wantPath: "/client/v4/accounts/a%20b/ai/run/@hf/x%3Fy%23z",
			wantBody: `{"messages":[]}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			type seen struct {
				Method, Path, Auth, Key, ContentType, Body string
			}
			got := make(chan seen, 1)
			f := fake.New()
			ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				b, _ := io.ReadAll(r.Body)
				got <- seen{r.Method, r.URL.EscapedPath(), r.Header.Get("Authorization"), r.Header.Get("Idempotency-Key"), r.Header.Get("Content-Type"), string(b)}
				r.Body = io.NopCloser(strings.NewReader(string(b)))
				f.ServeHTTP(w, r)
			}))
			t.Cleanup(ts.Close)
			if _, err := provider.NewCloudflare(ts.URL+tt.baseURL, tt.account, apiKey, ts.Client()).Complete(t.Context(), tt.req); err != nil {
				t.Fatalf("Complete: %v", err)
			}
			want := seen{"POST", tt.wantPath, "Bearer " + apiKey, tt.wantKey, "application/json", tt.wantBody}
			if diff := cmp.Diff(want, <-got); diff != "" {
				t.Errorf("request mismatch (-want +got):\n%s", diff)
			}
		})
	}
}
