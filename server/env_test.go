package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tollgate/tollgate/accounts"
	"github.com/tollgate/tollgate/budget"
	"github.com/tollgate/tollgate/catalog"
	"github.com/tollgate/tollgate/internal/contract"
	"github.com/tollgate/tollgate/internal/eventually"
	"github.com/tollgate/tollgate/internal/logbuf"
	"github.com/tollgate/tollgate/internal/testclock"
	"github.com/tollgate/tollgate/internal/testdb"
	"github.com/tollgate/tollgate/metrics"
	"github.com/tollgate/tollgate/provider/fake"
	"github.com/tollgate/tollgate/redact"
	"github.com/tollgate/tollgate/replay"
	"github.com/tollgate/tollgate/routes"
	"github.com/tollgate/tollgate/seal"
	"github.com/tollgate/tollgate/server"
	"github.com/tollgate/tollgate/tasks"
	"github.com/tollgate/tollgate/webhooks"
)

var (
	specOnce sync.Once
	spec     *contract.Validator
	specErr  error
)

// testModel is priced at exactly 1 micro per input and 2 per output token,
// so reservations and costs are easy to compute by hand.
const testModel = "test-model"

// testCatalog: two provider keys on the fake, in two wire formats, and a
// model chain that falls back from one to the other.
const testCatalog = `
providers:
  - {key: default, kind: openai, base_url: fake, api_key_env: TEST_OPENAI_KEY}
  - {key: backup, kind: anthropic, base_url: fake, api_key_env: TEST_ANTHROPIC_KEY}
  - {key: workers, kind: cloudflare, base_url: fake, account_id: acct1, api_key_env: TEST_CF_KEY}
default_model: test-model
models:
  - {name: test-model, provider: default, input_micros_per_mtok: 1000000, output_micros_per_mtok: 2000000, tools: true, vision: true, json_schema: true}
  - {name: plain-model, provider: default, input_micros_per_mtok: 1000000, output_micros_per_mtok: 2000000}
  - {name: reasoning-model, provider: default, input_micros_per_mtok: 1000000, output_micros_per_mtok: 2000000, tools: true, json_schema: true, reasoning: true}
  - {name: agent-model, provider: default, input_micros_per_mtok: 1000000, output_micros_per_mtok: 2000000, tools: true, vision: true, json_schema: true, reasoning: true}
  - {name: agent-model-b, provider: default, input_micros_per_mtok: 1000000, output_micros_per_mtok: 2000000, tools: true, vision: true, json_schema: true, reasoning: true}
  - name: chain-model
    provider: default
    provider_model: primary-v1
    input_micros_per_mtok: 1000000
    output_micros_per_mtok: 2000000
    fallback: [small-backup, backup-model]
  - {name: small-backup, provider: backup, context_window: 50, input_micros_per_mtok: 1, output_micros_per_mtok: 1}
  - {name: backup-model, provider: backup, provider_model: claude-test, input_micros_per_mtok: 3000000, output_micros_per_mtok: 4000000, tools: true, vision: true, json_schema: true}
  - {name: cf-model, provider: workers, provider_model: "@cf/meta/llama-3.1-8b-instruct", input_micros_per_mtok: 1000000, output_micros_per_mtok: 2000000, tools: true, json_schema: true}
routes:
  - name: draft-reply
    prompt_version: "2026-11-30.1"
    system_prompt: "Draft one concise support reply, under 80 words. Never promise account actions."
    user_template: "Customer message: {{message}}"
    input: [{name: message, type: string, trim: true, min_length: 1, max_length: 500}]
    model: test-model
    max_tokens: 120
    deadline_ms: 5000
    max_retries: 1
    output: {type: text, max_length: 1200}
    fallback: "Thanks for your message; we will reply shortly."
    on_failure: error
  - name: classify-ticket
    prompt_version: "2026-11-30.1"
    system_prompt: "Classify the support ticket. Answer only JSON: {\"label\": string, \"confidence\": number}."
    user_template: "{{ticket}}"
    input: [{name: ticket, type: string, trim: true, min_length: 1, max_length: 2000}]
    model: cf-model
    max_tokens: 60
    deadline_ms: 8000
    output:
      type: json
      schema:
        type: object
        additionalProperties: false
        required: [label, confidence]
        properties:
          label: {type: string, minLength: 1}
          confidence: {type: number, minimum: 0, maximum: 1}
    fallback: {label: unavailable, confidence: 0}
    on_failure: fallback
    guards: {daily_calls: 20}
  - name: tagline
    prompt_version: "1"
    system_prompt: "Write a tagline."
    user_template: "{{product}}"
    input: [{name: product, type: string, min_length: 1, max_length: 100}]
    model: test-model
    max_tokens: 30
    deadline_ms: 5000
    output: {type: text, max_length: 200}
    fallback: "Simply better."
    on_failure: fallback
`

func testEnvVars(name string) string {
	return map[string]string{"TEST_OPENAI_KEY": "sk-test-canary-openai-key", "TEST_ANTHROPIC_KEY": "sk-ant-test-canary-key", "TEST_CF_KEY": "cf-test-token"}[name]
}

type envOptions struct {
	noWorkers      bool
	requestTimeout time.Duration
	maxAttempts    int
	maxBody        int64
	pool           *pgxpool.Pool // reuse another env's database
	probeEvery     time.Duration
	maxSnooze      time.Duration
	retryMax       time.Duration
	webhook        string // budget alert webhook
	logs           io.Writer
	allowRerun     bool
	queueOnly      bool          // tasks.Config.QueueOnly: no runs on arrival
	recheckEvery   time.Duration // tasks.Config.RecheckEvery
	maxAdmitting   int           // tasks.Config.MaxAdmitting; 0: no bound here (see newEnv)
	shedAfter      time.Duration // tasks.Config.ShedAdmittingAfter
	shedQueueWait  time.Duration // tasks.Config.ShedQueueWait
	shedSample     time.Duration // tasks.Config.ShedSampleEvery
	recordWithin   time.Duration // tasks.Config.RecordWithin
	catalog        string        // replaces testCatalog
	metricsToken   string        // server.Deps.MetricsToken
	metricsApart   bool          // server.Deps.MetricsElsewhere
	passThrough    bool          // catalog pass_through: unknown model names go to the first provider
	priceList      string        // a price list in LiteLLM's format (catalog.UsePriceList)
	listPass       bool          // with priceList: TOLLGATE_PASS_THROUGH=on
	redactor       *redact.Redactor
	authFailures   int // server.Deps.AuthFailures
	// failureReplayWindow is tasks.Config.FailureReplayWindow: 0 its
	// default, negative none.
	failureReplayWindow time.Duration
	// webhookAddresses replaces the owners' webhooks' address policy,
	// which by default allows loopback, where the tests' receivers listen.
	webhookAddresses *webhooks.AddressPolicy
}

// env is one Tollgate server on its own database, with the fake provider
// behind it and every response checked against openapi.yaml.
type env struct {
	t        testing.TB
	dbURL    string
	clock    *testclock.Clock
	pool     *pgxpool.Pool
	fake     *fake.Server
	url      string
	client   *http.Client
	accounts *accounts.Store
	budgets  *budget.Store
	tasks    *tasks.Service
	routes   *routes.Service
	metrics  *metrics.Metrics
}

func newEnv(t testing.TB, o envOptions) *env {
	t.Helper()
	specOnce.Do(func() { spec, specErr = contract.Load("../openapi.yaml") })
	if specErr != nil {
		t.Fatalf("load openapi.yaml: %v", specErr)
	}
	pool, dbURL := o.pool, ""
	if pool == nil {
		pool, dbURL = testdb.NewPool(t)
	}

	fp := fake.New()
	fakeSrv := httptest.NewServer(fp)
	t.Cleanup(func() { fp.Close(); fakeSrv.Close() })

	if o.retryMax == 0 {
		o.retryMax = 50 * time.Millisecond
	}
	if o.requestTimeout == 0 {
		o.requestTimeout = 5 * time.Second
	}
	if o.maxAdmitting == 0 {
		// Tests fire bursts of 100 concurrent POSTs to prove what holds
		// under contention; under the race detector on a busy host such a
		// burst can outlast the shedding patience. Shedding has tests of
		// its own (shed_test.go).
		o.maxAdmitting = -1
	}
	if o.catalog == "" {
		o.catalog = testCatalog
	}
	cat, err := catalog.Parse([]byte(o.catalog), testEnvVars)
	if err != nil {
		t.Fatal(err)
	}
	if o.passThrough {
		cat.PassThrough = true
	}
	if o.priceList != "" {
		l, err := catalog.ParsePriceList([]byte(o.priceList))
		if err != nil {
			t.Fatal(err)
		}
		if err := cat.UsePriceList(l, o.listPass); err != nil {
			t.Fatal(err)
		}
	}
	clients, err := cat.Clients(fakeSrv.Client(), fakeSrv.URL)
	if err != nil {
		t.Fatal(err)
	}
	clock := &testclock.Clock{}
	var log *slog.Logger
	if o.logs != nil {
		log = slog.New(slog.NewJSONHandler(o.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	m := metrics.New()
	m.WatchDatabase(pool, slog.New(slog.DiscardHandler), cat.ProviderKeys())
	var svc *tasks.Service
	addresses := webhooks.AddressPolicy{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}}
	if o.webhookAddresses != nil {
		addresses = *o.webhookAddresses
	}
	hooks, err := webhooks.New(pool, webhooks.Config{
		Sealer: testSealer(t), Render: server.RenderTask(&svc), NotFound: tasks.ErrNotFound, Now: clock.Now, Addresses: addresses,
		Metrics: m, Logger: log, RetryBase: time.Millisecond, RetryMax: 5 * time.Millisecond, Timeout: 5 * time.Second, FetchPoll: 50 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	var alertHook budget.Sender
	if o.webhook != "" {
		alertHook = hooks.Hook(o.webhook, webhooks.Retry{Attempts: budget.AlertAttempts, Base: budget.AlertBackoff, Max: budget.AlertBackoffMax})
	}
	alerter := budget.NewAlerter(pool, alertHook, log, nil)
	svc, err = tasks.New(pool, tasks.Config{
		Webhooks:           hooks,
		Metrics:            m,
		Now:                clock.Now,
		Alerter:            alerter,
		Logger:             log,
		Sealer:             testSealer(t),
		Redactor:           o.redactor,
		Catalog:            cat,
		Clients:            clients,
		RequestTimeout:     o.requestTimeout,
		MaxAttempts:        o.maxAttempts,
		RetryBase:          10 * time.Millisecond,
		RetryMax:           o.retryMax,
		ProbeEvery:         o.probeEvery,
		MaxSnooze:          o.maxSnooze,
		FetchCooldown:      5 * time.Millisecond,
		FetchPoll:          50 * time.Millisecond,
		BuildVersion:       "test",
		QueueOnly:          o.queueOnly,
		RecheckEvery:       o.recheckEvery,
		MaxAdmitting:       o.maxAdmitting,
		ShedAdmittingAfter: o.shedAfter,
		ShedQueueWait:      o.shedQueueWait,
		ShedSampleEvery:    o.shedSample,
		RecordWithin:       o.recordWithin,
		// 0 takes the default window, as a server does.
		FailureReplayWindow: o.failureReplayWindow,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go alerter.Run(ctx)
	if !o.noWorkers {
		if err := svc.Start(ctx); err != nil {
			t.Fatal(err)
		}
	}
	compiled, err := routes.Compile(cat)
	if err != nil {
		t.Fatal(err)
	}
	routeSvc := routes.New(routes.Deps{Pool: pool, Tasks: svc, Catalog: cat, Routes: compiled, Metrics: m, Log: log, Now: clock.Now})
	keys := accounts.NewStore(pool)
	go keys.CacheKeys(ctx, accounts.CacheOptions{})
	h := server.New(server.Deps{
		Routes: routeSvc,
		Pool:   pool, Tasks: svc, Accounts: keys, Budgets: budget.NewStore(pool, clock.Now),
		Replays: replay.NewStore(pool), MaxBodyBytes: o.maxBody, Metrics: m, Logger: log,
		AllowRerun: o.allowRerun, Catalog: cat,
		MetricsToken: o.metricsToken, MetricsElsewhere: o.metricsApart, AuthFailures: o.authFailures, Now: clock.Now,
		Webhooks: hooks,
	})
	srv := httptest.NewServer(h)
	tr := spec.Transport(nil)
	t.Cleanup(func() {
		srv.Close()
		if !o.noWorkers {
			sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer scancel()
			if err := svc.Stop(sctx); err != nil {
				t.Errorf("stop workers: %v", err)
			}
		}
		cancel()
		tr.Check(t)
	})
	return &env{t: t, pool: pool, fake: fp, url: srv.URL, client: &http.Client{Transport: tr},
		accounts: keys, budgets: budget.NewStore(pool, clock.Now), clock: clock, tasks: svc, dbURL: dbURL, routes: routeSvc, metrics: m}
}

// owner creates an owner with a budget and returns a key of the role.
func (e *env) owner(name string, role accounts.Role, totalMicros int64) string {
	e.t.Helper()
	ctx := context.Background()
	if _, err := e.budgets.Set(ctx, name, totalMicros); err != nil {
		e.t.Fatal(err)
	}
	key, err := e.accounts.CreateKey(ctx, name, role, "")
	if err != nil {
		e.t.Fatal(err)
	}
	return key
}

type response struct {
	status int
	header http.Header
	body   []byte
}

func (r response) json(t testing.TB) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("decode %d body %q: %v", r.status, r.body, err)
	}
	return m
}

func (r response) task(t testing.TB) tasks.Task {
	t.Helper()
	var task tasks.Task
	if err := json.Unmarshal(r.body, &task); err != nil {
		t.Fatalf("decode task from %d %q: %v", r.status, r.body, err)
	}
	return task
}

// problemCode returns the code of a problem+json body, failing the test if
// the body is not one.
func (r response) problemCode(t testing.TB) string {
	t.Helper()
	if ct := r.header.Get("Content-Type"); ct != "application/problem+json" {
		t.Fatalf("content type %q, want application/problem+json (status %d, body %s)", ct, r.status, r.body)
	}
	code, _ := r.json(t)["code"].(string)
	return code
}

func (e *env) do(method, path, key string, body []byte, header map[string]string) response {
	e.t.Helper()
	req, err := http.NewRequest(method, e.url+path, bytes.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	for k, v := range header {
		if v == "" {
			req.Header.Del(k)
			continue
		}
		req.Header.Set(k, v)
	}
	res, err := e.client.Do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	return response{status: res.StatusCode, header: res.Header, body: b}
}

func (e *env) post(key, idemKey string, body []byte, header map[string]string) response {
	e.t.Helper()
	h := map[string]string{"Idempotency-Key": idemKey}
	for k, v := range header {
		h[k] = v
	}
	return e.do(http.MethodPost, "/v1/tasks", key, body, h)
}

// submit POSTs a task and returns its id, failing unless it is accepted.
func (e *env) submit(key, idemKey string, body []byte) string {
	e.t.Helper()
	r := e.post(key, idemKey, body, nil)
	if r.status != http.StatusAccepted {
		e.t.Fatalf("POST: %d %s", r.status, r.body)
	}
	return r.task(e.t).ID
}

// taskBody is a valid request whose reservation is easy to compute:
// content of 4n bytes estimates as n tokens, plus 4 for framing.
func taskBody(content string, maxTokens int) []byte {
	b, _ := json.Marshal(map[string]any{
		"model":      testModel,
		"messages":   []map[string]string{{"role": "user", "content": content}},
		"max_tokens": maxTokens,
	})
	return b
}

// waitFinished polls the task until it is final, failing after a generous
// bound: a condition wait, not a sleep standing in for one.
func (e *env) waitFinished(key, id string) tasks.Task {
	e.t.Helper()
	var task tasks.Task
	eventually.Wait(e.t, "task "+id+" finished", func() bool {
		r := e.do(http.MethodGet, "/v1/tasks/"+id, key, nil, nil)
		if r.status != http.StatusOK {
			e.t.Fatalf("GET task: %d %s", r.status, r.body)
		}
		task = r.task(e.t)
		return task.Status.Final()
	})
	return task
}

func (e *env) scalar(sql string, args ...any) int64 {
	e.t.Helper()
	var n int64
	if err := e.pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		e.t.Fatalf("%s: %v", sql, err)
	}
	return n
}

// checkInvariants asserts, in SQL, what must hold whatever happened: no
// finished task holds a reservation, every running or queued task holds
// one, the ledger explains every balance, and no owner is above its total.
func (e *env) checkInvariants() {
	e.t.Helper()
	checks := []struct {
		name string
		sql  string
	}{
		{"finished task holds a reservation", `
			SELECT count(*) FROM tasks t JOIN budget_reservations r ON r.task_id = t.id
			WHERE t.finished_at IS NOT NULL AND r.state = 'held'`},
		{"unfinished task without a held reservation", `
			SELECT count(*) FROM tasks t LEFT JOIN budget_reservations r ON r.task_id = t.id AND r.state = 'held'
			WHERE t.finished_at IS NULL AND r.task_id IS NULL`},
		{"held reservations differ from reserved", `
			SELECT count(*) FROM budget_periods p WHERE p.workload = '' AND p.reserved_micros <> COALESCE((
				SELECT sum(amount_micros) FROM budget_reservations r WHERE r.state = 'held' AND p.id = ANY(r.budget_period_ids)), 0)`},
		{"owner above total", `SELECT count(*) FROM budget_periods WHERE reserved_micros + spent_micros > total_micros`},
		{"ended_unsucceeded disagrees with status", `
			SELECT count(*) FROM tasks
			WHERE ended_unsucceeded IS DISTINCT FROM CASE WHEN status IN ('failed', 'canceled') THEN status END`},
		{"provider attempts beyond journal", `SELECT count(*) FROM tasks t WHERE t.attempts <> (SELECT count(*) FROM task_attempts a WHERE a.task_id = t.id)`},
	}
	for _, c := range checks {
		if n := e.scalar(c.sql); n != 0 {
			e.t.Errorf("invariant violated: %s (%d rows)", c.name, n)
		}
	}
	mismatches, err := e.budgets.Verify(context.Background())
	if err != nil {
		e.t.Fatal(err)
	}
	for _, m := range mismatches {
		e.t.Errorf("ledger does not explain a balance: %s", m)
	}
}

// restartWorkers starts a second server with running workers on e's
// database, as a fresh process would after a crash.
func restartWorkers(t *testing.T, e *env) *env {
	t.Helper()
	return newEnv(t, envOptions{pool: e.pool})
}

// waitFor polls a condition until it holds, failing after a generous bound.
func (e *env) waitFor(what string, cond func() bool) {
	e.t.Helper()
	eventually.Wait(e.t, what, cond)
}

// balance returns the owner's own budget in the current period.
func (e *env) balance(owner string) budget.Balance {
	e.t.Helper()
	list, err := e.budgets.Balances(context.Background(), owner)
	if err != nil {
		e.t.Fatal(err)
	}
	return list[0]
}

// fakeDelay scripts one successful answer after ms milliseconds.
func fakeDelay(ms int) fake.Scripted {
	return fake.Scripted{DelayMS: ms, Status: 200, Body: `{"id":"x","object":"chat.completion","created":1,"model":"test-model",` +
		`"choices":[{"index":0,"message":{"role":"assistant","content":"slow answer"},"finish_reason":"stop"}],` +
		`"usage":{"prompt_tokens":6,"completion_tokens":3,"total_tokens":9}}`}
}

func testSealer(t testing.TB) *seal.Sealer {
	t.Helper()
	s, err := seal.New(bytes.Repeat([]byte{7}, 32))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// syncBuffer collects logs written by concurrent goroutines.
type syncBuffer = logbuf.Buffer

// searchReplays runs support's replay search with query as key and returns
// the ids of the tasks found, in the order answered.
func (e *env) searchReplays(key, query string) []string {
	e.t.Helper()
	r := e.do(http.MethodGet, "/v1/replays?"+query, key, nil, nil)
	if r.status != http.StatusOK {
		e.t.Fatalf("search %q: %d %s", query, r.status, r.body)
	}
	var out struct {
		Data []struct {
			TaskID string `json:"task_id"`
		} `json:"data"`
	}
	if err := json.Unmarshal(r.body, &out); err != nil {
		e.t.Fatalf("search %q: %v in %s", query, err, r.body)
	}
	ids := []string{}
	for _, d := range out.Data {
		ids = append(ids, d.TaskID)
	}
	return ids
}

// checkNothingWritten fails unless refused requests left no trace: no
// provider call, no task, no top-up, and the books still balance.
func (e *env) checkNothingWritten() {
	e.t.Helper()
	if n := e.fake.CallCount(); n != 0 {
		e.t.Errorf("provider calls = %d, want 0", n)
	}
	if n := e.scalar(`SELECT count(*) FROM tasks`); n != 0 {
		e.t.Errorf("tasks stored = %d, want 0", n)
	}
	if n := e.scalar(`SELECT count(*) FROM budget_ledger WHERE kind = 'topup'`); n != 0 {
		e.t.Errorf("top-ups stored = %d, want 0", n)
	}
	if n := e.scalar(`SELECT count(*) FROM webhook_endpoints`); n != 0 {
		e.t.Errorf("webhooks stored = %d, want 0", n)
	}
	e.checkInvariants()
}

// counter returns the value of the metric series name{labels} as the
// registry holds it now; 0 when the series does not exist.
func (e *env) counter(name string, labels map[string]string) float64 {
	e.t.Helper()
	families, err := e.metrics.Registry.Gather()
	if err != nil {
		e.t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	series:
		for _, m := range f.GetMetric() {
			got := map[string]string{}
			for _, l := range m.GetLabel() {
				got[l.GetName()] = l.GetValue()
			}
			for k, v := range labels {
				if got[k] != v {
					continue series
				}
			}
			switch {
			case m.GetCounter() != nil:
				return m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				return m.GetGauge().GetValue()
			}
		}
	}
	return 0
}
