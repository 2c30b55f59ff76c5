package pgstats_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/tollgate/tollgate/internal/pgstats"
	"github.com/tollgate/tollgate/internal/testdb"
)

// The window AnalyzeNew closes: the idempotency lookup, prepared while
// tasks is empty, keeps a generic plan that walks the owner's tasks; once
// the table holds data, AnalyzeNew analyzes it and the same prepared
// statement is re-planned onto the unique key. Without the ANALYZE the
// second EXPLAIN shows the first plan still.
func TestAnalyzeNewReplansTheIdempotencyLookup(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, _ := testdb.NewPool(t)
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	// A generic plan at once, as pgx's statement cache gets one after a
	// few executions.
	for _, sql := range []string{
		`SET plan_cache_mode = force_generic_plan`,
		`PREPARE lookup(text, text) AS SELECT id FROM tasks WHERE owner_id = $1 AND idempotency_key = $2`,
	} {
		if _, err := conn.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	plan := func() string {
		t.Helper()
		rows, err := conn.Query(ctx, `EXPLAIN EXECUTE lookup('o', 'k')`)
		if err != nil {
			t.Fatal(err)
		}
		lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		return strings.Join(lines, "\n")
	}
	if got := plan(); !strings.Contains(got, "tasks_owner_created") {
		t.Fatalf("planned on the empty table, the lookup no longer walks the owner's tasks, so this test shows nothing; plan:\n%s", got)
	}

	if _, err := pool.Exec(ctx, `
		INSERT INTO owners (id) VALUES ('o');
		INSERT INTO tasks (owner_id, idempotency_key, request_hash, request, model, deadline_at)
		SELECT 'o', 'key-' || i, sha256(i::text::bytea), jsonb_build_object('pad', repeat('x', 200)), 'm', now() + interval '1 hour'
		FROM generate_series(1, 5000) AS i`); err != nil {
		t.Fatal(err)
	}
	// Below the threshold nothing is analyzed.
	if got, err := pgstats.AnalyzeNew(ctx, pool, 1<<40, nil); err != nil || len(got) != 0 {
		t.Fatalf("AnalyzeNew with a threshold no table reaches = %v, %v; want none", got, err)
	}
	if got := plan(); !strings.Contains(got, "tasks_owner_created") {
		t.Fatalf("the cached plan changed without an ANALYZE:\n%s", got)
	}
	// A table in skip is left alone.
	if got, err := pgstats.AnalyzeNew(ctx, pool, pgstats.DefaultMinBytes, map[string]bool{"tasks": true}); err != nil || slices.Contains(got, "tasks") {
		t.Fatalf("AnalyzeNew skipping tasks = %v, %v; want tasks left alone", got, err)
	}

	got, err := pgstats.AnalyzeNew(ctx, pool, pgstats.DefaultMinBytes, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(got, "tasks") {
		t.Fatalf("AnalyzeNew analyzed %v, want tasks among them", got)
	}
	if p := plan(); !strings.Contains(p, "tasks_owner_idempotency_key") {
		t.Errorf("after the ANALYZE the lookup should probe the unique key; plan:\n%s", p)
	}
	// Analyzed once: nothing more to do.
	if again, err := pgstats.AnalyzeNew(ctx, pool, pgstats.DefaultMinBytes, nil); err != nil || len(again) != 0 {
		t.Errorf("second AnalyzeNew = %v, %v; want nothing left", again, err)
	}
}
