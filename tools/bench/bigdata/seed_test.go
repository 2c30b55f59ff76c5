package bigdata

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tollgate/tollgate/budget"
	"github.com/tollgate/tollgate/internal/testdb"
	"github.com/tollgate/tollgate/replay"
	"github.com/tollgate/tollgate/tasks"
)

// TestSeed seeds a small history into a fresh database and checks it
// against the service's own rules: every constraint held (the inserts
// succeeded), the ledger explains every balance (budget.Verify), and the
// stored JSON decodes into the types the service reads it with.
func TestSeed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, _ := testdb.NewPool(t)
	end := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	s := Shape{Tasks: 3000, Ledger: 20_000, Owners: 7, Span: 90 * 24 * time.Hour, End: end, Batch: 700}
	rep, err := Seed(ctx, pool, s, io.Discard)
	if err != nil {
		t.Fatalf("Seed: %v", err)
	}

	if got := rep.Rows["tasks"]; got != s.Tasks {
		t.Errorf("tasks: got %d rows, want %d", got, s.Tasks)
	}
	if got, want := rep.Rows["owners"], int64(s.Owners); got != want {
		t.Errorf("owners: got %d rows, want %d", got, want)
	}
	if got := rep.Rows["budget_ledger"]; got < s.Ledger*95/100 || got > s.Ledger*105/100 {
		t.Errorf("budget_ledger: got %d rows, want about %d", got, s.Ledger)
	}
	if rep.Rows["task_attempts"] != rep.Rows["replay_records"] {
		t.Errorf("task_attempts %d rows, replay_records %d: want one record per attempt", rep.Rows["task_attempts"], rep.Rows["replay_records"])
	}

	mismatches, err := budget.NewStore(pool, nil).Verify(ctx)
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	if len(mismatches) > 0 {
		t.Errorf("Verify found %d mismatches, first %s", len(mismatches), mismatches[0])
	}

	// The Go mirror of the id names the same task as the SQL.
	first := spread(1, s.Tasks, s.Universe())
	var key string
	if err := pool.QueryRow(ctx, `SELECT idempotency_key FROM tasks WHERE id = $1`, TaskID(first)).Scan(&key); err != nil {
		t.Fatalf("task %d (id %s): %v", first, TaskID(first), err)
	}
	if want := IdempotencyKey(first); key != want {
		t.Errorf("task %d: idempotency key %q, want %q", first, key, want)
	}

	// Every task the tasks table holds has its money side when the ledger
	// covers the whole universe.
	var orphans int64
	err = pool.QueryRow(ctx, `SELECT count(*) FROM tasks t WHERE NOT EXISTS (SELECT 1 FROM budget_reservations r WHERE r.task_id = t.id)
		OR (t.status = 'succeeded') <> EXISTS (SELECT 1 FROM usage_records u WHERE u.task_id = t.id)`).Scan(&orphans)
	if err != nil {
		t.Fatal(err)
	}
	if orphans != 0 {
		t.Errorf("%d tasks without their reservation or usage", orphans)
	}

	// Stored JSON decodes as the service reads it.
	statuses := map[string]int{}
	rows, err := pool.Query(ctx, `SELECT request, result, error, status FROM tasks`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var req tasks.Request
		var res *tasks.Result
		var fail *tasks.Failure
		var status string
		if err := rows.Scan(&req, &res, &fail, &status); err != nil {
			t.Fatalf("scan task: %v", err)
		}
		statuses[status]++
		switch {
		case status == "succeeded" && (res == nil || res.Usage.InputTokens == 0 || res.CostMicros == 0):
			t.Errorf("succeeded task with result %+v", res)
		case status == "failed" && (fail == nil || fail.Class != "rejected"):
			t.Errorf("failed task with error %+v", fail)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	for _, st := range []string{"succeeded", "failed", "canceled"} {
		if statuses[st] == 0 {
			t.Errorf("no %s task among %v", st, statuses)
		}
	}

	var retried string
	if err := pool.QueryRow(ctx, `SELECT task_id::text FROM replay_records WHERE attempt = 2 AND state = 'succeeded' LIMIT 1`).Scan(&retried); err != nil {
		t.Fatalf("a retried task: %v", err)
	}
	attempts, err := replay.NewStore(pool).Attempts(ctx, retried)
	if err != nil {
		t.Fatalf("Attempts: %v", err)
	}
	type view struct {
		Outcome, Class string
		Status         int
		Content        bool
	}
	var got []view
	for _, a := range attempts {
		v := view{Outcome: a.Outcome, Content: a.Response != nil && a.Response.Content != ""}
		if a.Class != nil {
			v.Class = *a.Class
		}
		if a.ProviderStatus != nil {
			v.Status = *a.ProviderStatus
		}
		got = append(got, v)
	}
	want := []view{{Outcome: "failed", Class: "transient", Status: 503}, {Outcome: "succeeded", Content: true}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("attempts of a retried task mismatch (-want +got):\n%s", diff)
	}

	if _, err := Seed(ctx, pool, s, io.Discard); err == nil {
		t.Error("a second Seed into the same database succeeded, want an error")
	}
}
