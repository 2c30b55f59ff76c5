//go:build faults

package faults

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/tollgate/tollgate/accounts"
	"github.com/tollgate/tollgate/budget"
	"github.com/tollgate/tollgate/catalog"
	"github.com/tollgate/tollgate/internal/testclock"
	"github.com/tollgate/tollgate/internal/testdb"
	"github.com/tollgate/tollgate/provider/fake"
	"github.com/tollgate/tollgate/replay"
	"github.com/tollgate/tollgate/seal"
	"github.com/tollgate/tollgate/server"
	"github.com/tollgate/tollgate/tasks"
)

// clockCatalog prices clock-model at 1 micro per input token and 2 per
// output token, so that reservations are small whole numbers.
const clockCatalog = `
providers:
  - {key: default, kind: openai, base_url: fake}
default_model: clock-model
models:
  - {name: clock-model, provider: default, input_micros_per_mtok: 1000000, output_micros_per_mtok: 2000000}
`

// TestClockJumpAcrossPeriod moves the service's clock across a budget
// period boundary (the last day of a month, so daily and monthly budgets
// both roll over), forwards and then backwards, while reservations are
// held. The binary has no clock to inject, so the service runs in-process:
// the tasks, budget and server packages wired as cmd/tollgate wires them,
// with the test's clock, against a real database and the fake provider.
//
// Money reserved in a period must be settled in that period even when the
// task finishes in the next; the next period must open with its whole cap;
// and a clock that steps back must not reopen money already reserved.
func TestClockJumpAcrossPeriod(t *testing.T) {
	started := time.Now()
	pool, dbURL := testdb.NewPool(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	fp := fake.New()
	fakeSrv := httptest.NewServer(fp)
	t.Cleanup(func() { fp.Close(); fakeSrv.Close() })
	cat, err := catalog.Parse([]byte(clockCatalog), func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	clients, err := cat.Clients(fakeSrv.Client(), fakeSrv.URL)
	if err != nil {
		t.Fatal(err)
	}
	key, _ := base64.StdEncoding.DecodeString(dataKey)
	sealer, err := seal.New(key)
	if err != nil {
		t.Fatal(err)
	}
	clk := &testclock.Clock{}
	svc, err := tasks.New(pool, tasks.Config{
		Catalog: cat, Clients: clients, Sealer: sealer, Now: clk.Now,
		RequestTimeout: 5 * time.Second, RetryBase: 10 * time.Millisecond, RetryMax: 50 * time.Millisecond,
		FetchCooldown: 5 * time.Millisecond, FetchPoll: 50 * time.Millisecond, BuildVersion: "faults",
	})
	if err != nil {
		t.Fatal(err)
	}
	budgets := budget.NewStore(pool, clk.Now)
	srv := httptest.NewServer(server.New(server.Deps{
		Pool: pool, Tasks: svc, Accounts: accounts.NewStore(pool), Budgets: budgets, Replays: replay.NewStore(pool),
	}))
	t.Cleanup(srv.Close)
	pick := func() string { return srv.URL }

	lastDay := time.Date(2026, 3, 31, 23, 59, 59, 900_000_000, time.UTC)
	nextDay := time.Date(2026, 4, 1, 0, 0, 0, 100_000_000, time.UTC)
	clk.Set(lastDay)

	const capMicros = 200
	owners := []struct {
		name   string
		period budget.Period
		starts [2]time.Time // the period containing lastDay, then nextDay
	}{
		{"clock-daily", budget.PeriodDaily, [2]time.Time{time.Date(2026, 3, 31, 0, 0, 0, 0, time.UTC), time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC)}},
		{"clock-monthly", budget.PeriodMonthly, [2]time.Time{time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC)}},
	}
	apiKeys := map[string]string{}
	for _, o := range owners {
		if _, err := budgets.SetLimit(ctx, budget.Limit{OwnerID: o.name, Period: o.period, TotalMicros: capMicros, Actor: "faults"}); err != nil {
			t.Fatal(err)
		}
		k, err := accounts.NewStore(pool).CreateKey(ctx, o.name, accounts.RoleClient, "")
		if err != nil {
			t.Fatal(err)
		}
		apiKeys[o.name] = k
	}

	var stats clientStats
	accepted := map[string]bool{}
	phaseOf := map[string]int{} // task id -> 0 (last day) or 1 (next day)
	n := 0
	// fill submits for the owner until the budget refuses, and returns how
	// many tasks it accepted.
	fill := func(owner string, phase int) int {
		t.Helper()
		for got := 0; ; got++ {
			n++
			s, err := submit(ctx, pick, apiKeys[owner], fmt.Sprintf("clock-%04d", n), modelTaskBody("clock-model", 1000+n, "clock"), &stats)
			if err != nil {
				t.Fatal(err)
			}
			if s.taskID == "" {
				if s.status != 402 || s.code != "budget_exceeded" {
					t.Fatalf("%s: status %d %s, want a task or 402 budget_exceeded", owner, s.status, s.code)
				}
				return got
			}
			accepted[s.taskID] = true
			phaseOf[s.taskID] = phase
			if got > 1000 {
				t.Fatalf("%s: the budget never refused", owner)
			}
		}
	}

	// Workers are not started yet: every reservation stays held across
	// the jumps.
	filled := map[string][2]int{}
	for _, o := range owners {
		filled[o.name] = [2]int{fill(o.name, 0), 0}
	}
	clk.Set(nextDay) // forward across midnight and the month's end
	for _, o := range owners {
		f := filled[o.name]
		f[1] = fill(o.name, 1)
		filled[o.name] = f
		if f[0] < 2 || f[1] != f[0] {
			t.Errorf("%s: %d tasks fit before midnight and %d after, want the same (at least 2): the new period must open with the whole cap", o.name, f[0], f[1])
		}
	}
	clk.Set(lastDay.Add(50 * time.Millisecond)) // the clock steps back
	refusedAfterBack := 0
	for _, o := range owners {
		if got := fill(o.name, 0); got != 0 {
			t.Errorf("%s: %d tasks accepted after the clock stepped back into a spent period, want 0", o.name, got)
		}
		refusedAfterBack++
	}

	// The clock moves forward again; only now do the tasks run and settle,
	// all of them after midnight.
	clk.Set(nextDay.Add(2 * time.Second))
	workCtx, stopWork := context.WithCancel(context.Background())
	if err := svc.Start(workCtx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer scancel()
		_ = svc.Stop(sctx)
		stopWork()
	})
	counts := waitFinal(t, dbURL, time.Minute)

	// Each task's money moved in the period it was reserved in, and that is
	// the period its submission's clock named.
	rows, err := pool.Query(ctx, `
		SELECT r.task_id::text, t.owner_id, p.period_start, COALESCE(s.budget_period_id = r.budget_period_id, false)
		FROM budget_ledger r
		JOIN tasks t ON t.id = r.task_id
		JOIN budget_periods p ON p.id = r.budget_period_id
		LEFT JOIN budget_ledger s ON s.task_id = r.task_id AND s.kind = 'settle'
		WHERE r.kind = 'reserve'`)
	if err != nil {
		t.Fatal(err)
	}
	startOf := map[string][2]time.Time{}
	for _, o := range owners {
		startOf[o.name] = o.starts
	}
	checked := 0
	for rows.Next() {
		var id, owner string
		var start time.Time
		var samePeriod bool
		if err := rows.Scan(&id, &owner, &start, &samePeriod); err != nil {
			t.Fatal(err)
		}
		checked++
		if want := startOf[owner][phaseOf[id]]; !start.Equal(want) {
			t.Errorf("task %s of %s reserved in the period starting %s, want %s", id, owner, start, want)
		}
		if !samePeriod {
			t.Errorf("task %s of %s was not settled in the period it reserved in", id, owner)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if checked != len(accepted) {
		t.Errorf("%d reservations in the ledger, want %d", checked, len(accepted))
	}

	var calls []call
	for _, c := range fp.Calls() {
		calls = append(calls, call{ReceivedAt: c.ReceivedAt, Model: c.Model, IdempotencyKey: c.IdempotencyKey})
	}
	finish(t, row{
		scenario: "5 clock jumps across a period",
		tasks:    len(accepted),
		notes: fmt.Sprintf("cap %d micros; tasks before/after midnight: daily %v, monthly %v; %d submissions refused after the clock stepped back; all settled after midnight in the period they reserved in; final %v",
			capMicros, filled["clock-daily"], filled["clock-monthly"], refusedAfterBack, counts),
	}, outcome{dbURL: dbURL, calls: calls, accepted: accepted, wantTasks: len(accepted)}, started)
}
