package server_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/accounts"
)

// Every bad request gets a clear 4xx problem, calls no model, creates no
// task and leaves the idempotency key free for a correct retry.
func TestBadInputIsRefusedBeforeAnythingIsSpent(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{maxBody: 4096})
	key := e.owner("acme", accounts.RoleClient, 1_000_000)
	valid := taskBody("hello", 10)

	cases := []struct {
		name    string
		authKey string
		idemKey string
		body    []byte
		header  map[string]string
		status  int
		code    string
	}{
		{"no auth", "-", "k", valid, nil, 401, "unauthorized"},
		{"unknown api key", "tg_not-a-real-key", "k", valid, nil, 401, "unauthorized"},
		{"wrong auth scheme", "", "k", valid, map[string]string{"Authorization": "Basic " + key}, 401, "unauthorized"},
		{"missing idempotency key", key, "", valid, nil, 400, "idempotency_key_missing"},
		{"idempotency key too long", key, strings.Repeat("k", 256), valid, nil, 400, "idempotency_key_missing"},
		{"idempotency key not ascii", key, "clé", valid, nil, 400, "idempotency_key_missing"},
		{"malformed json", key, "k", []byte(`{"messages": [`), nil, 400, "invalid_request"},
		{"not json at all", key, "k", []byte(`hello`), nil, 400, "invalid_request"},
		{"empty body", key, "k", []byte{}, nil, 400, "invalid_request"},
		{"json array", key, "k", []byte(`[]`), nil, 400, "invalid_request"},
		{"trailing data", key, "k", append(append([]byte{}, valid...), []byte(` {}`)...), nil, 400, "invalid_request"},
		{"unknown field", key, "k", []byte(`{"messages":[{"role":"user","content":"x"}],"temprature":0.2}`), nil, 400, "invalid_request"},
		{"unknown message field", key, "k", []byte(`{"messages":[{"role":"user","content":"x","nmae":"n"}]}`), nil, 400, "invalid_request"},
		{"messages wrong type", key, "k", []byte(`{"messages":"hello"}`), nil, 400, "invalid_request"},
		{"max_tokens wrong type", key, "k", []byte(`{"messages":[{"role":"user","content":"x"}],"max_tokens":"10"}`), nil, 400, "invalid_request"},
		{"max_tokens fractional", key, "k", []byte(`{"messages":[{"role":"user","content":"x"}],"max_tokens":1.5}`), nil, 400, "invalid_request"},
		{"max_tokens negative", key, "k", []byte(`{"messages":[{"role":"user","content":"x"}],"max_tokens":-1}`), nil, 400, "invalid_request"},
		{"max_tokens huge", key, "k", []byte(`{"messages":[{"role":"user","content":"x"}],"max_tokens":99999999999999999999}`), nil, 400, "invalid_request"},
		{"content wrong type", key, "k", []byte(`{"messages":[{"role":"user","content":7}]}`), nil, 400, "invalid_request"},
		{"metadata wrong type", key, "k", []byte(`{"messages":[{"role":"user","content":"x"}],"metadata":[1]}`), nil, 400, "invalid_request"},
		{"no messages", key, "k", []byte(`{"messages":[]}`), nil, 400, "invalid_request"},
		{"messages missing", key, "k", []byte(`{}`), nil, 400, "invalid_request"},
		{"null body", key, "k", []byte(`null`), nil, 400, "invalid_request"},
		{"bad role", key, "k", []byte(`{"messages":[{"role":"robot","content":"x"}]}`), nil, 400, "invalid_request"},
		{"empty content", key, "k", []byte(`{"messages":[{"role":"user","content":""}]}`), nil, 400, "invalid_request"},
		{"oversized body", key, "k", []byte(`{"messages":[{"role":"user","content":"` + strings.Repeat("a", 5000) + `"}]}`), nil, 413, "payload_too_large"},
		{"wrong content type", key, "k", valid, map[string]string{"Content-Type": "text/plain"}, 415, "unsupported_media_type"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			authKey := c.authKey
			if authKey == "-" {
				authKey = ""
			}
			r := e.post(authKey, c.idemKey, c.body, c.header)
			if r.status != c.status {
				t.Fatalf("status = %d, want %d; body %s", r.status, c.status, r.body)
			}
			if got := r.problemCode(t); got != c.code {
				t.Errorf("code = %q, want %q", got, c.code)
			}
			p := r.json(t)
			if tid, _ := p["trace_id"].(string); len(tid) != 32 {
				t.Errorf("trace_id = %q, want 32 hex characters", tid)
			}
			if c.status == 401 && r.header.Get("WWW-Authenticate") == "" {
				t.Error("401 without WWW-Authenticate")
			}
		})
	}
	if n := e.fake.CallCount(); n != 0 {
		t.Errorf("provider calls = %d after bad input, want 0", n)
	}
	if n := e.scalar(`SELECT count(*) FROM tasks`); n != 0 {
		t.Errorf("tasks = %d after bad input, want 0", n)
	}
	// The key was never consumed: a correct request with it now succeeds.
	if r := e.post(key, "k", valid, nil); r.status != http.StatusAccepted {
		t.Errorf("valid POST after refusals: %d %s, want 202", r.status, r.body)
	}
}

func TestEveryEndpointRefusesBadInput(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{noWorkers: true})
	key := e.owner("acme", accounts.RoleClient, 1_000_000)
	cases := []struct {
		method, path, key string
		status            int
		code              string
	}{
		{"GET", "/v1/tasks", "", 401, "unauthorized"},
		{"GET", "/v1/tasks/00000000-0000-0000-0000-000000000000", "", 401, "unauthorized"},
		{"GET", "/v1/tasks/not-a-uuid", key, 404, "not_found"},
		{"GET", "/v1/tasks/00000000-0000-4000-8000-000000000000", key, 404, "not_found"},
		{"GET", "/v1/tasks/not-a-uuid/replay", key, 404, "not_found"},
		{"GET", "/v1/tasks?limit=0", key, 400, "invalid_request"},
		{"GET", "/v1/tasks?limit=abc", key, 400, "invalid_request"},
		{"GET", "/v1/tasks?limit=101", key, 400, "invalid_request"},
		{"GET", "/v1/usage", "", 401, "unauthorized"},
		{"GET", "/v1/usage?from=yesterday", key, 400, "invalid_request"},
		{"GET", "/v1/usage?from=2026-02-01&to=2026-01-01", key, 400, "invalid_request"},
		{"GET", "/v1/usage?owner=someone-else", key, 403, "forbidden"},
	}
	for _, c := range cases {
		t.Run(c.method+" "+c.path, func(t *testing.T) {
			r := e.do(c.method, c.path, c.key, nil, nil)
			if r.status != c.status || r.problemCode(t) != c.code {
				t.Errorf("%d %s, want %d %s", r.status, r.body, c.status, c.code)
			}
		})
	}
}
