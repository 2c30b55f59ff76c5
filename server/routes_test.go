package server_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tollgate/tollgate/accounts"
	"github.com/tollgate/tollgate/provider/fake"
	"github.com/tollgate/tollgate/routes"
)

func routeCall(e *env, key, route, idem string, input map[string]any) response {
	e.t.Helper()
	b, _ := json.Marshal(map[string]any{"input": input, "user": "user-7"})
	return e.do(http.MethodPost, "/v1/routes/"+route, key, b, map[string]string{"Idempotency-Key": idem})
}

type routeResult struct {
	OK       bool            `json:"ok"`
	Data     json.RawMessage `json:"data"`
	Fallback *struct {
		Guard  string `json:"guard"`
		Reason string `json:"reason"`
	} `json:"fallback"`
	TaskID *string `json:"task_id"`
}

func (r response) route(t *testing.T) routeResult {
	t.Helper()
	var out routeResult
	if r.status != http.StatusOK {
		t.Fatalf("route call: %d %s, want 200", r.status, r.body)
	}
	if err := json.Unmarshal(r.body, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func openaiAnswer(content string) fake.Scripted {
	return fake.Scripted{Status: 200, Body: `{"id":"x","object":"chat.completion","created":1,"model":"test-model",` +
		`"choices":[{"index":0,"message":{"role":"assistant","content":` + mustQuote(content) + `},"finish_reason":"stop"}],` +
		`"usage":{"prompt_tokens":10,"completion_tokens":10,"total_tokens":20}}`}
}

// workersAnswer is Workers AI's JSON-mode envelope: the structured output
// nests under result.response.
func workersAnswer(response string) fake.Scripted {
	return fake.Scripted{Status: 200, Body: `{"result":{"response":` + response + `,"usage":{"prompt_tokens":9,"completion_tokens":7,"total_tokens":16}},"success":true,"errors":[],"messages":[]}`}
}

func TestDraftReplyRouteErrorsAreStableCodes(t *testing.T) {
	t.Parallel()
	const quota = `{"error":{"message":"You exceeded your current quota","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}`
	const limited = `{"error":{"message":"Rate limit reached","type":"requests","param":null,"code":"rate_limit_exceeded"}}`
	const boom = `{"error":{"message":"boom","type":"server_error","param":null,"code":null}}`
	cases := []struct {
		name      string
		input     map[string]any
		script    []fake.Scripted
		format    func(*routes.Route, any) (any, error)
		status    int
		code      string
		wantCalls int
	}{
		{"success", map[string]any{"message": "  My order never arrived.  "}, nil, nil, 200, "", 1},
		{"missing input", map[string]any{}, nil, nil, 400, "invalid_request", 0},
		{"input too long", map[string]any{"message": strings.Repeat("x", 501)}, nil, nil, 400, "invalid_request", 0},
		{"input blank after trimming", map[string]any{"message": "   "}, nil, nil, 400, "invalid_request", 0},
		{"input of the wrong type", map[string]any{"message": 42}, nil, nil, 400, "invalid_request", 0},
		{"unknown input field", map[string]any{"message": "hi", "extra": true}, nil, nil, 400, "invalid_request", 0},
		{"provider quota", map[string]any{"message": "hi"}, []fake.Scripted{{Status: 429, Body: quota}}, nil, 503, "model_quota_exhausted", 1},
		{"provider redirected", map[string]any{"message": "hi"}, []fake.Scripted{{Status: 302, Headers: map[string]string{"Location": "https://elsewhere.example/"}, Body: quota}}, nil, 502, "provider_redirected", 1},
		{"provider rate limit", map[string]any{"message": "hi"}, []fake.Scripted{{Status: 429, Headers: map[string]string{"Retry-After": "30"}, Body: limited}}, nil, 503, "model_rate_limited", 1},
		{"transient: one retry at most", map[string]any{"message": "hi"}, []fake.Scripted{{Status: 500, Body: boom}, {Status: 500, Body: boom}, {Status: 500, Body: boom}}, nil, 503, "model_temporarily_unavailable", 2},
		{"answer too long", map[string]any{"message": "hi"}, []fake.Scripted{openaiAnswer(strings.Repeat("word ", 300))}, nil, 502, "incompatible_model_response", 1},
		{"our formatter fails", map[string]any{"message": "hi"}, nil, func(*routes.Route, any) (any, error) { return nil, errors.New("template broke") }, 500, "application_failure", 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			// A throttle pauses the key for the provider's wait (30 s),
			// not RetryMax's 50 ms default: the task's next call waits
			// until long after the calls are counted.
			logs := &syncBuffer{}
			e := newEnv(t, envOptions{probeEvery: time.Hour, retryMax: time.Minute, logs: logs})
			if c.format != nil {
				e.routes.Format = c.format
			}
			key := e.owner("acme", accounts.RoleClient, 1_000_000)
			e.fake.Script(c.script...)
			r := routeCall(e, key, "draft-reply", "k", c.input)
			if r.status != c.status {
				t.Fatalf("%d %s, want %d", r.status, r.body, c.status)
			}
			if c.code != "" {
				if got := r.problemCode(t); got != c.code {
					t.Errorf("code = %s, want %s", got, c.code)
				}
				if c.status == 503 && r.header.Get("Retry-After") == "" {
					t.Error("503 without Retry-After")
				}
			} else {
				var s string
				if err := json.Unmarshal(r.route(t).Data, &s); err != nil || s == "" {
					t.Errorf("data = %s, want the reply text", r.route(t).Data)
				}
			}
			if n := e.fake.CallCount(); n != c.wantCalls {
				t.Errorf("provider calls = %d, want %d", n, c.wantCalls)
			}
			// A classified provider failure (a 429 included) is expected
			// weather: WARN. Only our own failure is an ERROR.
			if c.status >= 500 {
				want := "WARN"
				if c.code == "application_failure" {
					want = "ERROR"
				}
				if got := requestFailedLevel(t, logs.String()); got != want {
					t.Errorf("request failed logged at %q, want %s; logs:\n%s", got, want, logs.String())
				}
			}
			e.checkInvariants()
		})
	}
}

// requestFailedLevel returns the level of the "request failed" log line.
func requestFailedLevel(t *testing.T, logs string) string {
	t.Helper()
	for _, line := range strings.Split(logs, "\n") {
		var l struct{ Level, Msg string }
		if json.Unmarshal([]byte(line), &l) == nil && l.Msg == "request failed" {
			return l.Level
		}
	}
	return ""
}

func TestClassifyTicketRouteUnwrapsJSONModeAndFallsBack(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	key := e.owner("acme", accounts.RoleClient, 1_000_000)
	ticket := map[string]any{"ticket": "I was charged twice for my subscription"}

	// The payload nests under Workers AI's result.response envelope; the
	// schema forbids extra keys, so validating the envelope would fail.
	e.fake.Script(workersAnswer(`{"label":"billing","confidence":0.92}`))
	got := routeCall(e, key, "classify-ticket", "c1", ticket).route(t)
	if got.Fallback != nil || string(got.Data) != `{"confidence":0.92,"label":"billing"}` {
		t.Fatalf("answer = %s fallback %+v, want the unwrapped payload", got.Data, got.Fallback)
	}
	// The replay record carries the route's prompt version.
	rec := e.do(http.MethodGet, "/v1/tasks/"+*got.TaskID+"/replay", key, nil, nil).json(t)
	if rec["route"] != "classify-ticket" || rec["prompt_version"] != "2026-11-30.1" {
		t.Errorf("replay route = %v %v", rec["route"], rec["prompt_version"])
	}

	// A bad shape for the same input falls back to the last good answer.
	e.fake.Script(workersAnswer(`{"label":5}`))
	fb := routeCall(e, key, "classify-ticket", "c2", ticket).route(t)
	if fb.Fallback == nil || fb.Fallback.Guard != "output" || fb.Fallback.Reason != "schema_invalid" || string(fb.Data) != string(got.Data) {
		t.Errorf("schema-invalid answer: data %s fallback %+v, want the last good answer with output/schema_invalid", fb.Data, fb.Fallback)
	}
	// A new input with no good answer yet gets the configured fallback.
	e.fake.Script(workersAnswer(`"not an object"`))
	fb = routeCall(e, key, "classify-ticket", "c3", map[string]any{"ticket": "other"}).route(t)
	if fb.Fallback == nil || string(fb.Data) != `{"confidence":0,"label":"unavailable"}` {
		t.Errorf("configured fallback: data %s fallback %+v", fb.Data, fb.Fallback)
	}
	res := e.do(http.MethodGet, "/metrics", "", nil, nil)
	if !strings.Contains(string(res.body), `tollgate_fallbacks_total{guard="output",reason="schema_invalid",route="classify-ticket"} 2`) {
		t.Error("the fallbacks are not counted by route, guard and reason")
	}
}

func TestRouteBudgetGuards(t *testing.T) {
	t.Parallel()
	t.Run("circuit open: no call", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, envOptions{})
		key := e.owner("acme", accounts.RoleClient, 1_000_000)
		if _, err := e.pool.Exec(t.Context(), `INSERT INTO provider_keys (key, state, next_probe_at, reason_class, reason_code) VALUES ('workers', 'open', now() + interval '1 hour', 'exhausted', 'insufficient_quota')`); err != nil {
			t.Fatal(err)
		}
		fb := routeCall(e, key, "classify-ticket", "k", map[string]any{"ticket": "x"}).route(t)
		if fb.Fallback == nil || fb.Fallback.Guard != "budget" || fb.Fallback.Reason != "circuit_open" || e.fake.CallCount() != 0 {
			t.Errorf("fallback %+v with %d calls, want budget/circuit_open and none", fb.Fallback, e.fake.CallCount())
		}
	})
	t.Run("budget exceeded", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, envOptions{})
		key := e.owner("acme", accounts.RoleClient, 1)
		fb := routeCall(e, key, "classify-ticket", "k", map[string]any{"ticket": "x"}).route(t)
		if fb.Fallback == nil || fb.Fallback.Reason != "budget_exceeded" || e.fake.CallCount() != 0 {
			t.Errorf("fallback %+v, want budget_exceeded with no call", fb.Fallback)
		}
		if r := routeCall(e, key, "draft-reply", "d", map[string]any{"message": "hi"}); r.status != http.StatusPaymentRequired {
			t.Errorf("draft-reply over budget: %d, want 402", r.status)
		}
	})
	t.Run("moderation", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, envOptions{})
		key := e.owner("acme", accounts.RoleClient, 1_000_000)
		e.fake.Script(fake.Scripted{Status: 200, Body: `{"id":"x","object":"chat.completion","created":1,"model":"test-model","choices":[{"index":0,"message":{"role":"assistant","content":null},"finish_reason":"content_filter"}],"usage":{"prompt_tokens":5,"completion_tokens":0,"total_tokens":5}}`})
		fb := routeCall(e, key, "tagline", "k", map[string]any{"product": "a kettle"}).route(t)
		if fb.Fallback == nil || fb.Fallback.Reason != "moderation_blocked" || string(fb.Data) != `"Simply better."` {
			t.Errorf("moderated: data %s fallback %+v", fb.Data, fb.Fallback)
		}
	})
}

// The daily cap counts calls per user per UTC day, and a new day starts
// clean at midnight (the clock is injected).
func TestRouteDailyCapResetsAtUTCMidnight(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	key := e.owner("acme", accounts.RoleClient, 1_000_000)
	e.clock.Set(time.Date(2026, 11, 30, 23, 58, 0, 0, time.UTC))
	for i := range 20 {
		e.fake.Script(workersAnswer(`{"label":"ok","confidence":1}`))
		if fb := routeCall(e, key, "classify-ticket", fmt.Sprint("a", i), map[string]any{"ticket": fmt.Sprint("t", i)}).route(t); fb.Fallback != nil {
			t.Fatalf("call %d fell back: %+v", i, fb.Fallback)
		}
	}
	fb := routeCall(e, key, "classify-ticket", "a20", map[string]any{"ticket": "t20"}).route(t)
	if fb.Fallback == nil || fb.Fallback.Guard != "budget" || fb.Fallback.Reason != "rate_limited" {
		t.Fatalf("21st call of the day: %+v, want budget/rate_limited", fb.Fallback)
	}
	calls := e.fake.CallCount()
	e.clock.Set(time.Date(2026, 12, 1, 0, 0, 1, 0, time.UTC))
	e.fake.Script(workersAnswer(`{"label":"ok","confidence":1}`))
	if fb := routeCall(e, key, "classify-ticket", "b0", map[string]any{"ticket": "t21"}).route(t); fb.Fallback != nil {
		t.Errorf("first call of the new day fell back: %+v", fb.Fallback)
	}
	if calls != 20 {
		t.Errorf("provider calls by the capped day = %d, want 20", calls)
	}
}

func TestRouteRunsAsATask(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	key := e.owner("acme", accounts.RoleClient, 1_000_000)
	r := e.post(key, "k", []byte(`{"route":"draft-reply","input":{"message":"Where is my parcel?"}}`), map[string]string{"Prefer": "wait=20"})
	if r.status != http.StatusOK || r.task(t).Result == nil {
		t.Fatalf("route as a task: %d %s", r.status, r.body)
	}
	if r := e.post(key, "k2", []byte(`{"route":"draft-reply","input":{}}`), nil); r.status != http.StatusBadRequest {
		t.Errorf("route task with bad input: %d, want 400", r.status)
	}
	if r := e.post(key, "k3", []byte(`{"route":"nope","input":{}}`), nil); r.status != http.StatusNotFound {
		t.Errorf("unknown route: %d, want 404", r.status)
	}
}

// TestListRoutes: GET /v1/routes describes every route as a caller needs
// it, and the input schema it gives is the one a call is held to.
func TestListRoutes(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{noWorkers: true})
	key := e.owner("acme", accounts.RoleClient, 1_000_000)
	r := e.do(http.MethodGet, "/v1/routes", key, nil, nil)
	if r.status != http.StatusOK {
		t.Fatalf("GET /v1/routes: %d %s", r.status, r.body)
	}
	var out struct {
		Data []routes.Summary `json:"data"`
	}
	if err := json.Unmarshal(r.body, &out); err != nil {
		t.Fatal(err)
	}
	byName := map[string]routes.Summary{}
	var names []string
	for _, s := range out.Data {
		byName[s.Name] = s
		names = append(names, s.Name)
	}
	if !slices.IsSorted(names) || len(names) < 3 {
		t.Errorf("routes %v, want every route, by name", names)
	}
	draft, classify := byName["draft-reply"], byName["classify-ticket"]
	if draft.PromptVersion != "2026-11-30.1" || draft.Model != "test-model" || draft.OnFailure != "error" ||
		draft.Output.Type != "text" || draft.Output.MaxLength != 1200 || draft.Fallback != "Thanks for your message; we will reply shortly." {
		t.Errorf("draft-reply = %+v", draft)
	}
	wantInput := map[string]any{"type": "object", "additionalProperties": false, "required": []any{"message"},
		"properties": map[string]any{"message": map[string]any{"type": "string", "minLength": 1.0, "maxLength": 500.0}}}
	if diff := cmp.Diff(wantInput, draft.InputSchema); diff != "" {
		t.Errorf("draft-reply input schema (-want +got):\n%s", diff)
	}
	if classify.Output.Type != "json" || !strings.Contains(string(classify.Output.Schema), `"confidence"`) || classify.OnFailure != "fallback" {
		t.Errorf("classify-ticket = %+v", classify)
	}
	// A call outside the schema is refused; one inside it is accepted.
	if r := routeCall(e, key, "draft-reply", "too-long", map[string]any{"message": strings.Repeat("x", 501)}); r.status != http.StatusBadRequest {
		t.Errorf("input beyond maxLength: %d, want 400", r.status)
	}
	if r := routeCall(e, key, "draft-reply", "extra", map[string]any{"message": "hi", "other": 1}); r.status != http.StatusBadRequest {
		t.Errorf("input with a field outside the schema: %d, want 400", r.status)
	}
}
