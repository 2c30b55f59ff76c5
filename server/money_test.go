package server_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/accounts"
	"github.com/tollgate/tollgate/budget"
	"github.com/tollgate/tollgate/provider/fake"
)

// openAIAnswer is a succeeded chat completion whose usage object is usage.
func openAIAnswer(usage string) fake.Scripted {
	return fake.Scripted{Status: 200, Body: `{"id":"x","object":"chat.completion","created":1,"model":"test-model",` +
		`"choices":[{"index":0,"message":{"role":"assistant","content":"an answer"},"finish_reason":"stop"}],"usage":` + usage + `}`}
}

// A usage report beyond any sane bound is a lie, never a reason to call
// again: the task succeeds on the one call it made, charged at most its
// reservation, the rest recorded as shortfall, its journal entry flagged
// with the figures as reported, and the metric counts it. The cost never
// wraps (negative, tiny), the answer is never refused, and the provider is
// never called again.
func TestImplausibleUsageIsChargedOnceAndFlagged(t *testing.T) {
	t.Parallel()
	// taskBody("abcdefgh", 100) reserves (2+4)×1 + 100×2 = 206 micros.
	const reserved = 206
	cases := []struct {
		name                 string
		usage                string
		wantIn, wantOut      int64 // reported, as the journal keeps them
		wantCost             int64
		wantCharged, wantGap int64
		queueOnly            bool // run by a River job, not on arrival: its journal entry is written after the call
	}{
		{"int64's maximum", `{"prompt_tokens":9223372036854775807,"completion_tokens":9223372036854775807}`,
			9223372036854775807, 9223372036854775807, 3_000_000_000, reserved, 3_000_000_000 - reserved, false},
		// 4611686018427387904 × 2 micros wrapped to exactly 0 per million.
		{"a product that wrapped to zero", `{"prompt_tokens":3,"completion_tokens":4611686018427387904}`,
			3, 4611686018427387904, 2_000_000_003, reserved, 2_000_000_003 - reserved, false},
		{"beyond an int64", `{"prompt_tokens":1e30,"completion_tokens":100000000000000000000000}`,
			9223372036854775807, 9223372036854775807, 3_000_000_000, reserved, 3_000_000_000 - reserved, false},
		{"just above the bound", `{"prompt_tokens":1000000001,"completion_tokens":0}`,
			1_000_000_001, 0, 1_000_000_000, reserved, 1_000_000_000 - reserved, false},
		{"negative", `{"prompt_tokens":-5,"completion_tokens":3}`, -5, 3, 6, 6, 0, false},
		{"int64's maximum, run from the queue", `{"prompt_tokens":9223372036854775807,"completion_tokens":9223372036854775807}`,
			9223372036854775807, 9223372036854775807, 3_000_000_000, reserved, 3_000_000_000 - reserved, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, envOptions{queueOnly: c.queueOnly})
			key := e.owner("acme", accounts.RoleClient, 1_000_000)
			e.fake.Script(openAIAnswer(c.usage))
			r := e.post(key, "k", taskBody("abcdefgh", 100), map[string]string{"Prefer": "wait=30"})
			if r.status != http.StatusOK && r.status != http.StatusAccepted {
				t.Fatalf("POST: %d %s", r.status, r.body)
			}
			task := e.waitFinished(key, r.task(t).ID)
			if task.Status != "succeeded" || task.Result == nil {
				t.Fatalf("task %s, result %+v; want succeeded with a result", task.Status, task.Result)
			}
			if n := e.fake.CallCount(); n != 1 {
				t.Errorf("provider called %d times, want exactly once", n)
			}
			if task.Result.CostMicros != c.wantCost {
				t.Errorf("cost %d, want %d", task.Result.CostMicros, c.wantCost)
			}
			e.expectScalars([]scalarCheck{
				{"charged", `SELECT charged_micros FROM usage_records WHERE task_id = '` + task.ID + `'`, c.wantCharged},
				{"shortfall", `SELECT shortfall_micros FROM usage_records WHERE task_id = '` + task.ID + `'`, c.wantGap},
				{"spent", `SELECT spent_micros FROM budget_periods WHERE owner_id = 'acme'`, c.wantCharged},
				{"flagged attempts", `SELECT count(*) FROM task_attempts WHERE task_id = '` + task.ID + `' AND usage_implausible`, 1},
				{"reported input", `SELECT reported_input_tokens FROM task_attempts WHERE task_id = '` + task.ID + `'`, c.wantIn},
				{"reported output", `SELECT reported_output_tokens FROM task_attempts WHERE task_id = '` + task.ID + `'`, c.wantOut},
				{"journal entries", `SELECT count(*) FROM task_attempts WHERE task_id = '` + task.ID + `'`, 1},
			})
			page := e.do(http.MethodGet, "/metrics", "", nil, nil).body
			if n := metricValue(t, page, `tollgate_usage_implausible_total{provider_key="default"}`); n != 1 {
				t.Errorf("tollgate_usage_implausible_total = %v, want 1", n)
			}
			e.checkInvariants()
		})
	}
}

// A plausible report (input beyond the estimate, output at the limit
// sent) is charged as usual, beyond the reservation up to the headroom,
// and not flagged.
func TestPlausibleUsageIsNotFlagged(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	key := e.owner("acme", accounts.RoleClient, 1_000_000)
	e.fake.Script(openAIAnswer(`{"prompt_tokens":1000,"completion_tokens":100}`))
	id := e.submit(key, "k", taskBody("abcdefgh", 100))
	task := e.waitFinished(key, id)
	if task.Status != "succeeded" {
		t.Fatalf("task %s", task.Status)
	}
	e.expectScalars([]scalarCheck{
		{"flagged attempts", `SELECT count(*) FROM task_attempts WHERE usage_implausible`, 0},
		{"charged beyond the reservation, up to the headroom", `SELECT charged_micros FROM usage_records`, 1200},
	})
	e.checkInvariants()
}

// Usage the request rules out is a lie even below the sane bound: output
// (reasoning included) beyond the output limit sent times the choices, or
// input far beyond what the request's bytes can hold. It is charged at
// most the reservation, the rest recorded as shortfall, the attempt
// flagged and counted; a report just within the request's bounds is
// believed.
func TestUsageTheRequestRulesOutIsCappedAndFlagged(t *testing.T) {
	t.Parallel()
	chat := func(maxTokens, n int) []byte {
		b, _ := json.Marshal(map[string]any{"model": testModel, "max_tokens": maxTokens, "n": n,
			"messages": []map[string]string{{"role": "user", "content": "abcdefgh"}}})
		return b
	}
	// chat(16, 1) reserves (2+4)×1 + 16×2 = 38 micros; chat(16, 2) 70.
	cases := []struct {
		name          string
		body          []byte
		usage         string
		wantFlagged   int64
		wantCharged   int64
		wantShortfall int64
	}{
		{"a billion output tokens for max_tokens 16", chat(16, 1), `{"prompt_tokens":6,"completion_tokens":1000000000}`,
			1, 38, 6 + 2_000_000_000 - 38},
		{"one output token beyond the limit", chat(16, 1), `{"prompt_tokens":6,"completion_tokens":17}`, 1, 38, 6 + 34 - 38},
		{"the limit exactly", chat(16, 1), `{"prompt_tokens":6,"completion_tokens":16}`, 0, 38, 0},
		{"beyond the limit times n", chat(16, 2), `{"prompt_tokens":6,"completion_tokens":33}`, 1, 70, 6 + 66 - 70},
		{"the limit times n", chat(16, 2), `{"prompt_tokens":6,"completion_tokens":32}`, 0, 70, 0},
		{"reasoning beyond the limit", chat(16, 1),
			`{"prompt_tokens":6,"completion_tokens":500,"completion_tokens_details":{"reasoning_tokens":490}}`, 1, 38, 6 + 1000 - 38},
		{"input far beyond what 8 bytes hold", chat(16, 1), `{"prompt_tokens":5000000,"completion_tokens":1}`,
			1, 38, 5_000_002 - 38},
		{"input beyond the estimate but within the bytes' bound", chat(16, 1), `{"prompt_tokens":40,"completion_tokens":16}`,
			0, 72, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, envOptions{})
			key := e.owner("acme", accounts.RoleClient, 1_000_000)
			e.fake.Script(openAIAnswer(c.usage))
			id := e.submit(key, "k", c.body)
			task := e.waitFinished(key, id)
			if task.Status != "succeeded" {
				t.Fatalf("task %s; want succeeded", task.Status)
			}
			if n := e.fake.CallCount(); n != 1 {
				t.Errorf("provider called %d times, want once", n)
			}
			e.expectScalars([]scalarCheck{
				{"flagged attempts", `SELECT count(*) FROM task_attempts WHERE usage_implausible`, c.wantFlagged},
				{"charged", `SELECT charged_micros FROM usage_records`, c.wantCharged},
				{"shortfall", `SELECT shortfall_micros FROM usage_records`, c.wantShortfall},
				{"spent", `SELECT spent_micros FROM budget_periods WHERE owner_id = 'acme'`, c.wantCharged},
			})
			page := e.do(http.MethodGet, "/metrics", "", nil, nil).body
			const counted = `tollgate_usage_implausible_total{provider_key="default"}`
			if c.wantFlagged == 0 {
				if bytes.Contains(page, []byte(counted)) {
					t.Errorf("%s is on the page for a plausible report", counted)
				}
			} else if n := metricValue(t, page, counted); int64(n) != c.wantFlagged {
				t.Errorf("%s = %v, want %d", counted, n, c.wantFlagged)
			}
			e.checkInvariants()
		})
	}
}

// "Unlimited" is the maximum total: a budget set to it through the API
// settles and alerts like any other. int64's maximum, which leaves no room
// for the arithmetic on it (an alert comparison would overflow a bigint),
// is a 400 naming the field, as is every total or top-up beyond the
// maximum, a top-up near int64's maximum included.
func TestBudgetTotalsAndTopupsAtTheEdges(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	admin := e.owner("ops", accounts.RoleAdmin, 0)
	key := e.owner("acme", accounts.RoleClient, 1000)
	cases := []struct {
		name       string
		method     string
		path, body string
		wantStatus int
		wantDetail string
	}{
		{"total of int64's maximum", http.MethodPut, "/v1/budgets/acme", `{"total_micros": 9223372036854775807}`, 400, "total_micros must be between 0 and 1000000000000000000"},
		{"total just beyond the maximum", http.MethodPut, "/v1/budgets/acme", `{"total_micros": 1000000000000000001}`, 400, "total_micros must be between"},
		{"workload total beyond the maximum", http.MethodPut, "/v1/budgets/acme", `{"total_micros": 5, "workloads": {"batch": {"total_micros": 9223372036854775807}}}`, 400, "workloads.batch.total_micros"},
		{"total beyond an int64", http.MethodPut, "/v1/budgets/acme", `{"total_micros": 99999999999999999999}`, 400, "total_micros must be between 0 and 1000000000000000000."},
		{"total a fraction", http.MethodPut, "/v1/budgets/acme", `{"total_micros": 0.5}`, 400, "total_micros must be a whole number between 0 and 1000000000000000000."},
		{"workload total beyond an int64", http.MethodPut, "/v1/budgets/acme", `{"total_micros": 5, "workloads": {"batch": {"total_micros": 9223372036854775808}}}`, 400, "workloads.batch.total_micros must be between 0 and 1000000000000000000."},
		{"top-up beyond an int64", http.MethodPost, "/v1/budgets/acme/topups", `{"amount_micros": 1e30}`, 400, "amount_micros must be between 1 and 1000000000000000000."},
		{"top-up of 0", http.MethodPost, "/v1/budgets/acme/topups", `{"amount_micros": 0}`, 400, "amount_micros must be between 1 and 1000000000000000000."},
		{"unlimited", http.MethodPut, "/v1/budgets/acme", fmt.Sprintf(`{"total_micros": %d}`, budget.Unlimited), 200, ""},
		{"top-up near int64's maximum", http.MethodPost, "/v1/budgets/acme/topups", `{"amount_micros": 9223372036854775800}`, 400, "amount_micros must be between 1 and 1000000000000000000"},
		{"top-up of an unlimited budget", http.MethodPost, "/v1/budgets/acme/topups", `{"amount_micros": 1}`, 400, "amount_micros would take the total above 1000000000000000000"},
	}
	for _, c := range cases {
		r := e.do(c.method, c.path, admin, []byte(c.body), nil)
		if r.status != c.wantStatus {
			t.Fatalf("%s: %d %s, want %d", c.name, r.status, r.body, c.wantStatus)
		}
		if c.wantDetail != "" {
			if code := r.problemCode(t); code != "invalid_request" {
				t.Errorf("%s: code %q, want invalid_request", c.name, code)
			}
			if d, _ := r.json(t)["detail"].(string); !strings.Contains(d, c.wantDetail) {
				t.Errorf("%s: detail %q, want it to contain %q", c.name, d, c.wantDetail)
			}
		}
	}
	// The unlimited budget settles, every task, on one call each.
	for i := range 3 {
		id := e.submit(key, fmt.Sprint("k", i), taskBody("abcdefgh", 100))
		if task := e.waitFinished(key, id); task.Status != "succeeded" {
			t.Fatalf("task %d on an unlimited budget: %s", i, task.Status)
		}
	}
	if n := e.fake.CallCount(); n != 3 {
		t.Errorf("provider called %d times for 3 tasks", n)
	}
	b := e.balance("acme")
	if b.TotalMicros != budget.Unlimited || b.ReservedMicros != 0 || b.SpentMicros != 3*38 {
		t.Errorf("balance %+v, want unlimited total, nothing reserved, 114 spent", b)
	}
	e.checkInvariants()
}

// A task that ends with a call still "sent" in its journal (its run died
// mid-call, and the provider may have billed it) is settled as possibly
// charged, never released as if nothing was spent: by the reaper past its
// deadline, and by a cancel; `budget verify` finds a task released after
// such a call.
func TestTaskEndingWithACallInFlightIsSettledAsPossiblyCharged(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		end  func(e *env, key, id string)
	}{
		{"reaped past its deadline", func(e *env, key, id string) {
			if _, err := e.pool.Exec(e.t.Context(), `UPDATE tasks SET deadline_at = now() - interval '1 hour' WHERE id = $1`, id); err != nil {
				e.t.Fatal(err)
			}
			if n, err := e.tasks.ReapOnce(e.t.Context()); err != nil || n != 1 {
				e.t.Fatalf("ReapOnce = %d, %v; want 1", n, err)
			}
		}},
		{"canceled", func(e *env, key, id string) {
			if r := e.do(http.MethodPost, "/v1/tasks/"+id+"/cancel", key, nil, nil); r.status != http.StatusOK {
				e.t.Fatalf("cancel: %d %s", r.status, r.body)
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, envOptions{noWorkers: true})
			key := e.owner("acme", accounts.RoleClient, 1_000_000)
			id := e.post(key, "a", taskBody("abcdefgh", 100), nil).task(t).ID
			// The journal entry a run on arrival commits before its call,
			// left "sent" by a process that died mid-call.
			if _, err := e.pool.Exec(t.Context(), `
				WITH a AS (INSERT INTO task_attempts (task_id, attempt, state, provider_key, idempotency_key, model)
				           VALUES ($1, 1, 'sent', 'default', $2, 'test-model'))
				UPDATE tasks SET attempts = 1 WHERE id = $1`, id, id+":1"); err != nil {
				t.Fatal(err)
			}
			c.end(e, key, id)
			e.expectScalars([]scalarCheck{
				{"settled, not released", `SELECT count(*) FROM budget_reservations WHERE task_id = '` + id + `' AND state = 'settled'`, 1},
				{"charged the reservation", `SELECT charged_micros FROM usage_records WHERE task_id = '` + id + `' AND source = 'possibly_charged'`, 206},
				{"spent", `SELECT spent_micros FROM budget_periods WHERE owner_id = 'acme'`, 206},
			})
			e.checkInvariants()
		})
	}
}

// An implausible report caps only its own part of the charge: the lie is
// charged at most the reservation, and each earlier ambiguous attempt is
// charged as it is on any success (its worst case, the reservation), the
// rest of the cost recorded as shortfall.
func TestImplausibleUsageAfterAnAmbiguousAttemptChargesBoth(t *testing.T) {
	t.Parallel()
	// taskBody("abcdefgh", 100) reserves (2+4)×1 + 100×2 = 206 micros.
	const reserved = 206
	e := newEnv(t, envOptions{maxAttempts: 3, requestTimeout: 300 * time.Millisecond})
	key := e.owner("acme", accounts.RoleClient, 1_000_000)
	e.fake.Script(fake.Scripted{Hang: true},
		openAIAnswer(`{"prompt_tokens":9223372036854775807,"completion_tokens":9223372036854775807}`))
	task := e.waitFinished(key, e.submit(key, "k", taskBody("abcdefgh", 100)))
	if task.Status != "succeeded" || task.Attempts != 2 {
		t.Fatalf("task %s after %d attempts, error %+v; want succeeded after 2", task.Status, task.Attempts, task.Error)
	}
	const cost = 3_000_000_000 + reserved // usage at the bound, plus the ambiguous call's worst case
	const charged = reserved + reserved   // the lie at most its reservation, plus the ambiguous call
	if task.Result.CostMicros != cost {
		t.Errorf("cost %d, want %d", task.Result.CostMicros, cost)
	}
	id := "'" + task.ID + "'"
	e.expectScalars([]scalarCheck{
		{"charged", `SELECT charged_micros FROM usage_records WHERE task_id = ` + id, charged},
		{"shortfall", `SELECT shortfall_micros FROM usage_records WHERE task_id = ` + id, cost - charged},
		{"labelled possibly_charged", `SELECT count(*) FROM usage_records WHERE task_id = ` + id + ` AND source = 'possibly_charged'`, 1},
		{"spent", `SELECT spent_micros FROM budget_periods WHERE owner_id = 'acme'`, charged},
		{"settled in the ledger", `SELECT sum(amount_micros) FROM budget_ledger WHERE task_id = ` + id + ` AND kind = 'settle'`, charged},
		{"flagged attempts", `SELECT count(*) FROM task_attempts WHERE task_id = ` + id + ` AND usage_implausible`, 1},
	})
	e.checkInvariants()
}
