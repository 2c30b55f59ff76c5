package fake_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tollgate/tollgate/provider/fake"
)

const workersAIPath = "/client/v4/accounts/acc-1/ai/run/@cf/meta/llama-3.1-8b-instruct"

func TestDefaultAnthropicMessage(t *testing.T) {
	t.Parallel()
	f, ts := start(t)
	// The conversation of TestDefaultCompletion, so the same text and usage.
	const req = `{"model":"claude-x","max_tokens":5,"system":"You are terse.","messages":[{"role":"user","content":"Say hi"}]}`
	r := mustDo(t, ts, "POST", "/v1/messages", "k:1", req)
	const want = `{"id":"msg_fake_a25a3a158384c6a820aee5c2","type":"message","role":"assistant","model":"claude-x",` +
		`"content":[{"type":"text","text":"fake completion a25a3a158384"}],"stop_reason":"end_turn","stop_sequence":null,` +
		`"usage":{"input_tokens":14,"output_tokens":5}}` + "\n"
	if r.status != 200 {
		t.Fatalf("status = %d, body %s; want 200", r.status, r.body)
	}
	if diff := cmp.Diff(want, r.body); diff != "" {
		t.Errorf("message mismatch (-want +got):\n%s", diff)
	}
	// Content blocks read the same as strings.
	blocks := mustDo(t, ts, "POST", "/v1/messages", "k:2",
		`{"model":"claude-x","max_tokens":5,"system":[{"type":"text","text":"You are terse."}],"messages":[{"role":"user","content":[{"type":"text","text":"Say hi"}]}]}`)
	if blocks.body != r.body {
		t.Errorf("content blocks answer = %s, want the same as %s", blocks.body, r.body)
	}
	if calls := f.Calls(); len(calls) != 2 || calls[0].Model != "claude-x" || calls[0].IdempotencyKey != "k:1" {
		t.Errorf("call log = %+v, want two calls for claude-x, the first with key k:1", calls)
	}
}

func TestDefaultWorkersAI(t *testing.T) {
	t.Parallel()
	f, ts := start(t)
	const req = `{"messages":[{"role":"system","content":"You are terse."},{"role":"user","content":"Say hi"}],"max_tokens":5}`
	r := mustDo(t, ts, "POST", workersAIPath, "k:1", req)
	const want = `{"result":{"response":"fake completion a25a3a158384","usage":{"prompt_tokens":14,"completion_tokens":5,"total_tokens":19}},` +
		`"success":true,"errors":[],"messages":[]}` + "\n"
	if r.status != 200 {
		t.Fatalf("status = %d, body %s; want 200", r.status, r.body)
	}
	if diff := cmp.Diff(want, r.body); diff != "" {
		t.Errorf("envelope mismatch (-want +got):\n%s", diff)
	}
	want1 := fake.Call{ReceivedAt: epoch, Model: "@cf/meta/llama-3.1-8b-instruct", IdempotencyKey: "k:1", Body: json.RawMessage(req)}
	if diff := cmp.Diff([]fake.Call{want1}, f.Calls()); diff != "" {
		t.Errorf("call log mismatch (-want +got):\n%s", diff)
	}
}

func TestMalformedRequestPerFormat(t *testing.T) {
	t.Parallel()
	type anthropicErr struct {
		Type  string
		Error struct{ Type, Message string }
	}
	type workersErr struct {
		Success bool
		Errors  []struct{ Code int }
	}
	tests := []struct {
		name, path, body string
		check            func(body string) bool
	}{
		{"anthropic bad JSON", "/v1/messages", `{"model":`, func(b string) bool {
			var e anthropicErr
			return json.Unmarshal([]byte(b), &e) == nil && e.Type == "error" && e.Error.Type == "invalid_request_error"
		}},
		{"anthropic without max_tokens", "/v1/messages", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`, func(b string) bool {
			var e anthropicErr
			return json.Unmarshal([]byte(b), &e) == nil && e.Error.Type == "invalid_request_error" && e.Error.Message == "max_tokens: Field required"
		}},
		{"anthropic content of the wrong shape", "/v1/messages", `{"model":"m","max_tokens":1,"messages":[{"role":"user","content":7}]}`, func(b string) bool {
			var e anthropicErr
			return json.Unmarshal([]byte(b), &e) == nil && e.Error.Type == "invalid_request_error"
		}},
		{"workers AI bad JSON", workersAIPath, `[]`, func(b string) bool {
			var e workersErr
			return json.Unmarshal([]byte(b), &e) == nil && !e.Success && len(e.Errors) == 1 && e.Errors[0].Code == 5006
		}},
		{"workers AI without a model", "/client/v4/accounts/acc-1/ai/run/", `{"messages":[]}`, func(b string) bool {
			var e workersErr
			return json.Unmarshal([]byte(b), &e) == nil && !e.Success && len(e.Errors) == 1 && e.Errors[0].Code == 5007
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f, ts := start(t)
			r := mustDo(t, ts, "POST", tt.path, "k:1", tt.body)
			if r.status != 400 || !tt.check(r.body) {
				t.Errorf("got %d %s, want 400 in the endpoint's error shape", r.status, r.body)
			}
			if calls := f.Calls(); len(calls) != 1 || calls[0].IdempotencyKey != "k:1" {
				t.Errorf("call log = %+v, want the malformed call logged", calls)
			}
		})
	}
}

// TestOneQueueOneLog checks that the endpoints share the script queue and the
// call log, and that scripted bodies are served raw whatever the endpoint.
func TestOneQueueOneLog(t *testing.T) {
	t.Parallel()
	f, ts := start(t)
	f.Script(
		fake.Scripted{Status: 529, Body: `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`},
		fake.Scripted{Status: 429, Body: `{"success":false,"errors":[{"code":3040,"message":"Capacity temporarily exceeded"}]}`},
		fake.Scripted{Status: 500, Body: `{"error":{"type":"server_error"}}`},
	)
	calls := []struct{ path, key, body string }{
		{workersAIPath, "a:1", `{"messages":[]}`},
		{"/v1/chat/completions", "a:2", `{"model":"gpt-x","messages":[]}`},
		{"/v1/messages", "a:3", `{"model":"claude-x","max_tokens":1,"messages":[]}`},
		{"/v1/messages", "a:4", `{"model":"claude-x","max_tokens":1,"messages":[]}`},
	}
	wantStatus := []int{529, 429, 500, 200}
	for i, c := range calls {
		r := mustDo(t, ts, "POST", c.path, c.key, c.body)
		if r.status != wantStatus[i] {
			t.Errorf("call %d to %s: status %d, want %d", i, c.path, r.status, wantStatus[i])
		}
	}
	want := `{"count":4,"calls":[` +
		`{"received_at":"2026-01-02T03:04:05Z","model":"@cf/meta/llama-3.1-8b-instruct","idempotency_key":"a:1","body":{"messages":[]}},` +
		`{"received_at":"2026-01-02T03:04:05Z","model":"gpt-x","idempotency_key":"a:2","body":{"model":"gpt-x","messages":[]}},` +
		`{"received_at":"2026-01-02T03:04:05Z","model":"claude-x","idempotency_key":"a:3","body":{"model":"claude-x","max_tokens":1,"messages":[]}},` +
		`{"received_at":"2026-01-02T03:04:05Z","model":"claude-x","idempotency_key":"a:4","body":{"model":"claude-x","max_tokens":1,"messages":[]}}]}` + "\n"
	if diff := cmp.Diff(want, mustDo(t, ts, "GET", "/_fake/calls", "", "").body); diff != "" {
		t.Errorf("calls mismatch (-want +got):\n%s", diff)
	}
}

func TestUnknownRoutesPerFormat(t *testing.T) {
	t.Parallel()
	_, ts := start(t)
	for _, c := range []struct {
		method, path string
		want         int
	}{
		{"GET", "/v1/messages", http.StatusMethodNotAllowed},
		{"GET", workersAIPath, http.StatusMethodNotAllowed},
		{"POST", "/client/v4/accounts/acc-1/ai/models", http.StatusNotFound},
	} {
		if r := mustDo(t, ts, c.method, c.path, "", "{}"); r.status != c.want {
			t.Errorf("%s %s: %d, want %d", c.method, c.path, r.status, c.want)
		}
	}
}
