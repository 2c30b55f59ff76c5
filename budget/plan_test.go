package budget_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tollgate/tollgate/budget"
	"github.com/tollgate/tollgate/internal/testdb"
)

// TestClosingAReservationFindsItByPrimaryKey: a settlement, alone or in a
// batch, finds its reservation through the primary key whatever the
// statistics say. Here they were taken while nothing was held, and then
// 1,000 reservations are held: a statement that says state = 'held' lets
// the planner walk a partial index on held reservations (every one of
// them) to settle one, and this test fails.
func TestClosingAReservationFindsItByPrimaryKey(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, _ := testdb.NewPool(t)
	store := budget.NewStore(pool, nil)
	if _, err := store.Set(ctx, "planco", 1_000_000_000); err != nil {
		t.Fatal(err)
	}
	first := newID(t, pool)
	if err := reserve(ctx, pool, budget.Reservation{TaskID: first, OwnerID: "planco", Amount: 10, At: time.Now()}); err != nil {
		t.Fatal(err)
	}
	// 2,000 more, all closed, then statistics; then 1,000 held again
	// behind the statistics' back.
	for _, sql := range []string{
		`INSERT INTO budget_reservations (task_id, owner_id, amount_micros, estimated, state, closed_at, budget_period_ids)
		 SELECT gen_random_uuid(), 'planco', 10, false, 'settled', now(), r.budget_period_ids
		 FROM budget_reservations r, generate_series(1, 2000) WHERE r.task_id = '` + first + `'`,
		`UPDATE budget_reservations SET state = 'settled', closed_at = now() WHERE task_id = '` + first + `'`,
		`ANALYZE budget_reservations`,
		`UPDATE budget_reservations SET state = 'held', closed_at = NULL
		 WHERE task_id IN (SELECT task_id FROM budget_reservations ORDER BY task_id LIMIT 1000)`,
	} {
		if _, err := pool.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	var held []string
	rows, err := pool.Query(ctx, `SELECT task_id::text FROM budget_reservations WHERE closed_at IS NULL ORDER BY task_id LIMIT 2`)
	if err != nil {
		t.Fatal(err)
	}
	if held, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil || len(held) != 2 {
		t.Fatalf("held reservations: %v %v", held, err)
	}
	settlement := func(id string) budget.Settlement {
		return budget.Settlement{TaskID: id, Model: "m", InputTokens: 1, OutputTokens: 1, Source: budget.SourceReported, CostMicros: 5}
	}
	one, many := &pgx.Batch{}, &pgx.Batch{}
	var out [3]budget.Settled
	var single, set budget.Settlements
	if err := single.Add(settlement(held[0]), &out[0]); err != nil {
		t.Fatal(err)
	}
	single.Queue(one, nil)
	for i, id := range held {
		if err := set.Add(settlement(id), &out[1+i]); err != nil {
			t.Fatal(err)
		}
	}
	set.Queue(many, nil)
	for name, b := range map[string]*pgx.Batch{"one settlement": one, "a batch of settlements": many} {
		q := b.QueuedQueries[0]
		var plan []byte
		if err := pool.QueryRow(ctx, `EXPLAIN (FORMAT JSON) `+q.SQL, q.Arguments...).Scan(&plan); err != nil {
			t.Fatalf("%s: explain: %v", name, err)
		}
		indexes := planIndexes(t, plan)
		if !indexes["budget_reservations_pkey"] {
			t.Errorf("%s: the plan does not use budget_reservations_pkey; indexes used: %v", name, indexes)
		}
		for ix := range indexes {
			if strings.HasPrefix(ix, "budget_reservations_held") {
				t.Errorf("%s: the plan walks %s, every held reservation, to find one", name, ix)
			}
		}
	}
}

// planIndexes returns the index names of an EXPLAIN (FORMAT JSON) plan.
func planIndexes(t *testing.T, plan []byte) map[string]bool {
	t.Helper()
	var doc []map[string]any
	if err := json.Unmarshal(plan, &doc); err != nil {
		t.Fatal(err)
	}
	found := map[string]bool{}
	var walk func(n map[string]any)
	walk = func(n map[string]any) {
		if ix, ok := n["Index Name"].(string); ok {
			found[ix] = true
		}
		subs, _ := n["Plans"].([]any)
		for _, s := range subs {
			if m, ok := s.(map[string]any); ok {
				walk(m)
			}
		}
	}
	for _, d := range doc {
		if p, ok := d["Plan"].(map[string]any); ok {
			walk(p)
		}
	}
	return found
}
