package contract_test

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"

	"github.com/tollgate/tollgate/internal/contract"
)

const specPath = "../../openapi.yaml"

const (
	taskID  = "0193b6e2-7c1a-7d4e-9f3a-2b8c4d5e6f70"
	traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
)

const queuedTask = `{
  "id": "` + taskID + `",
  "status": "queued",
  "idempotency_key": "k-1",
  "model": "fake-small",
  "attempts": 0,
  "created_at": "2025-01-02T03:04:05Z",
  "updated_at": "2025-01-02T03:04:05.123456Z",
  "finished_at": null,
  "reserved_micros": 1500,
  "cancel_requested": false,
  "result": null,
  "error": null,
  "metadata": {"ticket": 42}
}`

const succeededTask = `{
  "id": "` + taskID + `",
  "status": "succeeded",
  "idempotency_key": "k-1",
  "model": "fake-small",
  "attempts": 1,
  "created_at": "2025-01-02T03:04:05Z",
  "updated_at": "2025-01-02T03:04:06Z",
  "finished_at": "2025-01-02T03:04:06+00:00",
  "cancel_requested": false,
  "result": {
    "output": "hello",
    "model": "fake-small-2025",
    "finish_reason": "stop",
    "usage": {"input_tokens": 12, "output_tokens": 3, "source": "reported"},
    "cost_micros": 420
  },
  "error": null
}`

const badRequestProblem = `{
  "type": "about:blank",
  "title": "Bad Request",
  "status": 400,
  "code": "invalid_request",
  "detail": "messages: must not be empty",
  "trace_id": "` + traceID + `",
  "errors": [{"field": "messages", "message": "must not be empty"}]
}`

const notFoundProblem = `{
  "type": "about:blank",
  "title": "Not Found",
  "status": 404,
  "code": "not_found",
  "trace_id": "` + traceID + `"
}`

const unauthorizedProblem = `{
  "type": "about:blank",
  "title": "Unauthorized",
  "status": 401,
  "code": "unauthorized",
  "trace_id": "` + traceID + `"
}`

const replayRecord = `{
  "task_id": "` + taskID + `",
  "owner_id": "owner-1",
  "idempotency_key": "k-1",
  "status": "succeeded",
  "request": {"model": "fake-small", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 64, "metadata": null},
  "created_at": "2025-01-02T03:04:05Z",
  "finished_at": "2025-01-02T03:04:07Z",
  "route": null,
  "prompt_version": null, "cost_micros": 54, "error": null,
  "attempts": [
    {
      "attempt": 1, "state": "ambiguous", "provider": "fake", "provider_model": "fake-small-2025",
      "parameters": {"max_tokens": 64, "model": "fake-small-2025"}, "timeout_ms": 30000,
      "started_at": "2025-01-02T03:04:05Z", "finished_at": "2025-01-02T03:04:06Z", "latency_ms": 1000,
      "response": null, "error": {"class": "ambiguous", "code": "timeout", "provider_status": null},
      "trace_id": "` + traceID + `", "build_version": "v0.1.0",
      "model": "fake-small", "sent_at": "2025-01-02T03:04:05Z", "outcome": "unknown",
      "class": "ambiguous", "code": "timeout", "provider_status": null, "redactions": {}, "stream": null
    },
    {
      "attempt": 2, "state": "succeeded", "provider": "fake", "provider_model": "fake-small-2025",
      "parameters": {"model": "fake-small-2025"}, "timeout_ms": 30000,
      "started_at": "2025-01-02T03:04:06Z", "finished_at": "2025-01-02T03:04:07Z", "latency_ms": 900,
      "response": {"content": "hello", "finish_reason": "stop", "model": "fake-small-2025",
        "usage": {"input_tokens": 12, "output_tokens": 3}},
      "error": null, "trace_id": "` + traceID + `", "build_version": "v0.1.0",
      "model": "fake-small", "sent_at": "2025-01-02T03:04:06Z", "outcome": "succeeded",
      "class": null, "code": null, "provider_status": null, "redactions": {"EMAIL": 1}, "stream": {"chunks_sent": 3, "client_disconnected_at": null}
    }
  ]
}`

const usageReport = `{
  "from": "2025-01-01T00:00:00Z",
  "to": "2025-02-01T00:00:00Z",
  "group_by": [],
  "rows_truncated": false,
  "groups": [],
  "rows": [{
    "task_id": "` + taskID + `", "owner_id": "owner-1", "workload": "", "model": "fake-small",
    "input_tokens": 12, "output_tokens": 3, "cached_input_tokens": 0, "cache_write_tokens": 0, "reasoning_tokens": 0, "source": "estimated",
    "cost_micros": 420, "charged_micros": 400, "shortfall_micros": 20,
    "settled_at": "2025-01-02T03:04:07Z"
  }],
  "totals": {
    "tasks": 1, "input_tokens": 12, "output_tokens": 3, "cached_input_tokens": 0, "cache_write_tokens": 0, "reasoning_tokens": 0, "cost_micros": 420,
    "charged_micros": 400, "shortfall_micros": 20, "reported_micros": 0, "estimated_micros": 420,
    "possibly_charged_micros": 0
  }
}`

func loadValidator(tb testing.TB) *contract.Validator {
	tb.Helper()
	v, err := contract.Load(specPath)
	if err != nil {
		tb.Fatalf("Load(%q): %v", specPath, err)
	}
	return v
}

func TestLoad(t *testing.T) {
	t.Parallel()
	loadValidator(t)
}

func TestLoadErrors(t *testing.T) {
	t.Parallel()
	if _, err := contract.Load("testdata/does-not-exist.yaml"); err == nil {
		t.Error("Load(missing file) = nil error, want error")
	}
}

// reply is what the fake server answers.
type reply struct {
	status      int
	contentType string
	headers     map[string]string
	body        string
}

func TestTransport(t *testing.T) {
	t.Parallel()
	v := loadValidator(t)

	taskHeaders := map[string]string{"Location": "/v1/tasks/" + taskID}

	tests := []struct {
		name    string
		method  string
		path    string
		reply   reply
		wantErr string // substring of the single expected mismatch; "" for none
	}{
		{
			name:   "created task 202",
			method: http.MethodPost, path: "/v1/tasks",
			reply: reply{status: 202, contentType: "application/json", headers: taskHeaders, body: queuedTask},
		},
		{
			name:   "202 missing required field",
			method: http.MethodPost, path: "/v1/tasks",
			reply: reply{status: 202, contentType: "application/json", headers: taskHeaders,
				body: strings.Replace(queuedTask, `"attempts": 0,`, "", 1)},
			wantErr: `property "attempts" is missing`,
		},
		{
			name:   "undocumented status",
			method: http.MethodPost, path: "/v1/tasks",
			reply:   reply{status: http.StatusTeapot, contentType: "application/json", body: queuedTask},
			wantErr: "status is not supported",
		},
		{
			name:   "unknown path",
			method: http.MethodGet, path: "/v1/nope",
			reply:   reply{status: 404, contentType: "application/problem+json", body: notFoundProblem},
			wantErr: "no matching operation was found",
		},
		{
			name:   "failed task 200",
			method: http.MethodGet, path: "/v1/tasks/" + taskID,
			reply: reply{status: 200, contentType: "application/json",
				body: strings.Replace(queuedTask, `"error": null`,
					`"error": {"code": "model_incompatible", "class": "rejected", "retryable": false, "message": "prompt refused"}`, 1)},
		},
		{
			name:   "result present but incomplete",
			method: http.MethodGet, path: "/v1/tasks/" + taskID,
			reply: reply{status: 200, contentType: "application/json",
				body: strings.Replace(succeededTask, `"output": "hello",`, "", 1)},
			wantErr: `property "output" is missing`,
		},
		{
			name:   "problem 400",
			method: http.MethodPost, path: "/v1/tasks",
			reply: reply{status: 400, contentType: "application/problem+json", body: badRequestProblem},
		},
		{
			name:   "replayed finished task 200",
			method: http.MethodPost, path: "/v1/tasks",
			reply: reply{status: 200, contentType: "application/json; charset=utf-8",
				headers: map[string]string{"Location": "/v1/tasks/" + taskID, "Idempotent-Replayed": "true"},
				body:    succeededTask},
		},
		{
			name:   "200 without Idempotent-Replayed",
			method: http.MethodPost, path: "/v1/tasks",
			reply:   reply{status: 200, contentType: "application/json", headers: taskHeaders, body: succeededTask},
			wantErr: `response header "Idempotent-Replayed" missing`,
		},
		{
			name:   "202 without Location",
			method: http.MethodPost, path: "/v1/tasks",
			reply:   reply{status: 202, contentType: "application/json", body: queuedTask},
			wantErr: `response header "Location" missing`,
		},
		{
			name:   "task id not a uuid",
			method: http.MethodGet, path: "/v1/tasks/" + taskID,
			reply: reply{status: 200, contentType: "application/json",
				body: strings.Replace(queuedTask, taskID, "not-a-uuid", 1)},
			wantErr: `doesn't match the format "uuid"`,
		},
		{
			name:   "task with unknown field",
			method: http.MethodGet, path: "/v1/tasks/" + taskID,
			reply: reply{status: 200, contentType: "application/json",
				body: strings.Replace(queuedTask, `"attempts": 0,`, `"attempts": 0, "owner_id": "o",`, 1)},
			wantErr: `property "owner_id" is unsupported`,
		},
		{
			name:   "problem served as application/json",
			method: http.MethodPost, path: "/v1/tasks",
			reply:   reply{status: 400, contentType: "application/json", body: badRequestProblem},
			wantErr: "response header Content-Type has unexpected value",
		},
		{
			name:   "problem code outside enum",
			method: http.MethodPost, path: "/v1/tasks",
			reply: reply{status: 400, contentType: "application/problem+json",
				body: strings.Replace(badRequestProblem, "invalid_request", "bad_request", 1)},
			wantErr: "bad_request",
		},
		{
			name:   "invalid id answered 404",
			method: http.MethodGet, path: "/v1/tasks/not-a-uuid",
			reply: reply{status: 404, contentType: "application/problem+json", body: notFoundProblem},
		},
		{
			name:   "401 with WWW-Authenticate",
			method: http.MethodGet, path: "/v1/tasks",
			reply: reply{status: 401, contentType: "application/problem+json",
				headers: map[string]string{"WWW-Authenticate": "Bearer"}, body: unauthorizedProblem},
		},
		{
			name:   "401 without WWW-Authenticate",
			method: http.MethodGet, path: "/v1/tasks",
			reply:   reply{status: 401, contentType: "application/problem+json", body: unauthorizedProblem},
			wantErr: `response header "WWW-Authenticate" missing`,
		},
		{
			name:   "method not in contract",
			method: http.MethodDelete, path: "/v1/tasks/" + taskID,
			reply:   reply{status: 405, contentType: "application/problem+json", body: notFoundProblem},
			wantErr: "method not allowed",
		},
		{
			name:   "task list",
			method: http.MethodGet, path: "/v1/tasks?limit=2",
			reply: reply{status: 200, contentType: "application/json",
				body: `{"data": [` + queuedTask + `,` + succeededTask + `], "next_cursor": "abc"}`},
		},
		{
			name:   "empty task list",
			method: http.MethodGet, path: "/v1/tasks",
			reply: reply{status: 200, contentType: "application/json", body: `{"data": [], "next_cursor": null}`},
		},
		{
			name:   "nil task list",
			method: http.MethodGet, path: "/v1/tasks",
			reply:   reply{status: 200, contentType: "application/json", body: `{"data": null, "next_cursor": null}`},
			wantErr: `Error at "/data": Value is not nullable`,
		},
		{
			name:   "replay record",
			method: http.MethodGet, path: "/v1/tasks/" + taskID + "/replay",
			reply: reply{status: 200, contentType: "application/json", body: replayRecord},
		},
		{
			name:   "usage report",
			method: http.MethodGet, path: "/v1/usage?from=2025-01-01&to=2025-02-01",
			reply: reply{status: 200, contentType: "application/json", body: usageReport},
		},
		{
			name:   "usage forbidden",
			method: http.MethodGet, path: "/v1/usage?owner=someone-else",
			reply: reply{status: 403, contentType: "application/problem+json",
				body: strings.NewReplacer("Not Found", "Forbidden", "404", "403", "not_found", "forbidden").Replace(notFoundProblem)},
		},
		{
			name:   "readyz 503",
			method: http.MethodGet, path: "/readyz",
			reply: reply{status: 503, contentType: "application/json",
				body: `{"status": "unavailable", "checks": {"postgres": "timeout"}}`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", tt.reply.contentType)
				for k, val := range tt.reply.headers {
					w.Header().Set(k, val)
				}
				w.WriteHeader(tt.reply.status)
				io.WriteString(w, tt.reply.body)
			}))
			t.Cleanup(srv.Close)
			tr := v.Transport(srv.Client().Transport)
			client := &http.Client{Transport: tr}

			req, err := http.NewRequest(tt.method, srv.URL+tt.path, strings.NewReader(`{"not": "validated"}`))
			if err != nil {
				t.Fatal(err)
			}
			resp, err := client.Do(req)
			if err != nil {
				t.Fatalf("%s %s: %v", tt.method, tt.path, err)
			}
			got, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil {
				t.Fatalf("read body: %v", err)
			}
			if string(got) != tt.reply.body {
				t.Errorf("body after validation = %q, want %q", got, tt.reply.body)
			}

			errs := tr.Errors()
			for _, err := range errs {
				t.Log(err)
			}
			switch {
			case tt.wantErr == "" && len(errs) != 0:
				t.Errorf("Errors() = %v, want none", errs)
			case tt.wantErr != "" && len(errs) != 1:
				t.Errorf("Errors() = %v, want one containing %q", errs, tt.wantErr)
			case tt.wantErr != "" && !strings.Contains(errs[0].Error(), tt.wantErr):
				t.Errorf("Errors()[0] = %v, want it to contain %q", errs[0], tt.wantErr)
			}
		})
	}
}

func TestMismatchUnwraps(t *testing.T) {
	t.Parallel()
	v := loadValidator(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusTeapot)
	}))
	t.Cleanup(srv.Close)
	tr := v.Transport(nil)
	client := &http.Client{Transport: tr}

	for _, path := range []string{"/v1/nope", "/healthz"} {
		resp, err := client.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}

	errs := tr.Errors()
	if len(errs) != 2 {
		t.Fatalf("Errors() = %v, want 2", errs)
	}
	var m *contract.Mismatch
	if !errors.As(errs[0], &m) || m.Method != http.MethodGet || m.Path != "/v1/nope" || m.Status != http.StatusTeapot {
		t.Errorf("Errors()[0] = %#v, want *Mismatch{GET /v1/nope 418}", errs[0])
	}
	if !errors.Is(errs[0], routers.ErrPathNotFound) {
		t.Errorf("Errors()[0] = %v, want it to wrap routers.ErrPathNotFound", errs[0])
	}
	var re *openapi3filter.ResponseError
	if !errors.As(errs[1], &re) {
		t.Errorf("Errors()[1] = %v, want it to wrap *openapi3filter.ResponseError", errs[1])
	}
}

// TestTransportConcurrent is for the race detector.
func TestTransportConcurrent(t *testing.T) {
	t.Parallel()
	v := loadValidator(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"status": "ok"}`)
	}))
	t.Cleanup(srv.Close)
	tr := v.Transport(srv.Client().Transport)
	client := &http.Client{Transport: tr}

	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			for _, path := range []string{"/healthz", "/v1/nope"} {
				resp, err := client.Get(srv.URL + path)
				if err != nil {
					t.Error(err)
					return
				}
				resp.Body.Close()
			}
		})
	}
	wg.Wait()
	if got := len(tr.Errors()); got != 20 {
		t.Errorf("len(Errors()) = %d, want 20 (one per /v1/nope)", got)
	}
}

// TestCheck shows how server tests use the transport.
func TestCheck(t *testing.T) {
	t.Parallel()
	v := loadValidator(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"status": "ok", "checks": {"postgres": "ok"}}`)
	}))
	t.Cleanup(srv.Close)
	tr := v.Transport(srv.Client().Transport)
	t.Cleanup(func() { tr.Check(t) })

	resp, err := (&http.Client{Transport: tr}).Get(srv.URL + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
}
