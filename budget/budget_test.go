package budget_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tollgate/tollgate/budget"
	"github.com/tollgate/tollgate/internal/eventually"
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

// TOLLGATE_PRICES may not price a model twice, also when the names differ
// only by the space around them (it trims them).
func TestParsePricesRefusesAModelTwice(t *testing.T) {
	t.Parallel()
	for _, spec := range []string{"a=1:2,a=3:4", "a=1:2, a =3:4", "b=1:1,a=1:2,b=1:1"} {
		_, err := budget.ParsePrices(spec)
		if err == nil || !strings.Contains(err.Error(), "is priced twice") {
			t.Errorf("ParsePrices(%q) = %v, want a refusal naming the model priced twice", spec, err)
		}
	}
}

func TestFormatMicros(t *testing.T) {
	t.Parallel()
	for in, want := range map[int64]string{0: "0.000000", 38: "0.000038", 1_500_000: "1.500000", -2: "-0.000002", 12_345_678_901: "12345.678901",
		math.MinInt64: "-9223372036854.775808", math.MaxInt64: "9223372036854.775807"} {
		if got := budget.FormatMicros(in); got != want {
			t.Errorf("FormatMicros(%d) = %q, want %q", in, got, want)
		}
	}
}

func TestPeriodBoundsAreUTCCalendarPeriods(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 30, 23, 59, 59, 0, time.FixedZone("UTC-5", -5*3600)) // 04:59:59 UTC on Dec 1
	cases := []struct {
		p          budget.Period
		start, end string
	}{
		{budget.PeriodDaily, "2026-12-01T00:00:00Z", "2026-12-02T00:00:00Z"},
		{budget.PeriodMonthly, "2026-12-01T00:00:00Z", "2027-01-01T00:00:00Z"},
		{budget.PeriodNone, "1970-01-01T00:00:00Z", ""},
	}
	for _, c := range cases {
		start, end := c.p.Bounds(at)
		gotEnd := ""
		if end != nil {
			gotEnd = end.Format(time.RFC3339)
		}
		if start.Format(time.RFC3339) != c.start || gotEnd != c.end {
			t.Errorf("%s: [%s, %s), want [%s, %s)", c.p, start.Format(time.RFC3339), gotEnd, c.start, c.end)
		}
	}
}

func newID(t *testing.T, pool *pgxpool.Pool) string {
	t.Helper()
	var id string
	if err := pool.QueryRow(context.Background(), `SELECT gen_random_uuid()::text`).Scan(&id); err != nil {
		t.Fatal(err)
	}
	return id
}

// reserve reserves r in a transaction of its own, as a lone admission
// does: the period opener, then the reservation.
func reserve(ctx context.Context, pool *pgxpool.Pool, r budget.Reservation) error {
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return reserveTx(ctx, tx, r) })
}

// reserveTx reserves r in tx: the period opener reads the balance rows r
// holds and opens their periods if needed, then the reservation.
func reserveTx(ctx context.Context, tx pgx.Tx, r budget.Reservation) error {
	rows, b := &budget.BalanceRows{}, &pgx.Batch{}
	budget.QueueBalanceRows(b, r.OwnerID, r.Workload, r.At, rows)
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return err
	}
	if err := rows.Open(ctx, tx); err != nil {
		return err
	}
	b = &pgx.Batch{}
	budget.QueueReserve(b, r)
	return tx.SendBatch(ctx, b).Close()
}

// queueReserve runs QueueReserve's one statement in a transaction of its
// own.
func queueReserve(ctx context.Context, pool *pgxpool.Pool, r budget.Reservation) error {
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		b := &pgx.Batch{}
		budget.QueueReserve(b, r)
		return tx.SendBatch(ctx, b).Close()
	})
}

// reserveInOne reserves as a batch of admissions does: QueueReserve's one
// statement, and reserve (with the period opener) in a new transaction
// when it finds a period not opened yet.
func reserveInOne(ctx context.Context, pool *pgxpool.Pool, r budget.Reservation) error {
	err := queueReserve(ctx, pool, r)
	if errors.Is(err, budget.ErrPeriodNotOpen) {
		return reserve(ctx, pool, r)
	}
	return err
}

// limited is a budget store on a fresh database with limits set.
func limited(t *testing.T, limits ...budget.Limit) (*pgxpool.Pool, *budget.Store) {
	t.Helper()
	pool, _ := testdb.NewPool(t)
	store := budget.NewStore(pool, nil)
	setLimits(t, store, limits...)
	return pool, store
}

// setLimits sets each limit, failing the test on the first error.
func setLimits(t *testing.T, store *budget.Store, limits ...budget.Limit) {
	t.Helper()
	for _, l := range limits {
		if _, err := store.SetLimit(context.Background(), l); err != nil {
			t.Fatal(err)
		}
	}
}

func mustVerify(t *testing.T, store *budget.Store) {
	t.Helper()
	mm, err := store.Verify(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range mm {
		t.Errorf("verify: %s", m)
	}
}

// 200 reservations race across two workloads of one owner whose caps bind
// at different points: each workload admits exactly what its cap covers
// until the owner cap binds, and nothing ever exceeds either.
func TestConcurrentReservationsRespectOwnerAndWorkloadCaps(t *testing.T) {
	t.Parallel()
	for name, reserve := range map[string]func(context.Context, *pgxpool.Pool, budget.Reservation) error{
		"opener first": reserve, "in one statement": reserveInOne,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			testConcurrentReservations(t, reserve)
		})
	}
}

func testConcurrentReservations(t *testing.T, reserve func(context.Context, *pgxpool.Pool, budget.Reservation) error) {
	ctx := context.Background()
	pool, store := limited(t,
		budget.Limit{OwnerID: "acme", Period: budget.PeriodNone, TotalMicros: 10_000},                   // 100 reservations of 100
		budget.Limit{OwnerID: "acme", Workload: "batch", Period: budget.PeriodNone, TotalMicros: 3_000}, // 30
		budget.Limit{OwnerID: "acme", Workload: "chat", Period: budget.PeriodNone, TotalMicros: 8_000},  // 80, but the owner binds first
	)
	var mu sync.Mutex
	admitted := map[string]int{}
	var wg sync.WaitGroup
	for i := range 200 {
		workload := []string{"batch", "chat"}[i%2]
		id := newID(t, pool)
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := reserve(ctx, pool, budget.Reservation{TaskID: id, OwnerID: "acme", Workload: workload, Amount: 100, At: time.Now()})
			switch {
			case err == nil:
				mu.Lock()
				admitted[workload]++
				mu.Unlock()
			case !errors.Is(err, budget.ErrInsufficient):
				t.Errorf("reserve: %v", err)
			}
		}()
	}
	wg.Wait()
	// batch: 100 tries against a cap of 30. chat: 100 tries against its cap
	// of 80, but the owner's 100 minus batch's 30 leaves 70.
	if admitted["batch"] != 30 || admitted["chat"] != 70 {
		t.Fatalf("admitted %v, want batch 30 and chat 70", admitted)
	}
	list, err := store.Balances(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range list {
		if b.ReservedMicros+b.SpentMicros > b.TotalMicros {
			t.Errorf("%q over its cap: %+v", b.Workload, b)
		}
	}
	mustVerify(t, store)
}

// QueueReserve finds its balance rows itself and tells apart what the
// caller must handle: a period not opened yet (the caller opens it with
// BalanceRows first), no budget, a budget short of the amount; and
// a reservation it makes holds both of a capped workload's rows.
func TestQueueReserveAnswers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, store := limited(t,
		budget.Limit{OwnerID: "acme", Period: budget.PeriodNone, TotalMicros: 1_000},
		budget.Limit{OwnerID: "acme", Workload: "batch", Period: budget.PeriodDaily, TotalMicros: 300},
	)
	now := time.Now()
	cases := []struct {
		name string
		r    budget.Reservation
		want error
	}{
		{"owner only", budget.Reservation{OwnerID: "acme", Amount: 100, At: now}, nil},
		{"workload in its open period", budget.Reservation{OwnerID: "acme", Workload: "batch", Amount: 200, At: now}, nil},
		{"workload short", budget.Reservation{OwnerID: "acme", Workload: "batch", Amount: 101, At: now}, budget.ErrInsufficient},
		{"owner short", budget.Reservation{OwnerID: "acme", Amount: 701, At: now}, budget.ErrInsufficient},
		{"no budget", budget.Reservation{OwnerID: "nobody", Amount: 1, At: now}, budget.ErrInsufficient},
		{"tomorrow's period not opened", budget.Reservation{OwnerID: "acme", Workload: "batch", Amount: 1, At: now.Add(24 * time.Hour)}, budget.ErrPeriodNotOpen},
	}
	for _, c := range cases {
		c.r.TaskID = newID(t, pool)
		if err := queueReserve(ctx, pool, c.r); !errors.Is(err, c.want) || (c.want == nil && err != nil) {
			t.Errorf("%s: err = %v, want %v", c.name, err, c.want)
		}
	}
	var reserved int64
	if err := pool.QueryRow(ctx, `SELECT sum(reserved_micros) FROM budget_periods WHERE owner_id = 'acme'`).Scan(&reserved); err != nil {
		t.Fatal(err)
	}
	// 100 on the owner; 200 on the owner and 200 on batch.
	if reserved != 500 {
		t.Errorf("reserved = %d over the owner's rows, want 500", reserved)
	}
	mustVerify(t, store)
}

// Transactions that each reserve for two workloads, in opposite orders,
// with the workloads' rows older (lower ids) than the owner's: locking each
// statement's rows in id order alone would deadlock them (one holds a
// workload's row and waits for the owner's, the other the reverse); the
// owner's row first never does.
func TestReservationsAcrossWorkloadsDoNotDeadlock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, store := limited(t,
		budget.Limit{OwnerID: "acme", Workload: "a", Period: budget.PeriodNone, TotalMicros: 1_000_000},
		budget.Limit{OwnerID: "acme", Workload: "b", Period: budget.PeriodNone, TotalMicros: 1_000_000},
		budget.Limit{OwnerID: "acme", Period: budget.PeriodNone, TotalMicros: 1_000_000},
	)
	var ownerRowFirst bool
	if err := pool.QueryRow(ctx, `SELECT min(id) FILTER (WHERE workload = '') < min(id) FILTER (WHERE workload <> '') FROM budget_periods`).Scan(&ownerRowFirst); err != nil {
		t.Fatal(err)
	}
	if ownerRowFirst {
		t.Fatal("the owner's row has the lowest id: this test needs it last")
	}
	const txs = 40
	errs := make(chan error, txs)
	var wg sync.WaitGroup
	for i := range txs {
		ids := []string{newID(t, pool), newID(t, pool)}
		order := []string{"a", "b"}
		if i%2 == 1 {
			order = []string{"b", "a"}
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
				b := &pgx.Batch{}
				for j, w := range order {
					budget.QueueReserve(b, budget.Reservation{TaskID: ids[j], OwnerID: "acme", Workload: w, Amount: 1, At: time.Now()})
				}
				return tx.SendBatch(ctx, b).Close()
			})
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("reserve: %v", err)
		}
	}
	mustVerify(t, store)
}

func TestSettleAndReleaseKeepTheLedgerExact(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, _ := testdb.NewPool(t)
	store := budget.NewStore(pool, nil)
	if _, err := store.Set(ctx, "acme", 1000); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for range 6 {
		id := newID(t, pool)
		if err := reserve(ctx, pool, budget.Reservation{TaskID: id, OwnerID: "acme", Amount: 100, At: time.Now()}); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	for i, id := range ids {
		err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			if i%2 == 0 {
				_, err := budget.SettleTx(ctx, tx, budget.Settlement{TaskID: id, Model: "m", InputTokens: 1, OutputTokens: 1, Source: budget.SourceReported, CostMicros: 30}, nil)
				return err
			}
			return budget.ReleaseTx(ctx, tx, id)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	b, _ := store.Balances(ctx, "acme")
	if b[0].ReservedMicros != 0 || b[0].SpentMicros != 90 {
		t.Errorf("balance = %+v, want reserved 0, spent 90", b[0])
	}
	// Closing twice is refused, not double-counted.
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return budget.ReleaseTx(ctx, tx, ids[0]) })
	if !errors.Is(err, budget.ErrNotFound) {
		t.Errorf("second close: %v, want ErrNotFound", err)
	}
	mustVerify(t, store)
	if _, err := pool.Exec(ctx, `DELETE FROM budget_ledger`); err == nil {
		t.Error("deleting ledger rows succeeded; the ledger must be append-only")
	}
}

// A reservation locks its balance row KEY SHARE (its ledger row's foreign
// key) before it updates it. A settlement of the same owner meanwhile must
// not queue behind that lock while holding the row's tuple lock, or the
// reservation's UPDATE deadlocks with it (seen under load: 500s on POST).
func TestSettleDoesNotDeadlockWithAReservationInProgress(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, _ := testdb.NewPool(t)
	store := budget.NewStore(pool, nil)
	if _, err := store.Set(ctx, "acme", 1000); err != nil {
		t.Fatal(err)
	}
	settled := newID(t, pool)
	if err := reserve(ctx, pool, budget.Reservation{TaskID: settled, OwnerID: "acme", Amount: 100, At: time.Now()}); err != nil {
		t.Fatal(err)
	}
	var period int64
	if err := pool.QueryRow(ctx, `SELECT id FROM budget_periods WHERE owner_id = 'acme'`).Scan(&period); err != nil {
		t.Fatal(err)
	}
	// The reservation in progress: the lock its ledger insert takes.
	reservation, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer reservation.Rollback(ctx)
	if _, err := reservation.Exec(ctx, `SELECT 1 FROM budget_periods WHERE id = $1 FOR KEY SHARE`, period); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		done <- pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			_, err := budget.SettleTx(ctx, tx, budget.Settlement{TaskID: settled, Model: "m", InputTokens: 1, OutputTokens: 1,
				Source: budget.SourceReported, CostMicros: 30}, nil)
			return err
		})
	}()
	var settleErr error
	eventually.Wait(t, "the settlement to commit while a reservation holds its foreign-key lock", func() bool {
		select {
		case settleErr = <-done:
			return true
		default:
			return false
		}
	})
	if settleErr != nil {
		t.Fatalf("settle: %v", settleErr)
	}
	if _, err := reservation.Exec(ctx, `UPDATE budget_periods SET reserved_micros = reserved_micros + 100 WHERE id = $1`, period); err != nil {
		t.Fatalf("the reservation's UPDATE: %v", err)
	}
	if err := reservation.Commit(ctx); err != nil {
		t.Fatal(err)
	}
}

// The clock decides the period: reservations just before and just after
// midnight UTC land in different daily periods, each opened from the limit.
func TestDailyPeriodsRollOverAtMidnightUTC(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, _ := testdb.NewPool(t)
	var mu sync.Mutex
	now := time.Date(2026, 11, 30, 23, 59, 59, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	store := budget.NewStore(pool, clock)
	if _, err := store.SetLimit(ctx, budget.Limit{OwnerID: "acme", Period: budget.PeriodDaily, TotalMicros: 500}); err != nil {
		t.Fatal(err)
	}
	before, after := now, now.Add(2*time.Second)
	// Fill yesterday completely, concurrently with today's requests.
	var wg sync.WaitGroup
	results := make(chan string, 20)
	for i := range 20 {
		at := before
		if i%2 == 1 {
			at = after
		}
		id := newID(t, pool)
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := reserve(ctx, pool, budget.Reservation{TaskID: id, OwnerID: "acme", Amount: 100, At: at}); err == nil {
				results <- at.Format(time.DateOnly)
			}
		}()
	}
	wg.Wait()
	close(results)
	count := map[string]int{}
	for d := range results {
		count[d]++
	}
	if count["2026-11-30"] != 5 || count["2026-12-01"] != 5 {
		t.Fatalf("admitted per day = %v, want 5 on each side of midnight", count)
	}
	mu.Lock()
	now = after
	mu.Unlock()
	b, err := store.Balances(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	if !b[0].PeriodStart.Equal(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)) || b[0].ReservedMicros != 500 {
		t.Errorf("today's balance = %+v", b[0])
	}
	mustVerify(t, store)
}

func TestLimitChangesTopupsAndAlerts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, _ := testdb.NewPool(t)
	store := budget.NewStore(pool, nil)
	if _, err := store.SetLimit(ctx, budget.Limit{OwnerID: "acme", Period: budget.PeriodMonthly, TotalMicros: 1000, Actor: "admin:test"}); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Topup(ctx, "acme", "", 500, "admin:test", "invoice 7"); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Topup(ctx, "nobody", "", 500, "admin:test", ""); !errors.Is(err, budget.ErrNotFound) {
		t.Errorf("topup of a missing budget: %v, want ErrNotFound", err)
	}
	// Raising the limit keeps the top-up: 2000 + 500.
	b, err := store.SetLimit(ctx, budget.Limit{OwnerID: "acme", Period: budget.PeriodMonthly, TotalMicros: 2000, Actor: "admin:test"})
	if err != nil || b.TotalMicros != 2500 {
		t.Fatalf("after raise: %+v %v, want total 2500", b, err)
	}
	// Spend 70% and then 95%, settling one task at a time: each threshold
	// fires exactly once.
	var fired []int
	for _, cost := range []int64{1000, 750, 100, 500} {
		id := newID(t, pool)
		if err := reserve(ctx, pool, budget.Reservation{TaskID: id, OwnerID: "acme", Amount: cost, At: time.Now()}); err != nil {
			t.Fatal(err)
		}
		err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			s, err := budget.SettleTx(ctx, tx, budget.Settlement{TaskID: id, Model: "m", Source: budget.SourceReported, CostMicros: cost}, budget.DefaultThresholds)
			for _, a := range s.Alerts {
				fired = append(fired, a.ThresholdPct)
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if fmt.Sprint(fired) != "[70 90]" {
		t.Errorf("alerts fired %v, want [70 90] once each", fired)
	}
	// Lowering below what is spent is refused.
	if _, err := store.SetLimit(ctx, budget.Limit{OwnerID: "acme", Period: budget.PeriodMonthly, TotalMicros: 100}); !errors.Is(err, budget.ErrBelowCommitted) {
		t.Errorf("lowering below spent: %v, want ErrBelowCommitted", err)
	}
	for _, bad := range []budget.Limit{
		{OwnerID: "bad owner!", Period: budget.PeriodNone, TotalMicros: 5},
		{OwnerID: "acme", Period: "weekly", TotalMicros: 5},
		{OwnerID: "acme", Period: budget.PeriodNone, TotalMicros: -1},
		{OwnerID: "acme", Workload: "no spaces", Period: budget.PeriodNone, TotalMicros: 1},
	} {
		if _, err := store.SetLimit(ctx, bad); !errors.Is(err, budget.ErrInvalid) {
			t.Errorf("SetLimit(%+v) = %v, want ErrInvalid", bad, err)
		}
	}
	mustVerify(t, store)
	var actors int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM budget_ledger WHERE actor = 'admin:test' AND kind IN ('adjust', 'topup')`).Scan(&actors); err != nil || actors != 3 {
		t.Errorf("ledger rows naming the admin = %d (%v), want 3 (open, topup, raise)", actors, err)
	}
}

func TestVerifyNamesAHandCorruptedBalance(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, _ := testdb.NewPool(t)
	store := budget.NewStore(pool, nil)
	if _, err := store.Set(ctx, "acme", 1000); err != nil {
		t.Fatal(err)
	}
	mustVerify(t, store)
	if _, err := pool.Exec(ctx, `UPDATE budget_periods SET spent_micros = spent_micros + 7 WHERE owner_id = 'acme'`); err != nil {
		t.Fatal(err)
	}
	mm, err := store.Verify(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(mm) == 0 || mm[0].OwnerID != "acme" {
		t.Fatalf("Verify after corruption = %v, want a mismatch naming acme", mm)
	}
}
