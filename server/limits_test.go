package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/tollgate/tollgate/accounts"
)

// limitWindow is a moment 10 s into a UTC minute: the window has 50 s
// left, so Retry-After is 50.
func limitWindow() time.Time {
	return time.Now().UTC().Truncate(time.Minute).Add(10 * time.Second)
}

// putLimits sets owner's limits with an admin key, failing unless 200.
func (e *env) putLimits(admin, owner, body string) map[string]any {
	e.t.Helper()
	r := e.do(http.MethodPut, "/v1/limits/"+owner, admin, []byte(body), nil)
	if r.status != http.StatusOK {
		e.t.Fatalf("PUT limits: %d %s", r.status, r.body)
	}
	return r.json(e.t)
}

// checkRateLimited fails unless r is a 429 rate_limited with Retry-After
// and the x-ratelimit headers of the requests limit.
func checkRateLimited(t *testing.T, r response, limit int, retryAfter string) {
	t.Helper()
	if r.status != http.StatusTooManyRequests {
		t.Fatalf("status %d %s, want 429", r.status, r.body)
	}
	if code := r.problemCode(t); code != "rate_limited" {
		t.Errorf("code %q, want rate_limited", code)
	}
	want := map[string]string{"Retry-After": retryAfter, "x-ratelimit-limit-requests": strconv.Itoa(limit),
		"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": retryAfter + "s"}
	for h, v := range want {
		if got := r.header.Get(h); got != v {
			t.Errorf("%s = %q, want %q", h, got, v)
		}
	}
}

// Many concurrent admissions, split across two servers on one database,
// against a limit of N per minute: exactly N are admitted in the window,
// every other one is 429 rate_limited with Retry-After and writes
// nothing; a refused key is still free once the next window opens.
func TestRateLimitIsExactAcrossInstances(t *testing.T) {
	t.Parallel()
	const limit, calls = 7, 40
	e := newEnv(t, envOptions{noWorkers: true})
	e2 := newEnv(t, envOptions{pool: e.pool, noWorkers: true})
	at := limitWindow()
	e.clock.Set(at)
	e2.clock.Set(at)
	admin := e.owner("ops", accounts.RoleAdmin, 0)
	client := e.owner("acme", accounts.RoleClient, 1_000_000_000)
	got := e.putLimits(admin, "acme", fmt.Sprintf(`{"requests_per_minute": %d}`, limit))
	if got["requests_per_minute"] != float64(limit) || got["tokens_per_minute"] != nil {
		t.Fatalf("PUT answered %v", got)
	}

	results := make([]response, calls)
	var wg sync.WaitGroup
	for i := range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			srv := e
			if i%2 == 1 {
				srv = e2
			}
			results[i] = srv.post(client, fmt.Sprintf("k%d", i), taskBody("hello", 10), nil)
		}()
	}
	wg.Wait()
	admitted, refused := 0, []int{}
	for i, r := range results {
		switch r.status {
		case http.StatusAccepted:
			admitted++
			if r.header.Get("x-ratelimit-limit-requests") != strconv.Itoa(limit) || r.header.Get("x-ratelimit-reset-requests") != "50s" {
				t.Errorf("admission %d headers: %v", i, r.header)
			}
		default:
			checkRateLimited(t, r, limit, "50")
			refused = append(refused, i)
		}
	}
	if admitted != limit {
		t.Errorf("admitted %d, want %d", admitted, limit)
	}
	if n := e.scalar(`SELECT count(*) FROM tasks WHERE owner_id = 'acme'`); n != limit {
		t.Errorf("tasks in SQL = %d, want %d", n, limit)
	}
	if n := e.scalar(`SELECT count(*) FROM budget_reservations WHERE owner_id = 'acme'`); n != limit {
		t.Errorf("reservations = %d, want %d", n, limit)
	}
	if n := e.scalar(`SELECT requests FROM rate_windows WHERE owner_id = 'acme'`); n != limit {
		t.Errorf("window count = %d, want %d", n, limit)
	}
	if len(refused) == 0 {
		t.Fatal("nothing refused")
	}

	// Still full 49 s later; the key of a refused call works in the next
	// window, on either server.
	e.clock.Set(at.Add(49 * time.Second))
	checkRateLimited(t, e.post(client, "late", taskBody("hello", 10), nil), limit, "1")
	e.clock.Set(at.Add(time.Minute))
	e2.clock.Set(at.Add(time.Minute))
	key := fmt.Sprintf("k%d", refused[0])
	if r := e2.post(client, key, taskBody("hello", 10), nil); r.status != http.StatusAccepted {
		t.Fatalf("retry of refused key %s in the next window: %d %s", key, r.status, r.body)
	}
	if n := e.scalar(`SELECT count(*) FROM tasks WHERE owner_id = 'acme'`); n != limit+1 {
		t.Errorf("tasks = %d, want %d", n, limit+1)
	}
	e.checkInvariants()
	m := e.do(http.MethodGet, "/metrics", admin, nil, nil)
	wantMetric := `tollgate_rate_limited_total{owner_id="acme",workload=""}`
	if !strings.Contains(string(m.body), wantMetric) {
		t.Errorf("metrics lack %s", wantMetric)
	}
}

// The owner's limit and its workload's both apply: a workload limit
// refuses that workload's keys only, the owner's limit all of them.
func TestRateLimitOwnerAndWorkload(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{noWorkers: true})
	at := limitWindow()
	e.clock.Set(at)
	admin := e.owner("ops", accounts.RoleAdmin, 0)
	plain := e.owner("acme", accounts.RoleClient, 1_000_000_000)
	batch, err := e.accounts.CreateKey(context.Background(), "acme", accounts.RoleClient, "batch")
	if err != nil {
		t.Fatal(err)
	}
	e.putLimits(admin, "acme", `{"requests_per_minute": 3, "workloads": {"batch": {"requests_per_minute": 1}}}`)
	steps := []struct {
		key  string
		want int
	}{
		{batch, http.StatusAccepted},
		{batch, http.StatusTooManyRequests}, // the workload's limit
		{plain, http.StatusAccepted},
		{plain, http.StatusAccepted},
		{plain, http.StatusTooManyRequests}, // the owner's limit
	}
	for i, s := range steps {
		r := e.post(s.key, fmt.Sprintf("s%d", i), taskBody("hello", 10), nil)
		if r.status != s.want {
			t.Fatalf("step %d: %d %s, want %d", i, r.status, r.body, s.want)
		}
	}
	if n := e.scalar(`SELECT count(*) FROM tasks`); n != 3 {
		t.Errorf("tasks = %d, want 3", n)
	}
	m := e.do(http.MethodGet, "/metrics", admin, nil, nil)
	if !strings.Contains(string(m.body), `tollgate_rate_limited_total{owner_id="acme",workload="batch"} 1`) {
		t.Errorf("metrics lack the workload's refusal")
	}
}

// Tokens count at the reservation's estimate when admitted and at the
// usage recorded once the task settles.
func TestRateLimitTokensCorrectedBySettlement(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{queueOnly: true})
	at := limitWindow()
	e.clock.Set(at)
	admin := e.owner("ops", accounts.RoleAdmin, 0)
	client := e.owner("acme", accounts.RoleClient, 1_000_000_000)
	e.putLimits(admin, "acme", `{"tokens_per_minute": 100000}`)
	r := e.post(client, "t1", taskBody("hello", 500), nil)
	if r.status != http.StatusAccepted {
		t.Fatalf("POST: %d %s", r.status, r.body)
	}
	estimate := e.scalar(`SELECT tokens FROM rate_charges`)
	if estimate < 500 {
		t.Fatalf("estimate %d, want at least max_tokens", estimate)
	}
	if remaining := r.header.Get("x-ratelimit-remaining-tokens"); remaining != strconv.FormatInt(100000-estimate, 10) {
		t.Errorf("remaining tokens %q, want %d", remaining, 100000-estimate)
	}
	if n := e.scalar(`SELECT tokens FROM rate_windows WHERE owner_id = 'acme'`); n != estimate {
		t.Errorf("window tokens before settlement = %d, want the estimate %d", n, estimate)
	}
	if task := e.waitFinished(client, r.task(t).ID); task.Status != "succeeded" {
		t.Fatalf("task %s, want succeeded", task.Status)
	}
	used := e.scalar(`SELECT input_tokens + output_tokens FROM usage_records`)
	if used >= estimate {
		t.Fatalf("usage %d not below the estimate %d: the test proves nothing", used, estimate)
	}
	if n := e.scalar(`SELECT count(*) FROM rate_charges`); n != 0 {
		t.Errorf("charges left after settlement: %d", n)
	}
	// The next admission in the window finds the correction folded in:
	// the usage, not the estimate, plus its own estimate.
	r = e.post(client, "t1b", taskBody("hello", 500), nil)
	if r.status != http.StatusAccepted {
		t.Fatalf("POST: %d %s", r.status, r.body)
	}
	if remaining := r.header.Get("x-ratelimit-remaining-tokens"); remaining != strconv.FormatInt(100000-used-estimate, 10) {
		t.Errorf("remaining tokens after settlement %q, want %d", remaining, 100000-used-estimate)
	}
	if n := e.scalar(`SELECT tokens FROM rate_windows WHERE owner_id = 'acme'`); n != used+estimate {
		t.Errorf("window tokens = %d, want the usage %d plus the new estimate %d", n, used, estimate)
	}
	if n := e.scalar(`SELECT count(*) FROM rate_corrections`); n != 0 {
		t.Errorf("corrections left after the fold: %d", n)
	}
	// A request whose estimate alone is over what is left is refused, as
	// tokens, with nothing written.
	r = e.post(client, "t2", taskBody("hello", 100000), nil)
	if r.status != http.StatusTooManyRequests || r.header.Get("x-ratelimit-limit-tokens") != "100000" {
		t.Fatalf("over the tokens limit: %d %v %s", r.status, r.header, r.body)
	}
	if n := e.scalar(`SELECT count(*) FROM tasks`); n != 2 {
		t.Errorf("tasks = %d, want 2", n)
	}
}

// The official OpenAI SDK sees OpenAI's RateLimitError, with its code,
// type and headers; Anthropic's surface answers rate_limit_error; routes,
// embeddings and responses are limited alike.
func TestRateLimitOnProviderSurfaces(t *testing.T) {
	t.Parallel()
	withEmbeddings := strings.Replace(testCatalog, "routes:\n",
		"  - {name: embed-model, kind: embedding, provider: default, provider_model: text-embedding-3-small, input_micros_per_mtok: 1000000}\nroutes:\n", 1)
	e := newEnv(t, envOptions{catalog: withEmbeddings})
	at := limitWindow()
	e.clock.Set(at)
	admin := e.owner("ops", accounts.RoleAdmin, 0)
	client := e.owner("acme", accounts.RoleClient, 1_000_000_000)
	e.putLimits(admin, "acme", `{"requests_per_minute": 2, "tokens_per_minute": 1000000}`)
	// A route call is admitted like any task, with the headers.
	rc := e.do(http.MethodPost, "/v1/routes/tagline", client, []byte(`{"input":{"product":"kettle"}}`), map[string]string{"Idempotency-Key": "r1"})
	if rc.status != http.StatusOK || rc.header.Get("x-ratelimit-remaining-requests") != "1" {
		t.Fatalf("route call: %d %v %s", rc.status, rc.header, rc.body)
	}
	answers := &sdkAnswers{}
	sdk := openai.NewClient(option.WithBaseURL(e.url+"/v1"), option.WithAPIKey(client), option.WithMaxRetries(0),
		option.WithHTTPClient(e.client), option.WithMiddleware(answers.middleware))
	ctx := context.Background()
	params := openai.ChatCompletionNewParams{Model: testModel, Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}}
	if _, err := sdk.Chat.Completions.New(ctx, params); err != nil {
		t.Fatalf("first call: %v", err)
	}
	first := answers.all()[0]
	if first.Get("x-ratelimit-remaining-requests") != "0" || first.Get("x-ratelimit-limit-tokens") != "1000000" || first.Get("x-ratelimit-reset-tokens") != "50s" {
		t.Errorf("first answer's headers: %v", first)
	}
	_, err := sdk.Chat.Completions.New(ctx, params)
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("second call: %v, want a 429 openai.Error", err)
	}
	if apiErr.Code != "rate_limit_exceeded" || apiErr.Type != "requests" {
		t.Errorf("code %q type %q, want rate_limit_exceeded/requests", apiErr.Code, apiErr.Type)
	}
	h := apiErr.Response.Header
	for k, v := range map[string]string{"Retry-After": "50", "x-ratelimit-limit-requests": "2", "x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "50s"} {
		if h.Get(k) != v {
			t.Errorf("%s = %q, want %q", k, h.Get(k), v)
		}
	}

	r := e.do(http.MethodPost, "/v1/messages", "", []byte(`{"model":"test-model","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`),
		map[string]string{"x-api-key": client, "anthropic-version": "2023-06-01"})
	var ant struct {
		Type  string `json:"type"`
		Error struct {
			Type string `json:"type"`
		} `json:"error"`
	}
	_ = json.Unmarshal(r.body, &ant)
	if r.status != http.StatusTooManyRequests || ant.Error.Type != "rate_limit_error" || r.header.Get("Retry-After") != "50" {
		t.Errorf("/v1/messages: %d %s, want 429 rate_limit_error", r.status, r.body)
	}
	r = e.post(client, "x", taskBody("hi", 10), nil)
	checkRateLimited(t, r, 2, "50")
	r = e.do(http.MethodPost, "/v1/routes/tagline", client, []byte(`{"input":{"product":"kettle"}}`), map[string]string{"Idempotency-Key": "r2"})
	checkRateLimited(t, r, 2, "50")
	for _, c := range []struct{ path, body string }{
		{"/v1/embeddings", `{"model":"embed-model","input":"hi"}`},
		{"/v1/responses", `{"model":"test-model","input":"hi"}`},
	} {
		r = e.do(http.MethodPost, c.path, client, []byte(c.body), nil)
		if r.status != http.StatusTooManyRequests || !strings.Contains(string(r.body), `"code":"rate_limit_exceeded"`) ||
			r.header.Get("x-ratelimit-limit-requests") != "2" {
			t.Errorf("%s: %d %v %s, want 429 rate_limit_exceeded", c.path, r.status, r.header, r.body)
		}
	}
	if n := e.scalar(`SELECT count(*) FROM tasks`); n != 2 {
		t.Errorf("tasks = %d, want 2", n)
	}
}

// The limits endpoints: admin only, strict about their input, GET and the
// list echo what PUT stored.
func TestLimitsEndpoints(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{noWorkers: true})
	admin := e.owner("ops", accounts.RoleAdmin, 0)
	client := e.owner("acme", accounts.RoleClient, 1_000_000)
	if r := e.do(http.MethodGet, "/v1/limits/acme", admin, nil, nil); r.status != http.StatusOK ||
		!strings.Contains(string(r.body), `"requests_per_minute":null`) {
		t.Errorf("GET before PUT: %d %s", r.status, r.body)
	}
	e.putLimits(admin, "acme", `{"requests_per_minute": 60, "workloads": {"batch": {"tokens_per_minute": 9000}}}`)
	r := e.do(http.MethodGet, "/v1/limits/acme", admin, nil, nil)
	want := `{"owner_id":"acme","requests_per_minute":60,"tokens_per_minute":null,"workloads":{"batch":{"requests_per_minute":null,"tokens_per_minute":9000}}}`
	if r.status != http.StatusOK || strings.TrimSpace(string(r.body)) != want {
		t.Errorf("GET: %d %s\nwant %s", r.status, r.body, want)
	}
	r = e.do(http.MethodGet, "/v1/limits", admin, nil, nil)
	if r.status != http.StatusOK || strings.TrimSpace(string(r.body)) != `{"data":[`+want+`]}` {
		t.Errorf("list: %d %s", r.status, r.body)
	}
	for _, m := range []string{http.MethodGet, http.MethodPut} {
		if r := e.do(m, "/v1/limits/acme", client, []byte(`{}`), nil); r.status != http.StatusForbidden {
			t.Errorf("%s as client: %d, want 403", m, r.status)
		}
	}
	if r := e.do(http.MethodPut, "/v1/limits/nobody", admin, []byte(`{}`), nil); r.status != http.StatusNotFound {
		t.Errorf("PUT unknown owner: %d %s, want 404", r.status, r.body)
	}
	bad := []struct{ name, body, field string }{
		{"negative", `{"requests_per_minute": -1}`, "requests_per_minute"},
		{"float", `{"requests_per_minute": 1.5}`, "requests_per_minute"},
		{"above int64", `{"tokens_per_minute": 99999999999999999999999}`, "tokens_per_minute"},
		{"above the bound", `{"tokens_per_minute": 1000000000001}`, "tokens_per_minute"},
		{"string", `{"requests_per_minute": "10"}`, "requests_per_minute"},
		{"unknown field", `{"requests_per_hour": 10}`, "requests_per_hour"},
		{"unknown workload field", `{"workloads": {"w": {"rpm": 1}}}`, "rpm"},
		{"workload negative", `{"workloads": {"w": {"requests_per_minute": -3}}}`, "workloads.w.requests_per_minute"},
		{"workload empty name", `{"workloads": {"": {"requests_per_minute": 3}}}`, "workloads"},
		{"workload NUL", "{\"workloads\": {\"a\\u0000b\": {\"requests_per_minute\": 3}}}", ""},
		{"workloads not an object", `{"workloads": [1]}`, "workloads"},
		{"malformed", `{"requests_per_minute": `, ""},
		{"not an object", `[]`, ""},
	}
	for _, c := range bad {
		r := e.do(http.MethodPut, "/v1/limits/acme", admin, []byte(c.body), nil)
		if r.status != http.StatusBadRequest {
			t.Errorf("%s: %d %s, want 400", c.name, r.status, r.body)
			continue
		}
		if c.field != "" && !strings.Contains(string(r.body), c.field) {
			t.Errorf("%s: %s does not name %s", c.name, r.body, c.field)
		}
	}
	// Nothing refused changed the stored limits.
	if r := e.do(http.MethodGet, "/v1/limits/acme", admin, nil, nil); strings.TrimSpace(string(r.body)) != want {
		t.Errorf("after refusals: %s", r.body)
	}
}

// Admissions and settlements of a limited owner running at once neither
// deadlock nor lose a correction: once every task settled, the window
// counts the usage of each plus the estimate of the one admitted last.
func TestRateLimitCorrectionsUnderConcurrentSettlement(t *testing.T) {
	t.Parallel()
	const calls = 30
	e := newEnv(t, envOptions{})
	at := limitWindow()
	e.clock.Set(at)
	admin := e.owner("ops", accounts.RoleAdmin, 0)
	client := e.owner("acme", accounts.RoleClient, 1_000_000_000)
	e.putLimits(admin, "acme", `{"requests_per_minute": 1000, "tokens_per_minute": 100000000}`)
	ids := make([]string, calls)
	var wg sync.WaitGroup
	for i := range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := e.post(client, fmt.Sprintf("c%d", i), taskBody("hello", 200), nil)
			if r.status != http.StatusAccepted {
				t.Errorf("POST %d: %d %s", i, r.status, r.body)
				return
			}
			ids[i] = r.task(t).ID
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	for _, id := range ids {
		e.waitFinished(client, id)
	}
	used := e.scalar(`SELECT sum(input_tokens + output_tokens) FROM usage_records`)
	r := e.post(client, "last", taskBody("hello", 200), nil)
	if r.status != http.StatusAccepted {
		t.Fatalf("last POST: %d %s", r.status, r.body)
	}
	estimate := e.scalar(`SELECT tokens FROM rate_charges`)
	if n := e.scalar(`SELECT tokens FROM rate_windows WHERE owner_id = 'acme'`); n != used+estimate {
		t.Errorf("window tokens = %d, want the usage %d plus the last estimate %d", n, used, estimate)
	}
	e.checkInvariants()
}

// A task cancelled before any provider call is charged nothing: its
// estimate leaves the window's token count as a settlement's difference
// would, at the window's next admission.
func TestRateLimitTokensReturnedByCancel(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{queueOnly: true, noWorkers: true})
	e.clock.Set(limitWindow())
	admin := e.owner("ops", accounts.RoleAdmin, 0)
	client := e.owner("acme", accounts.RoleClient, 1_000_000_000)
	e.putLimits(admin, "acme", `{"tokens_per_minute": 100000}`)
	r := e.post(client, "c1", taskBody("hello", 500), nil)
	if r.status != http.StatusAccepted {
		t.Fatalf("POST: %d %s", r.status, r.body)
	}
	estimate := e.scalar(`SELECT tokens FROM rate_charges`)
	if c := e.do(http.MethodPost, "/v1/tasks/"+r.task(t).ID+"/cancel", client, nil, nil); c.status != http.StatusOK {
		t.Fatalf("cancel: %d %s", c.status, c.body)
	}
	if n := e.scalar(`SELECT count(*) FROM usage_records`); n != 0 {
		t.Fatalf("usage records after a cancel before any call: %d, want 0 (the test proves nothing)", n)
	}
	if n := e.scalar(`SELECT count(*) FROM rate_charges`); n != 0 {
		t.Errorf("charges left after the cancel: %d", n)
	}
	r = e.post(client, "c2", taskBody("hello", 500), nil)
	if r.status != http.StatusAccepted {
		t.Fatalf("POST: %d %s", r.status, r.body)
	}
	if remaining := r.header.Get("x-ratelimit-remaining-tokens"); remaining != strconv.FormatInt(100000-estimate, 10) {
		t.Errorf("remaining tokens after the cancel %q, want %d (only the new task's estimate)", remaining, 100000-estimate)
	}
}
