package budget_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/tollgate/tollgate/budget"
	"github.com/tollgate/tollgate/internal/testdb"
)

func TestPriceCostRoundsUpToTheMicro(t *testing.T) {
	t.Parallel()
	cases := []struct {
		price   budget.Price
		in, out int64
		want    int64
	}{
		{budget.Price{InputPerMTok: 150_000, OutputPerMTok: 600_000}, 0, 0, 0},
		{budget.Price{InputPerMTok: 150_000, OutputPerMTok: 600_000}, 1, 0, 1},               // 0.15 micro rounds up
		{budget.Price{InputPerMTok: 150_000, OutputPerMTok: 600_000}, 1_000_000, 0, 150_000}, // exact
		{budget.Price{InputPerMTok: 150_000, OutputPerMTok: 600_000}, 10, 10, 8},             // 7.5 → 8
		{budget.Price{InputPerMTok: 1_000_000, OutputPerMTok: 2_000_000}, 6, 16, 38},
	}
	for _, c := range cases {
		if got := c.price.Cost(c.in, c.out); got != c.want {
			t.Errorf("%+v.Cost(%d, %d) = %d, want %d", c.price, c.in, c.out, got, c.want)
		}
	}
}

func TestParsePrices(t *testing.T) {
	t.Parallel()
	p, err := budget.ParsePrices(" a=1:2, b=3:4 ,")
	if err != nil {
		t.Fatal(err)
	}
	if got := p["b"]; len(p) != 2 || got != (budget.Price{InputPerMTok: 3, OutputPerMTok: 4}) {
		t.Errorf("ParsePrices = %+v", p)
	}
	for _, bad := range []string{"a", "a=1", "a=x:1", "a=-1:2", "=1:2", "a=1.5:2"} {
		if _, err := budget.ParsePrices(bad); err == nil {
			t.Errorf("ParsePrices(%q) = nil error, want one", bad)
		}
	}
}

// Reservations race on one owner: the conditional UPDATE lets exactly as
// many through as the total covers, and settle and release keep the ledger
// equal to the balances.
func TestReserveSettleReleaseUnderConcurrency(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, _ := testdb.NewPool(t)
	store := budget.NewStore(pool)
	if _, err := store.Set(ctx, "acme", 1000); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for range 40 {
		var id string
		if err := pool.QueryRow(ctx, `SELECT gen_random_uuid()::text`).Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var admitted []string
	for _, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
				return budget.ReserveTx(ctx, tx, budget.Reservation{TaskID: id, OwnerID: "acme", Amount: 100})
			})
			switch {
			case err == nil:
				mu.Lock()
				admitted = append(admitted, id)
				mu.Unlock()
			case !errors.Is(err, budget.ErrInsufficient):
				t.Errorf("reserve: %v", err)
			}
		}()
	}
	wg.Wait()
	if len(admitted) != 10 {
		t.Fatalf("admitted %d reservations of 100 against 1000, want 10", len(admitted))
	}
	// Settle half below the reservation, release the rest.
	for i, id := range admitted {
		err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			if i%2 == 0 {
				_, err := budget.SettleTx(ctx, tx, budget.Settlement{TaskID: id, Model: "m", InputTokens: 1, OutputTokens: 1, Source: budget.SourceReported, CostMicros: 30})
				return err
			}
			return budget.ReleaseTx(ctx, tx, id)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	b, err := store.Get(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	if b.ReservedMicros != 0 || b.SpentMicros != 150 {
		t.Errorf("budget = %+v, want reserved 0, spent 150", b)
	}
	// Closing twice is refused, not double-counted.
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return budget.ReleaseTx(ctx, tx, admitted[0]) })
	if !errors.Is(err, budget.ErrNotFound) {
		t.Errorf("second close: %v, want ErrNotFound", err)
	}
	var ledgerReserved, ledgerSpent int64
	err = pool.QueryRow(ctx, `
		SELECT COALESCE(sum(CASE kind WHEN 'reserve' THEN amount_micros WHEN 'release' THEN -amount_micros END), 0),
		       COALESCE(sum(amount_micros) FILTER (WHERE kind = 'spend'), 0)
		FROM budget_ledger WHERE owner_id = 'acme'`).Scan(&ledgerReserved, &ledgerSpent)
	if err != nil {
		t.Fatal(err)
	}
	if ledgerReserved != b.ReservedMicros || ledgerSpent != b.SpentMicros {
		t.Errorf("ledger reserved=%d spent=%d, budget %d %d", ledgerReserved, ledgerSpent, b.ReservedMicros, b.SpentMicros)
	}
	if _, err := pool.Exec(ctx, `DELETE FROM budget_ledger`); err == nil {
		t.Error("deleting ledger rows succeeded; the ledger must be append-only")
	}
}

func TestSetRefusesATotalBelowWhatIsCommitted(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, _ := testdb.NewPool(t)
	store := budget.NewStore(pool)
	if _, err := store.Set(ctx, "acme", 1000); err != nil {
		t.Fatal(err)
	}
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		return budget.ReserveTx(ctx, tx, budget.Reservation{TaskID: "00000000-0000-4000-8000-000000000001", OwnerID: "acme", Amount: 600})
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.Set(ctx, "acme", 500); !errors.Is(err, budget.ErrBelowCommitted) {
		t.Errorf("Set below reserved: %v, want ErrBelowCommitted", err)
	}
	if _, err := store.Set(ctx, "bad owner!", 5); !errors.Is(err, budget.ErrInvalid) {
		t.Errorf("Set with a bad owner: %v, want ErrInvalid", err)
	}
	if _, err := store.Set(ctx, "acme", -1); !errors.Is(err, budget.ErrInvalid) {
		t.Errorf("Set negative: %v, want ErrInvalid", err)
	}
}
