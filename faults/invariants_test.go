//go:build faults

package faults

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// outcome is what a scenario hands to the invariant check: the provider's
// call log and the task ids clients were given.
type outcome struct {
	dbURL    string
	calls    []call
	accepted map[string]bool // task id -> accepted by a client
	// wantTasks, when >= 0, is the exact number of task rows expected.
	wantTasks int
}

// checkInvariants checks, in SQL, the invariants every scenario ends with
// and returns each violation found, described.
func checkInvariants(t *testing.T, o outcome) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := connect(ctx, o.dbURL)
	if err != nil {
		return []string{fmt.Sprintf("connect for the invariants: %v", err)}
	}
	defer conn.Close(context.Background())
	var v []string
	bad := func(format string, args ...any) { v = append(v, fmt.Sprintf(format, args...)) }

	// 1. Each accepted task is in exactly one final state, or still queued;
	// none was lost, none exists that no client was told of.
	type taskRow struct {
		id, status string
		finished   bool
		attempts   int
	}
	rows, err := conn.Query(ctx, `SELECT id::text, status, finished_at IS NOT NULL, attempts FROM tasks`)
	if err != nil {
		return append(v, fmt.Sprintf("read tasks: %v", err))
	}
	tasks, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (taskRow, error) {
		var tr taskRow
		return tr, r.Scan(&tr.id, &tr.status, &tr.finished, &tr.attempts)
	})
	if err != nil {
		return append(v, fmt.Sprintf("read tasks: %v", err))
	}
	byID := map[string]taskRow{}
	for _, tr := range tasks {
		byID[tr.id] = tr
		final := tr.status == "succeeded" || tr.status == "failed" || tr.status == "canceled"
		switch {
		case final && !tr.finished, !final && tr.finished:
			bad("task %s is %s with finished_at %v", tr.id, tr.status, tr.finished)
		case !final && tr.status != "queued":
			bad("task %s is left %s: neither final nor queued", tr.id, tr.status)
		}
		if o.accepted != nil && !o.accepted[tr.id] {
			bad("task %s exists but no client was given it (a duplicate)", tr.id)
		}
	}
	for id := range o.accepted {
		if _, ok := byID[id]; !ok {
			bad("task %s was accepted but is not in the database (lost)", id)
		}
	}
	if o.wantTasks >= 0 && len(tasks) != o.wantTasks {
		bad("%d tasks in the database, want %d", len(tasks), o.wantTasks)
	}

	// 2. Per task, the provider saw at most the calls the journal allows:
	// every call names a journal row, and no journal row was called twice.
	rows, err = conn.Query(ctx, `SELECT idempotency_key FROM task_attempts`)
	if err != nil {
		return append(v, fmt.Sprintf("read task_attempts: %v", err))
	}
	journal, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return append(v, fmt.Sprintf("read task_attempts: %v", err))
	}
	journaled := map[string]bool{}
	perTask := map[string]int{}
	for _, k := range journal {
		journaled[k] = true
		id, _, _ := strings.Cut(k, ":")
		perTask[id]++
	}
	seen := map[string]int{}
	callsPerTask := map[string]int{}
	for _, c := range o.calls {
		seen[c.IdempotencyKey]++
		id, _, _ := strings.Cut(c.IdempotencyKey, ":")
		callsPerTask[id]++
		if !journaled[c.IdempotencyKey] {
			bad("provider call with Idempotency-Key %q has no journal row", c.IdempotencyKey)
		}
	}
	for k, n := range seen {
		if n > 1 && journaled[k] {
			bad("attempt %s reached the provider %d times", k, n)
		}
	}
	for id, n := range callsPerTask {
		if n > perTask[id] {
			bad("task %s: %d provider calls, journal allows %d", id, n, perTask[id])
		}
	}

	// 3. No reservation held by a finished task; every unfinished one holds
	// its reservation.
	var heldByFinished, unheld int
	err = conn.QueryRow(ctx, `
		SELECT count(*) FILTER (WHERE t.status IN ('succeeded', 'failed', 'canceled') AND r.state = 'held'),
		       count(*) FILTER (WHERE t.status NOT IN ('succeeded', 'failed', 'canceled') AND r.state IS DISTINCT FROM 'held')
		FROM tasks t LEFT JOIN budget_reservations r ON r.task_id = t.id`).Scan(&heldByFinished, &unheld)
	if err != nil {
		return append(v, fmt.Sprintf("read reservations: %v", err))
	}
	if heldByFinished > 0 {
		bad("%d finished tasks still hold a reservation", heldByFinished)
	}
	if unheld > 0 {
		bad("%d unfinished tasks hold no reservation", unheld)
	}

	// 4. Ledger sums equal balances: the operator's own command.
	if out, err := cli(ctx, o.dbURL, "budget", "verify"); err != nil {
		bad("tollgate budget verify failed: %v", err)
	} else if !strings.HasPrefix(out, "ok") {
		bad("tollgate budget verify printed %q", out)
	}

	// 5. No balance above its cap.
	rows, err = conn.Query(ctx, `
		SELECT format('%s/%s period %s: reserved %s + spent %s > total %s', owner_id, workload, period_start::date,
		              reserved_micros, spent_micros, total_micros)
		FROM budget_periods WHERE reserved_micros + spent_micros > total_micros`)
	if err != nil {
		return append(v, fmt.Sprintf("read balances: %v", err))
	}
	over, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return append(v, fmt.Sprintf("read balances: %v", err))
	}
	v = append(v, over...)
	return v
}

// connect opens a connection, retrying for a while: after a PostgreSQL
// restart the server may still be starting.
func connect(ctx context.Context, dbURL string) (*pgx.Conn, error) {
	for {
		conn, err := pgx.Connect(ctx, dbURL)
		if err == nil {
			return conn, nil
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// taskCounts returns how many tasks are in each status.
func taskCounts(ctx context.Context, conn *pgx.Conn) (map[string]int, error) {
	rows, err := conn.Query(ctx, `SELECT status, count(*) FROM tasks GROUP BY status`)
	if err != nil {
		return nil, err
	}
	out := map[string]int{}
	defer rows.Close()
	for rows.Next() {
		var s string
		var n int
		if err := rows.Scan(&s, &n); err != nil {
			return nil, err
		}
		out[s] = n
	}
	return out, rows.Err()
}

// waitFinal waits until no task is queued or running, and returns the
// final counts by status.
func waitFinal(t *testing.T, dbURL string, timeout time.Duration) map[string]int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	conn, err := connect(ctx, dbURL)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer conn.Close(context.Background())
	var last map[string]int
	for {
		counts, err := taskCounts(ctx, conn)
		if err == nil {
			last = counts
			if counts["queued"]+counts["running"] == 0 {
				return counts
			}
		}
		select {
		case <-ctx.Done():
			t.Errorf("tasks not final after %s: %v", timeout, last)
			return last
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// finish checks the invariants, records the scenario's row and fails the
// test on any violation.
func finish(t *testing.T, r row, o outcome, started time.Time) {
	t.Helper()
	v := checkInvariants(t, o)
	for _, s := range v {
		t.Errorf("invariant violated: %s", s)
	}
	// Besides duplicate submissions, the journal prevents duplicate calls:
	// a task whose calls were ambiguous too often fails rather than call the
	// provider again.
	if refused, err := repeatsRefused(o.dbURL); err != nil {
		t.Errorf("count refused repeats: %v", err)
	} else if refused > 0 {
		r.notes = fmt.Sprintf("duplicates = %d submissions + %d provider repeats refused after ambiguous calls; %s", r.duplicates, refused, r.notes)
		r.duplicates += refused
	}
	r.violations, r.calls, r.elapsed = len(v), len(o.calls), time.Since(started)
	record(r)
	t.Logf("%s: %d tasks, %d provider calls, %d duplicates prevented, %d violations; %s",
		r.scenario, r.tasks, r.calls, r.duplicates, r.violations, r.notes)
}

// repeatsRefused counts tasks that failed as possibly executed: after an
// ambiguous call (and its one allowed repeat) the service stopped calling.
func repeatsRefused(dbURL string) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := connect(ctx, dbURL)
	if err != nil {
		return 0, err
	}
	defer conn.Close(context.Background())
	var n int
	err = conn.QueryRow(ctx, `SELECT count(*) FROM tasks WHERE status = 'failed' AND error->>'code' = 'possibly_executed'`).Scan(&n)
	return n, err
}
