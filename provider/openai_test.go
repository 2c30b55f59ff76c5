package provider_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/tollgate/tollgate/internal/eventually"
	"github.com/tollgate/tollgate/provider"
	"github.com/tollgate/tollgate/provider/fake"
)

const apiKey = "sk-test-0123456789abcdef"

// startFake serves a fake provider and returns it with a client pointed at it.
func startFake(t *testing.T) (*fake.Server, *provider.OpenAI) {
	t.Helper()
	f := fake.New()
	ts := httptest.NewServer(f)
	t.Cleanup(ts.Close)
	t.Cleanup(f.Close) // runs first, so hanging handlers do not block ts.Close
	return f, provider.NewOpenAI(ts.URL+"/v1", apiKey, ts.Client())
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	eventually.Wait(t, what, cond)
}

// asError unwraps err to *provider.Error and checks it is safe to print.
func asError(t *testing.T, err error) *provider.Error {
	t.Helper()
	var pe *provider.Error
	if !errors.As(err, &pe) {
		t.Fatalf("error %T %v is not a *provider.Error", err, err)
	}
	if strings.Contains(err.Error(), apiKey) {
		t.Errorf("Error() = %q contains the API key", err.Error())
	}
	if raw := pe.RawMessage(); raw != "" && strings.Contains(err.Error(), raw) {
		t.Errorf("Error() = %q contains the raw provider message %q", err.Error(), raw)
	}
	return pe
}

var ignoreRaw = cmpopts.IgnoreUnexported(provider.Error{})

func fakeContent(t *testing.T, msgs []provider.Message) string {
	t.Helper()
	b, err := json.Marshal(msgs)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	return "fake completion " + hex.EncodeToString(sum[:])[:12]
}

func TestOpenAICompleteAgainstFake(t *testing.T) {
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
			f, c := startFake(t)
			got, err := c.Complete(t.Context(), provider.Request{Chat: provider.Chat{Model: "gpt-test", Messages: msgs, MaxTokens: tt.maxTokens}, IdempotencyKey: "task-1:1"})
			if err != nil {
				t.Fatalf("Complete: %v", err)
			}
			want := withMeta(provider.TextResponse(fakeContent(t, msgs), "stop"), "gpt-test", &provider.Usage{InputTokens: 14, OutputTokens: tt.wantOut}, 200)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("Complete mismatch (-want +got):\n%s", diff)
			}
			calls := f.Calls()
			if len(calls) != 1 || calls[0].IdempotencyKey != "task-1:1" || calls[0].Model != "gpt-test" {
				t.Errorf("call log = %+v, want one call for gpt-test with key task-1:1", calls)
			}
		})
	}
}

func TestOpenAICompleteScripted(t *testing.T) {
	t.Parallel()
	const ok = `{"id":"x","object":"chat.completion","model":"gpt-real-2026","choices":[{"index":0,"message":{"role":"assistant","content":%s},"finish_reason":"%s"}]%s}`
	body := func(content, finish, extra string) string {
		return fmt.Sprintf(ok, content, finish, extra)
	}
	tests := []scriptedCase{
		{
			name:   "success without usage",
			script: fake.Scripted{Status: 200, Body: body(`"hello"`, "stop", "")},
			want:   withMeta(provider.TextResponse("hello", "stop"), "gpt-real-2026", nil, 200),
		},
		{
			name:   "success with content parts",
			script: fake.Scripted{Status: 200, Body: body(`[{"type":"text","text":"hel"},{"type":"text","text":"lo"}]`, "length", `,"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}`)},
			want:   withMeta(provider.TextResponse("hello", "length"), "gpt-real-2026", &provider.Usage{InputTokens: 3, OutputTokens: 2}, 200),
		},
		{
			name:    "500",
			script:  fake.Scripted{Status: 500, Body: `{"error":{"message":"The server had an error while processing your request. Sorry about that!","type":"server_error","param":null,"code":null}}`},
			wantErr: &provider.Error{Class: provider.ClassTransient, Status: 500, Code: "server_error"},
			wantRaw: true,
		},
		{
			name:    "429 with Retry-After",
			script:  fake.Scripted{Status: 429, Headers: map[string]string{"Retry-After": "3"}, Body: `{"error":{"message":"Rate limit reached for gpt-4.1","type":"requests","param":null,"code":"rate_limit_exceeded"}}`},
			wantErr: &provider.Error{Class: provider.ClassThrottled, Status: 429, Code: "rate_limit_exceeded", RetryAfter: 3 * time.Second},
			wantRaw: true,
		},
		{
			name:    "429 insufficient quota",
			script:  fake.Scripted{Status: 429, Body: `{"error":{"message":"You exceeded your current quota, please check your plan and billing details.","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}`},
			wantErr: &provider.Error{Class: provider.ClassExhausted, Status: 429, Code: "insufficient_quota"},
			wantRaw: true,
		},
		{
			name:    "400 out of credit",
			script:  fake.Scripted{Status: 400, Body: `{"error":{"message":"Your credit balance is too low to access the API. Please go to Plans & Billing to upgrade or purchase credits.","type":"invalid_request_error","param":null,"code":null}}`},
			wantErr: &provider.Error{Class: provider.ClassExhausted, Status: 400, Code: "insufficient_quota"},
			wantRaw: true,
		},
		{
			name:    "400 context too long",
			script:  fake.Scripted{Status: 400, Body: `{"error":{"message":"This model's maximum context length is 4097 tokens. However, your messages resulted in 4294 tokens.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`},
			wantErr: &provider.Error{Class: provider.ClassRejected, Status: 400, Code: "context_length_exceeded", Param: "messages", ContextWindow: 4097, ContextTokens: 4294},
			wantRaw: true,
		},
		{
			name:    "200 malformed JSON",
			script:  fake.Scripted{Status: 200, Body: `{"choices":[{"message":`},
			wantErr: &provider.Error{Class: provider.ClassTransient, Status: 200, Code: "malformed_response"},
		},
		{
			name:    "200 not JSON at all",
			script:  fake.Scripted{Status: 200, Headers: map[string]string{"Content-Type": "text/html"}, Body: `<html>captive portal</html>`},
			wantErr: &provider.Error{Class: provider.ClassTransient, Status: 200, Code: "malformed_response"},
		},
		{
			name:    "200 no choices",
			script:  fake.Scripted{Status: 200, Body: `{"id":"x","object":"chat.completion","choices":[]}`},
			wantErr: &provider.Error{Class: provider.ClassTransient, Status: 200, Code: "malformed_response"},
		},
		{
			name:    "200 empty content",
			script:  fake.Scripted{Status: 200, Body: body(`""`, "stop", `,"usage":{"prompt_tokens":3,"completion_tokens":0}`)},
			wantErr: &provider.Error{Class: provider.ClassTransient, Status: 200, Code: "empty_output"},
		},
		{
			name:    "200 null content",
			script:  fake.Scripted{Status: 200, Body: body(`null`, "length", "")},
			wantErr: &provider.Error{Class: provider.ClassTransient, Status: 200, Code: "empty_output"},
		},
		{
			name:    "200 content of the wrong shape",
			script:  fake.Scripted{Status: 200, Body: body(`{"text":"hi"}`, "stop", "")},
			wantErr: &provider.Error{Class: provider.ClassTransient, Status: 200, Code: "malformed_response"},
		},
		// Usage no call can produce is an answer all the same: refusing it
		// would make a billed call look failed and have it made again.
		// The figures pass through, saturated, for the caller to judge.
		{
			name:   "200 negative usage",
			script: fake.Scripted{Status: 200, Body: body(`"hi"`, "stop", `,"usage":{"prompt_tokens":-5,"completion_tokens":1}`)},
			want:   withMeta(provider.TextResponse("hi", "stop"), "gpt-real-2026", &provider.Usage{InputTokens: -5, OutputTokens: 1}, 200),
		},
		{
			name:   "200 usage beyond an int64",
			script: fake.Scripted{Status: 200, Body: body(`"hi"`, "stop", `,"usage":{"prompt_tokens":99999999999999999999,"completion_tokens":1e30}`)},
			want:   withMeta(provider.TextResponse("hi", "stop"), "gpt-real-2026", &provider.Usage{InputTokens: math.MaxInt64, OutputTokens: math.MaxInt64}, 200),
		},
		{
			name:   "200 fractional usage",
			script: fake.Scripted{Status: 200, Body: body(`"hi"`, "stop", `,"usage":{"prompt_tokens":3.9,"completion_tokens":null}`)},
			want:   withMeta(provider.TextResponse("hi", "stop"), "gpt-real-2026", &provider.Usage{InputTokens: 3, OutputTokens: 0}, 200),
		},
		{
			name:    "200 carrying an error body",
			script:  fake.Scripted{Status: 200, Body: `{"error":{"message":"You exceeded your current quota","code":"insufficient_quota"}}`},
			wantErr: &provider.Error{Class: provider.ClassExhausted, Status: 200, Code: "insufficient_quota"},
			wantRaw: true,
		},
		{
			// A refusal is the model's answer, carried as OpenAI gives it.
			name:   "200 refusal",
			script: fake.Scripted{Status: 200, Body: `{"model":"m","choices":[{"message":{"role":"assistant","content":null,"refusal":"I can't help with that."},"finish_reason":"stop"}]}`},
			want:   &provider.Response{Model: "m", Status: 200, Choices: []provider.Choice{{Message: provider.Message{Role: "assistant", Refusal: "I can't help with that."}, FinishReason: "stop"}}},
		},
		{
			name:    "200 content filtered",
			script:  fake.Scripted{Status: 200, Body: body(`""`, "content_filter", "")},
			wantErr: &provider.Error{Class: provider.ClassRejected, Status: 200, Code: "content_policy"},
		},
	}
	runScripted(t, provider.KindOpenAI, provider.Request{Chat: provider.Chat{Model: "gpt-test", Messages: []provider.Message{{Role: "user", Content: provider.Text("hi")}}}, IdempotencyKey: "task-7:3"}, tests)
}

// TestOpenAIWireRequest checks what goes over the wire, which the fake does
// not record in full.
func TestOpenAIWireRequest(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		baseURL  string
		req      provider.Request
		wantBody string
		wantKey  string
	}{
		{
			name:     "full request",
			baseURL:  "/v1",
			req:      provider.Request{Chat: provider.Chat{Model: "gpt-4.1", Messages: []provider.Message{{Role: "user", Content: provider.Text("hi")}}, MaxTokens: 7}, IdempotencyKey: "t:2"},
			wantBody: `{"model":"gpt-4.1","messages":[{"role":"user","content":"hi"}],"max_tokens":7}`,
			wantKey:  "t:2",
		},
		{
			name:     "no limit, no messages, trailing slash",
			baseURL:  "/v1/",
			req:      provider.Request{Chat: provider.Chat{Model: "m"}},
			wantBody: `{"model":"m","messages":[]}`,
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
				got <- seen{r.Method, r.URL.Path, r.Header.Get("Authorization"), r.Header.Get("Idempotency-Key"), r.Header.Get("Content-Type"), string(b)}
				r.Body = io.NopCloser(strings.NewReader(string(b)))
				f.ServeHTTP(w, r)
			}))
			t.Cleanup(ts.Close)
			if _, err := provider.NewOpenAI(ts.URL+tt.baseURL, apiKey, ts.Client()).Complete(t.Context(), tt.req); err != nil {
				t.Fatalf("Complete: %v", err)
			}
			want := seen{"POST", "/v1/chat/completions", "Bearer " + apiKey, tt.wantKey, "application/json", tt.wantBody}
			if diff := cmp.Diff(want, <-got); diff != "" {
				t.Errorf("request mismatch (-want +got):\n%s", diff)
			}
		})
	}
}
