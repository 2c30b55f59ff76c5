package fake_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tollgate/tollgate/internal/eventually"
	"github.com/tollgate/tollgate/provider/fake"
)

var epoch = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func start(t *testing.T) (*fake.Server, *httptest.Server) {
	t.Helper()
	f := fake.New(fake.WithClock(func() time.Time { return epoch }))
	ts := httptest.NewServer(f)
	t.Cleanup(ts.Close)
	t.Cleanup(f.Close) // runs first, so hanging handlers do not block ts.Close
	return f, ts
}

type reply struct {
	status int
	header http.Header
	body   string
}

func do(t *testing.T, ctx context.Context, ts *httptest.Server, method, path, key, body string) (reply, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, method, ts.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := ts.Client().Do(req)
	if err != nil {
		return reply{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return reply{resp.StatusCode, resp.Header, string(b)}, err
}

func mustDo(t *testing.T, ts *httptest.Server, method, path, key, body string) reply {
	t.Helper()
	r, err := do(t, t.Context(), ts, method, path, key, body)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	return r
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	eventually.Wait(t, what, cond)
}

func TestDefaultCompletion(t *testing.T) {
	t.Parallel()
	_, ts := start(t)
	const req = `{"model":"gpt-x","messages":[{"role":"system","content":"You are terse."},{"role":"user","content":"Say hi"}],"max_tokens":5}`
	r := mustDo(t, ts, "POST", "/v1/chat/completions", "k:1", req)
	if r.status != 200 {
		t.Fatalf("status = %d, body %s; want 200", r.status, r.body)
	}
	// sha256(`[{"role":"system","content":"You are terse."},{"role":"user","content":"Say hi"}]`)
	const want = `{"id":"chatcmpl-fake-a25a3a158384c6a820aee5c2","object":"chat.completion","created":1767323045,"model":"gpt-x",` +
		`"choices":[{"index":0,"message":{"role":"assistant","content":"fake completion a25a3a158384"},"logprobs":null,"finish_reason":"stop"}],` +
		`"usage":{"prompt_tokens":14,"completion_tokens":5,"total_tokens":19}}` + "\n"
	if diff := cmp.Diff(want, r.body); diff != "" {
		t.Errorf("completion mismatch (-want +got):\n%s", diff)
	}
	// Same request, same answer; whitespace in the request does not matter.
	again := mustDo(t, ts, "POST", "/v1/chat/completions", "k:2", strings.ReplaceAll(req, ",", " ,\n"))
	if again.body != r.body {
		t.Errorf("second completion = %s, want the same as the first %s", again.body, r.body)
	}
}

func TestDefaultCompletionUsage(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		req        string
		wantPrompt int
		wantOut    int
	}{
		{"no max tokens", `{"model":"m","messages":[{"role":"user","content":"12345"}]}`, 2 + 4, 16},
		{"zero max tokens", `{"model":"m","messages":[{"role":"user","content":""}],"max_tokens":0}`, 4, 16},
		{"negative max tokens", `{"model":"m","messages":[],"max_tokens":-3}`, 0, 16},
		{"max_completion_tokens", `{"model":"m","messages":[{"role":"user","content":"1234"}],"max_completion_tokens":3}`, 1 + 4, 3},
		{"large max tokens", `{"model":"m","messages":[{"role":"a","content":"x"},{"role":"b","content":"123456789"}],"max_tokens":4096}`, (1 + 4) + (3 + 4), 16},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, ts := start(t)
			r := mustDo(t, ts, "POST", "/v1/chat/completions", "", tt.req)
			var got struct {
				Choices []struct {
					Message struct{ Content string }
				}
				Usage struct {
					PromptTokens     int `json:"prompt_tokens"`
					CompletionTokens int `json:"completion_tokens"`
					TotalTokens      int `json:"total_tokens"`
				}
			}
			if err := json.Unmarshal([]byte(r.body), &got); err != nil {
				t.Fatalf("decode %s: %v", r.body, err)
			}
			if len(got.Choices) != 1 || !strings.HasPrefix(got.Choices[0].Message.Content, "fake completion ") {
				t.Errorf("choices = %+v, want one fake completion", got.Choices)
			}
			if got.Usage.PromptTokens != tt.wantPrompt || got.Usage.CompletionTokens != tt.wantOut || got.Usage.TotalTokens != tt.wantPrompt+tt.wantOut {
				t.Errorf("usage = %+v, want prompt %d, completion %d", got.Usage, tt.wantPrompt, tt.wantOut)
			}
		})
	}
}

func TestMalformedRequest(t *testing.T) {
	t.Parallel()
	for _, body := range []string{`{"model":`, `[]`, ``, `{"model":"m","messages":"hi"}`} {
		t.Run(body, func(t *testing.T) {
			t.Parallel()
			f, ts := start(t)
			r := mustDo(t, ts, "POST", "/v1/chat/completions", "k:1", body)
			var e struct {
				Error struct{ Message, Type string }
			}
			if r.status != 400 || json.Unmarshal([]byte(r.body), &e) != nil || e.Error.Type != "invalid_request_error" {
				t.Errorf("got %d %s, want 400 with an OpenAI error body", r.status, r.body)
			}
			if calls := f.Calls(); len(calls) != 1 || calls[0].IdempotencyKey != "k:1" {
				t.Errorf("call log = %+v, want the malformed call logged", calls)
			}
		})
	}
}

func TestScriptedResponsesInOrder(t *testing.T) {
	t.Parallel()
	f, ts := start(t)
	f.Script(
		fake.Scripted{Status: 429, Headers: map[string]string{"Retry-After": "2", "x-extra": "1"}, Body: `{"error":{"code":"rate_limit_exceeded"}}`},
		fake.Scripted{Status: 502, Headers: map[string]string{"Content-Type": "text/html"}, Body: `<html>bad gateway</html>`},
		fake.Scripted{Body: `not even json`},
	)
	want := []reply{
		{429, http.Header{"Retry-After": {"2"}, "X-Extra": {"1"}, "Content-Type": {"application/json"}}, `{"error":{"code":"rate_limit_exceeded"}}`},
		{502, http.Header{"Content-Type": {"text/html"}}, `<html>bad gateway</html>`},
		{200, http.Header{"Content-Type": {"application/json"}}, `not even json`},
	}
	for i, w := range want {
		got := mustDo(t, ts, "POST", "/v1/chat/completions", "", `{"model":"m","messages":[]}`)
		for k := range w.header {
			if got.header.Get(k) != w.header.Get(k) {
				t.Errorf("response %d header %s = %q, want %q", i, k, got.header.Get(k), w.header.Get(k))
			}
		}
		if got.status != w.status || got.body != w.body {
			t.Errorf("response %d = %d %q, want %d %q", i, got.status, got.body, w.status, w.body)
		}
	}
	// The queue is empty again: back to the default completion.
	if r := mustDo(t, ts, "POST", "/v1/chat/completions", "", `{"model":"m","messages":[]}`); r.status != 200 || !strings.Contains(r.body, "fake completion") {
		t.Errorf("after the script: %d %s, want the default completion", r.status, r.body)
	}
}

func TestControlEndpoints(t *testing.T) {
	t.Parallel()
	f, ts := start(t)

	if r := mustDo(t, ts, "POST", "/_fake/script", "", `{"responses":[{"status":500,"body":"boom"},{"status":400,"headers":{"X-A":"b"},"delay_ms":1}]}`); r.status != 204 {
		t.Fatalf("script: %d %s, want 204", r.status, r.body)
	}
	for _, bad := range []string{`{"responses":`, `{"responses":[{"status":99}]}`, `{"responses":[{"status":600}]}`, `{"responses":[{"delay_ms":-1}]}`} {
		if r := mustDo(t, ts, "POST", "/_fake/script", "", bad); r.status != 400 {
			t.Errorf("script %s: %d, want 400", bad, r.status)
		}
	}
	mustDo(t, ts, "POST", "/v1/chat/completions", "a:1", `{"model":"m1"}`)
	second := mustDo(t, ts, "POST", "/v1/chat/completions", "a:2", `{"model":"m2"}`)
	if second.status != 400 || second.header.Get("X-A") != "b" {
		t.Errorf("second scripted response = %d %v, want 400 with X-A", second.status, second.header)
	}

	r := mustDo(t, ts, "GET", "/_fake/calls", "", "")
	want := `{"count":2,"calls":[` +
		`{"received_at":"2026-01-02T03:04:05Z","model":"m1","idempotency_key":"a:1","body":{"model":"m1"}},` +
		`{"received_at":"2026-01-02T03:04:05Z","model":"m2","idempotency_key":"a:2","body":{"model":"m2"}}]}` + "\n"
	if diff := cmp.Diff(want, r.body); diff != "" {
		t.Errorf("calls mismatch (-want +got):\n%s", diff)
	}
	if n := f.CallCount(); n != 2 {
		t.Errorf("CallCount() = %d, want 2", n)
	}

	f.Script(fake.Scripted{Status: 503})
	if r := mustDo(t, ts, "POST", "/_fake/reset", "", ""); r.status != 204 {
		t.Errorf("reset: %d, want 204", r.status)
	}
	if r := mustDo(t, ts, "GET", "/_fake/calls", "", ""); r.body != `{"count":0,"calls":[]}`+"\n" {
		t.Errorf("calls after reset = %s, want none", r.body)
	}
	if r := mustDo(t, ts, "POST", "/v1/chat/completions", "", `{"model":"m"}`); r.status != 200 {
		t.Errorf("after reset: %d, want the default 200 (queue emptied)", r.status)
	}
}

func TestHangAndDelayReleasedByClientOrClose(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		script  fake.Scripted
		release func(f *fake.Server, cancel context.CancelFunc)
	}{
		{"hang, client leaves", fake.Scripted{Hang: true}, func(_ *fake.Server, cancel context.CancelFunc) { cancel() }},
		{"hang, Close", fake.Scripted{Hang: true}, func(f *fake.Server, _ context.CancelFunc) { f.Close() }},
		{"long delay, client leaves", fake.Scripted{DelayMS: 3_600_000}, func(_ *fake.Server, cancel context.CancelFunc) { cancel() }},
		{"long delay, Close", fake.Scripted{DelayMS: 3_600_000}, func(f *fake.Server, _ context.CancelFunc) { f.Close() }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f, ts := start(t)
			f.Script(tt.script)
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			errc := make(chan error, 1)
			go func() {
				_, err := do(t, ctx, ts, "POST", "/v1/chat/completions", "h:1", `{"model":"m","messages":[]}`)
				errc <- err
			}()
			waitFor(t, "the call to be logged", func() bool { return f.CallCount() == 1 })
			tt.release(f, cancel)
			if err := <-errc; err == nil {
				t.Error("request succeeded, want it to fail without an answer")
			}
			// ts.Close in cleanup must not block on the released handler.
		})
	}
}

func TestConcurrentUse(t *testing.T) {
	t.Parallel()
	f, ts := start(t)
	const n = 40
	for range n / 2 {
		f.Script(fake.Scripted{Status: 503})
	}
	var wg sync.WaitGroup
	statuses := make(chan int, n)
	for i := range n {
		wg.Go(func() {
			r, err := do(t, t.Context(), ts, "POST", "/v1/chat/completions", "c:"+string(rune('a'+i%26)), `{"model":"m","messages":[]}`)
			if err != nil {
				t.Error(err)
				return
			}
			statuses <- r.status
			_ = f.Calls()
		})
	}
	wg.Wait()
	close(statuses)
	count := map[int]int{}
	for s := range statuses {
		count[s]++
	}
	if count[503] != n/2 || count[200] != n/2 {
		t.Errorf("statuses = %v, want %d of 503 and of 200", count, n/2)
	}
	if got := f.CallCount(); got != n {
		t.Errorf("CallCount() = %d, want %d", got, n)
	}
}

func TestUnknownRoutes(t *testing.T) {
	t.Parallel()
	_, ts := start(t)
	if r := mustDo(t, ts, "GET", "/v1/chat/completions", "", ""); r.status != http.StatusMethodNotAllowed {
		t.Errorf("GET completions: %d, want 405", r.status)
	}
	if r := mustDo(t, ts, "POST", "/v1/audio/speech", "", "{}"); r.status != http.StatusNotFound {
		t.Errorf("POST audio/speech: %d, want 404", r.status)
	}
}

// A success entry without a Body is the endpoint's own answer, delayed
// when it says so: a slow call is still a valid answer. An error status
// without a Body stays an empty error.
func TestSuccessWithoutBodyIsTheOwnAnswer(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		script     string
		path       string
		body       string
		wantStatus int
		wantIn     string
	}{
		{"delay alone, chat", `{"delay_ms":20}`, "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`, 200, `"content":"fake completion `},
		{"status 200 alone, chat", `{"status":200}`, "/v1/chat/completions", `{"model":"m","messages":[]}`, 200, `"object":"chat.completion"`},
		{"delay alone, messages", `{"delay_ms":20}`, "/v1/messages", `{"model":"m","max_tokens":8,"messages":[{"role":"user","content":"hi"}]}`, 200, `"text":"fake completion `},
		{"delay alone, embeddings", `{"delay_ms":20}`, "/v1/embeddings", `{"model":"m","input":"hi"}`, 200, `"object":"embedding"`},
		{"error status alone stays empty", `{"status":503,"delay_ms":20}`, "/v1/chat/completions", `{"model":"m","messages":[]}`, 503, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, ts := start(t)
			if r := mustDo(t, ts, "POST", "/_fake/script", "", `{"responses":[`+tt.script+`]}`); r.status != 204 {
				t.Fatalf("script: %d %s", r.status, r.body)
			}
			r := mustDo(t, ts, "POST", tt.path, "k:1", tt.body)
			if r.status != tt.wantStatus {
				t.Errorf("status = %d, want %d (body %s)", r.status, tt.wantStatus, r.body)
			}
			if tt.wantIn == "" && r.body != "" {
				t.Errorf("body = %q, want empty", r.body)
			}
			if !strings.Contains(r.body, tt.wantIn) {
				t.Errorf("body = %s, want it to contain %s", r.body, tt.wantIn)
			}
		})
	}
}
