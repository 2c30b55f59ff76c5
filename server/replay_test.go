package server_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/accounts"
	"github.com/tollgate/tollgate/provider/fake"
)

func TestReplayServesTheStoredRecordWithoutCallingTheModel(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	owner := e.owner("acme", accounts.RoleClient, 1_000_000)
	other := e.owner("other", accounts.RoleClient, 1_000_000)
	support := e.owner("helpdesk", accounts.RoleSupport, 0)
	finance := e.owner("ledger", accounts.RoleFinance, 0)

	r := e.post(owner, "k", taskBody("what is 2+2?", 100), map[string]string{"Prefer": "wait=30"})
	task := e.waitFinished(owner, r.task(t).ID)
	callsBefore := e.fake.CallCount()

	cases := []struct {
		name   string
		key    string
		reason string
		status int
	}{
		{"owner", owner, "", 200},
		{"support with reason", support, "ticket 4711: customer disputes answer", 200},
		{"support without reason", support, "", 403},
		{"another client", other, "curious", 404},
		{"finance", finance, "audit", 404},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res := e.do(http.MethodGet, "/v1/tasks/"+task.ID+"/replay", c.key, nil, map[string]string{"X-Reason": c.reason})
			if res.status != c.status {
				t.Fatalf("%d %s, want %d", res.status, res.body, c.status)
			}
			if c.status != 200 {
				return
			}
			m := res.json(t)
			attempts := m["attempts"].([]any)
			if len(attempts) != 1 {
				t.Fatalf("attempts = %v, want 1", attempts)
			}
			a := attempts[0].(map[string]any)
			resp := a["response"].(map[string]any)
			if resp["content"] != task.Result.Output || a["state"] != "succeeded" {
				t.Errorf("replayed attempt = %v, want the stored output %q", a, task.Result.Output)
			}
			msgs := m["request"].(map[string]any)["messages"].([]any)
			if msgs[0].(map[string]any)["content"] != "what is 2+2?" {
				t.Errorf("stored request = %v", m["request"])
			}
		})
	}
	if got := e.fake.CallCount(); got != callsBefore {
		t.Errorf("provider calls went from %d to %d during replays, want no change", callsBefore, got)
	}
	if got := e.scalar(`SELECT count(*) FROM replay_audit WHERE task_id = $1`, task.ID); got != 1 {
		t.Errorf("audit rows = %d, want 1 (support's read; the owner's own reads are not audited)", got)
	}
	if got := e.scalar(`SELECT count(*) FROM replay_audit WHERE actor_role = 'support' AND reason <> ''`); got != 1 {
		t.Errorf("support read audited with its reason: %d rows, want 1", got)
	}
}

func TestUsageIsScopedByRoleAndTotalsMatchRows(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	alice := e.owner("alice", accounts.RoleClient, 1_000_000)
	bob := e.owner("bob", accounts.RoleClient, 1_000_000)
	finance := e.owner("ledger", accounts.RoleFinance, 0)
	for i, k := range []string{alice, alice, bob} {
		r := e.post(k, string(rune('a'+i)), taskBody("abcdefgh", 100), map[string]string{"Prefer": "wait=30"})
		e.waitFinished(k, r.task(t).ID)
	}
	cases := []struct {
		name      string
		key, path string
		wantRows  int
	}{
		{"client sees own", alice, "/v1/usage", 2},
		{"other client sees own", bob, "/v1/usage", 1},
		{"finance sees all", finance, "/v1/usage", 3},
		{"finance filters by owner", finance, "/v1/usage?owner=bob", 1},
		{"window before any usage", finance, "/v1/usage?from=2020-01-01&to=2020-02-01", 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := e.do(http.MethodGet, c.path, c.key, nil, nil)
			if r.status != http.StatusOK {
				t.Fatalf("%d %s", r.status, r.body)
			}
			m := r.json(t)
			rows := m["rows"].([]any)
			if len(rows) != c.wantRows {
				t.Fatalf("rows = %d, want %d", len(rows), c.wantRows)
			}
			var sum float64
			for _, row := range rows {
				sum += row.(map[string]any)["cost_micros"].(float64)
			}
			totals := m["totals"].(map[string]any)
			if totals["cost_micros"].(float64) != sum || totals["tasks"].(float64) != float64(c.wantRows) {
				t.Errorf("totals %v disagree with rows (sum %v)", totals, sum)
			}
		})
	}
}

func TestHealthAndReadiness(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{noWorkers: true})
	for _, path := range []string{"/healthz", "/readyz"} {
		if r := e.do(http.MethodGet, path, "", nil, nil); r.status != http.StatusOK {
			t.Errorf("%s: %d %s", path, r.status, r.body)
		}
	}
	// A schema behind the binary is not ready.
	if _, err := e.pool.Exec(t.Context(), `UPDATE schema_migrations SET version = version - 1`); err != nil {
		t.Fatal(err)
	}
	r := e.do(http.MethodGet, "/readyz", "", nil, nil)
	if r.status != http.StatusServiceUnavailable || r.json(t)["checks"].(map[string]any)["migrations"] != "behind" {
		t.Errorf("readyz with an old schema: %d %s, want 503 migrations behind", r.status, r.body)
	}
	// Off the contract on purpose, so asked without the contract check.
	res, err := http.Get(e.url + "/no/such/route")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusNotFound || res.Header.Get("Content-Type") != "application/problem+json" {
		t.Errorf("unknown route: %d %s, want a 404 problem", res.StatusCode, res.Header.Get("Content-Type"))
	}
}

func TestMetricsCountProviderCallsByClassAndFlagUnclassifiedErrors(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	key := e.owner("acme", accounts.RoleClient, 1_000_000)
	// An HTML error page: no code, no type, classified by its status alone.
	e.fake.Script(fake.Scripted{Status: 502, Headers: map[string]string{"Content-Type": "text/html"}, Body: "<html><body>Bad Gateway</body></html>"})
	r := e.post(key, "k", taskBody("abcdefgh", 10), nil)
	e.waitFinished(key, r.task(t).ID)

	res := e.do(http.MethodGet, "/metrics", "", nil, nil)
	if res.status != http.StatusOK {
		t.Fatalf("/metrics: %d", res.status)
	}
	body := string(res.body)
	for _, want := range []string{
		`tollgate_provider_calls_total{class="transient",model="test-model",provider_key="default"} 1`,
		`tollgate_provider_calls_total{class="success",model="test-model",provider_key="default"} 1`,
		`tollgate_provider_unclassified_errors_total{provider_key="default",status="502"} 1`,
		`tollgate_tasks_finished_total{code="",status="succeeded"} 1`,
		`tollgate_tasks_created_total{outcome="created"} 1`,
		`tollgate_http_requests_total{method="POST",route="/v1/tasks",status="202"} 1`,
		`tollgate_http_request_seconds_count{method="POST",route="/v1/tasks"} 1`,
		`tollgate_db_pool_connections{state="in_use"} `,
		`tollgate_db_pool_waits_total `,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if strings.Contains(body, key) || strings.Contains(body, "abcdefgh") {
		t.Error("/metrics exposes a key or prompt text")
	}
}
