package budget_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tollgate/tollgate/budget"
)

// ReleaseTx takes one to n tasks: each held reservation goes back to its
// balance rows, and a task that holds none is ErrNotFound without undoing
// the others or aborting the transaction.
func TestReleaseTxReleasesEveryTaskItIsGiven(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, store := limited(t,
		budget.Limit{OwnerID: "acme", Period: budget.PeriodNone, TotalMicros: 1_000},
		budget.Limit{OwnerID: "acme", Workload: "batch", Period: budget.PeriodDaily, TotalMicros: 500},
	)
	a, b, never := newID(t, pool), newID(t, pool), newID(t, pool)
	if err := reserveMany(ctx, pool, []budget.Reservation{
		{TaskID: a, OwnerID: "acme", Amount: 100, At: time.Now()},
		{TaskID: b, OwnerID: "acme", Workload: "batch", Amount: 200, At: time.Now()},
	}); err != nil {
		t.Fatal(err)
	}
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if err := budget.ReleaseTx(ctx, tx, a, never, b); !errors.Is(err, budget.ErrNotFound) {
			t.Errorf("ReleaseTx(a, never, b) = %v, want ErrNotFound", err)
		}
		_, err := tx.Exec(ctx, `SELECT 1`) // the transaction is still usable
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	list, err := store.Balances(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	for _, bal := range list {
		if bal.ReservedMicros != 0 {
			t.Errorf("%q still reserves %d, want 0", bal.Workload, bal.ReservedMicros)
		}
	}
	var released int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM budget_reservations WHERE state = 'released'`).Scan(&released); err != nil {
		t.Fatal(err)
	}
	if released != 2 {
		t.Errorf("%d reservations released, want 2", released)
	}
	mustVerify(t, store)
}
