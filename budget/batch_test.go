package budget_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tollgate/tollgate/budget"
	"github.com/tollgate/tollgate/internal/eventually"
	"github.com/tollgate/tollgate/internal/testdb"
)

// reserveMany runs QueueReserve's one statement for rs in a transaction of
// its own.
func reserveMany(ctx context.Context, pool *pgxpool.Pool, rs []budget.Reservation) error {
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		b := &pgx.Batch{}
		budget.QueueReserve(b, rs...)
		return tx.SendBatch(ctx, b).Close()
	})
}

// settleMany settles ss as one batch in a transaction of its own and
// returns each one's answer.
func settleMany(ctx context.Context, pool *pgxpool.Pool, ss []budget.Settlement, thresholds []int) ([]budget.Settled, error) {
	out := make([]budget.Settled, len(ss))
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		var set budget.Settlements
		for i, s := range ss {
			if err := set.Add(s, &out[i]); err != nil {
				return err
			}
		}
		b := &pgx.Batch{}
		set.Queue(b, thresholds)
		return tx.SendBatch(ctx, b).Close()
	})
	return out, err
}

// sumOf is one SQL sum over the database, for the invariants below.
func sumOf(t *testing.T, pool *pgxpool.Pool, query string, args ...any) int64 {
	t.Helper()
	var n int64
	if err := pool.QueryRow(context.Background(), `SELECT COALESCE((`+query+`), 0)::bigint`, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// A batch of reservations is all or nothing, held on each balance row as
// their sum: it succeeds only when every row covers the sum of what it
// covers (each member alone fitting is not enough), and it tells apart the
// cases its caller handles one by one.
func TestReserveManyHoldsTheBatchOrNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, store := limited(t,
		budget.Limit{OwnerID: "acme", Period: budget.PeriodNone, TotalMicros: 1_000},
		budget.Limit{OwnerID: "acme", Workload: "batch", Period: budget.PeriodDaily, TotalMicros: 300},
	)
	now := time.Now()
	r := func(workload string, amount int64) budget.Reservation {
		return budget.Reservation{TaskID: newID(t, pool), OwnerID: "acme", Workload: workload, Amount: amount, At: now}
	}
	cases := []struct {
		name          string
		batch         []budget.Reservation
		want          error
		owner, capped int64 // reserved on each row afterwards
	}{
		{"mixed workloads", []budget.Reservation{r("", 100), r("batch", 150), r("chat", 50), r("batch", 100)}, nil, 400, 250},
		{"each fits the workload, not their sum", []budget.Reservation{r("batch", 30), r("batch", 30)}, budget.ErrInsufficient, 400, 250},
		{"the owner's row short", []budget.Reservation{r("", 300), r("chat", 301)}, budget.ErrInsufficient, 400, 250},
		{"exactly what is left", []budget.Reservation{r("batch", 25), r("", 550), r("batch", 25)}, nil, 1_000, 300},
		{"no budget", []budget.Reservation{{TaskID: newID(t, pool), OwnerID: "nobody", Amount: 1, At: now}}, budget.ErrInsufficient, 1_000, 300},
		{"tomorrow's period not opened", []budget.Reservation{{TaskID: newID(t, pool), OwnerID: "acme", Workload: "batch", Amount: 1, At: now.Add(24 * time.Hour)}}, budget.ErrPeriodNotOpen, 1_000, 300},
	}
	for _, c := range cases {
		err := reserveMany(ctx, pool, c.batch)
		if !errors.Is(err, c.want) || (c.want == nil && err != nil) {
			t.Errorf("%s: err = %v, want %v", c.name, err, c.want)
		}
		owner := sumOf(t, pool, `SELECT reserved_micros FROM budget_periods WHERE owner_id = 'acme' AND workload = ''`)
		capped := sumOf(t, pool, `SELECT reserved_micros FROM budget_periods WHERE owner_id = 'acme' AND workload = 'batch'`)
		if owner != c.owner || capped != c.capped {
			t.Errorf("%s: reserved owner %d, batch %d; want %d, %d", c.name, owner, capped, c.owner, c.capped)
		}
	}
	// One reservation row per task, each naming the rows it holds: both
	// rows for the capped workload's four, the owner's alone for the others.
	if n := sumOf(t, pool, `SELECT count(*) FROM budget_reservations WHERE cardinality(budget_period_ids) = 2`); n != 4 {
		t.Errorf("reservations holding two rows = %d, want 4", n)
	}
	if n := sumOf(t, pool, `SELECT count(*) FROM budget_reservations`); n != 7 {
		t.Errorf("reservations = %d, want 7", n)
	}
	mustVerify(t, store)
}

// Settling a batch in one statement leaves exactly what settling its
// members one after the other does: balances, ledger, usage and alerts.
func TestSettleManyMatchesOneByOne(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	type state struct {
		owner, capped [2]int64 // reserved, spent
		ledger        string
		usage         string
		alerts        int64
	}
	run := func(t *testing.T, together bool) (state, []budget.Settled) {
		pool, store := limited(t,
			budget.Limit{OwnerID: "acme", Period: budget.PeriodNone, TotalMicros: 10_000},
			budget.Limit{OwnerID: "acme", Workload: "batch", Period: budget.PeriodMonthly, TotalMicros: 2_000},
		)
		var ss []budget.Settlement
		for i, w := range []string{"", "batch", "chat", "batch", ""} {
			id := fmt.Sprintf("00000000-0000-0000-0000-00000000000%d", i+1)
			if err := reserve(ctx, pool, budget.Reservation{TaskID: id, OwnerID: "acme", Workload: w, Amount: 1_000, At: time.Now()}); err != nil {
				t.Fatal(err)
			}
			// Costs above and below the reservation; the batch's 1,500
			// crosses 70 % of the workload's 2,000.
			ss = append(ss, budget.Settlement{TaskID: id, Workload: w, Model: "m", InputTokens: int64(i), OutputTokens: 2,
				Source: budget.SourceReported, CostMicros: []int64{1_200, 700, 10, 800, 0}[i]})
		}
		var out []budget.Settled
		if together {
			var err error
			if out, err = settleMany(ctx, pool, ss, budget.DefaultThresholds); err != nil {
				t.Fatal(err)
			}
		} else {
			for _, s := range ss {
				err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
					got, err := budget.SettleTx(ctx, tx, s, budget.DefaultThresholds)
					out = append(out, got)
					return err
				})
				if err != nil {
					t.Fatal(err)
				}
			}
		}
		mustVerify(t, store)
		var st state
		q := func(dst *string, query string) {
			if err := pool.QueryRow(ctx, query).Scan(dst); err != nil {
				t.Fatal(err)
			}
		}
		for _, x := range []struct {
			dst      *[2]int64
			workload string
		}{{&st.owner, ""}, {&st.capped, "batch"}} {
			if err := pool.QueryRow(ctx, `SELECT reserved_micros, spent_micros FROM budget_periods WHERE workload = $1`, x.workload).Scan(&x.dst[0], &x.dst[1]); err != nil {
				t.Fatal(err)
			}
		}
		q(&st.ledger, `SELECT string_agg(format('%s/%s/%s/%s/%s/%s/%s', task_id, workload, kind, amount_micros, usage_source, input_tokens, output_tokens), ',' ORDER BY task_id, workload, kind)
		               FROM budget_ledger WHERE kind IN ('release', 'settle')`)
		q(&st.usage, `SELECT string_agg(format('%s/%s/%s/%s/%s/%s', task_id, workload, model, cost_micros, charged_micros, shortfall_micros), ',' ORDER BY task_id)
		              FROM usage_records`)
		st.alerts = sumOf(t, pool, `SELECT count(*) FROM budget_alerts`)
		return st, out
	}
	alone, aloneOut := run(t, false)
	together, togetherOut := run(t, true)
	if alone != together {
		t.Errorf("one by one:\n%+v\ntogether:\n%+v", alone, together)
	}
	if together.alerts != 1 {
		t.Errorf("alerts = %d, want 1 (70 %% of the workload's budget)", together.alerts)
	}
	var fired []budget.Alert
	for i := range togetherOut {
		if togetherOut[i].ChargedMicros != aloneOut[i].ChargedMicros || togetherOut[i].ShortfallMicros != 0 {
			t.Errorf("settlement %d: together %+v, alone %+v", i, togetherOut[i], aloneOut[i])
		}
		fired = append(fired, togetherOut[i].Alerts...)
	}
	if len(fired) != 1 || fired[0].ThresholdPct != 70 || fired[0].Workload != "batch" || fired[0].SpentMicros != 1_500 {
		t.Errorf("alerts told = %+v, want the workload's 70 %% at 1500 spent", fired)
	}
}

// A batch that a row cannot charge in full, or with a member that holds no
// reservation, changes nothing: its caller settles each member alone, where
// a shortfall is charged up to the headroom and recorded.
func TestSettleManyRefusesWhatItCannotChargeInFull(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, _ := testdb.NewPool(t)
	store := budget.NewStore(pool, nil)
	if _, err := store.Set(ctx, "acme", 1_000); err != nil {
		t.Fatal(err)
	}
	var ss []budget.Settlement
	for range 3 {
		id := newID(t, pool)
		if err := reserve(ctx, pool, budget.Reservation{TaskID: id, OwnerID: "acme", Amount: 300, At: time.Now()}); err != nil {
			t.Fatal(err)
		}
		ss = append(ss, budget.Settlement{TaskID: id, Model: "m", Source: budget.SourceReported, CostMicros: 300})
	}
	// 100 free: the first may cost 400, but then the second has only its
	// own 300 left and cannot cost 350.
	short := []budget.Settlement{ss[0], ss[1]}
	short[0].CostMicros, short[1].CostMicros = 400, 350
	unheld := []budget.Settlement{ss[2], {TaskID: newID(t, pool), Model: "m", Source: budget.SourceReported, CostMicros: 1}}
	for _, c := range []struct {
		name  string
		batch []budget.Settlement
		want  error
	}{
		{"a prefix past the headroom", short, budget.ErrBatchShort},
		{"a member with no reservation", unheld, budget.ErrNotFound},
	} {
		if _, err := settleMany(ctx, pool, c.batch, nil); !errors.Is(err, c.want) {
			t.Errorf("%s: err = %v, want %v", c.name, err, c.want)
		}
		if n := sumOf(t, pool, `SELECT count(*) FROM budget_reservations WHERE state = 'held'`); n != 3 {
			t.Errorf("%s: held reservations = %d, want all 3 still held", c.name, n)
		}
	}
	// The last prefix fits exactly: 400 (100 over its own) then 300.
	fits := []budget.Settlement{ss[0], ss[1]}
	fits[0].CostMicros = 400
	if _, err := settleMany(ctx, pool, fits, nil); err != nil {
		t.Fatalf("a batch that fits exactly: %v", err)
	}
	if spent := sumOf(t, pool, `SELECT spent_micros FROM budget_periods`); spent != 700 {
		t.Errorf("spent = %d, want 700", spent)
	}
	if _, err := settleMany(ctx, pool, []budget.Settlement{{TaskID: ss[2].TaskID, CostMicros: -1}}, nil); !errors.Is(err, budget.ErrInvalid) {
		t.Errorf("negative cost: %v, want ErrInvalid", err)
	}
	mustVerify(t, store)
}

// Batches of reservations and settlements race across two workloads, as
// admissions and successes of one owner do, each falling back to its
// members one by one when the batch is refused: no balance row ever holds
// more than its total, every micro is in the ledger, and nothing deadlocks.
func TestConcurrentBatchesKeepTheCaps(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, store := limited(t,
		budget.Limit{OwnerID: "acme", Period: budget.PeriodNone, TotalMicros: 20_000},
		budget.Limit{OwnerID: "acme", Workload: "batch", Period: budget.PeriodNone, TotalMicros: 6_000},
	)
	const goroutines, perBatch = 24, 5
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var rs []budget.Reservation
			for i := range perBatch {
				rs = append(rs, budget.Reservation{TaskID: newID(t, pool), OwnerID: "acme", Workload: []string{"batch", "chat"}[(g+i)%2],
					Amount: 300, At: time.Now()})
			}
			held := rs
			if err := reserveMany(ctx, pool, rs); err != nil {
				if !errors.Is(err, budget.ErrInsufficient) {
					t.Errorf("reserve batch: %v", err)
					return
				}
				held = nil
				for _, r := range rs {
					switch err := reserve(ctx, pool, r); {
					case err == nil:
						held = append(held, r)
					case !errors.Is(err, budget.ErrInsufficient):
						t.Errorf("reserve: %v", err)
					}
				}
			}
			var ss []budget.Settlement
			for i, r := range held {
				ss = append(ss, budget.Settlement{TaskID: r.TaskID, Workload: r.Workload, Model: "m", Source: budget.SourceReported,
					CostMicros: int64(100 + 150*((g+i)%3))}) // 100, 250 or 400 against 300 held
			}
			if _, err := settleMany(ctx, pool, ss, budget.DefaultThresholds); err != nil {
				if !errors.Is(err, budget.ErrBatchShort) {
					t.Errorf("settle batch: %v", err)
					return
				}
				for _, s := range ss {
					if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
						_, err := budget.SettleTx(ctx, tx, s, budget.DefaultThresholds)
						return err
					}); err != nil {
						t.Errorf("settle: %v", err)
					}
				}
			}
		}()
	}
	wg.Wait()
	if n := sumOf(t, pool, `SELECT count(*) FROM budget_periods WHERE reserved_micros + spent_micros > total_micros OR reserved_micros <> 0`); n != 0 {
		t.Errorf("%d balance rows over their total or still reserving", n)
	}
	if n := sumOf(t, pool, `SELECT count(*) FROM budget_reservations WHERE state = 'held'`); n != 0 {
		t.Errorf("%d reservations still held", n)
	}
	// The owner's cap binds: what was admitted at 300 a task was settled,
	// and the usage rows charge what the owner's row spent.
	spent := sumOf(t, pool, `SELECT spent_micros FROM budget_periods WHERE workload = ''`)
	charged := sumOf(t, pool, `SELECT sum(charged_micros) FROM usage_records`)
	if spent != charged || spent == 0 {
		t.Errorf("owner spent %d, usage charged %d", spent, charged)
	}
	mustVerify(t, store)
}

// A statement that waits for a balance row's lock works from the row it
// then holds, not from the older version its snapshot saw: here another
// transaction settles task A at no cost, releasing 300, while each
// statement below waits, and each needs that release (three tasks hold
// 300 each of 1,000: 100 free before it, 400 after). Computed from the
// snapshot's version, the settlement broke budget_periods_amounts (the
// CHECK is evaluated on the row built from the stale version, before
// PostgreSQL finds the newer one) and the reservation was refused without
// waiting (its WHERE false on the stale version). The lowered limit waits
// in an earlier statement of its transaction; it is here so that it stays
// right.
func TestBalanceUpdatesThatWaitedUseTheRowTheyLocked(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	settleOne := func(pool *pgxpool.Pool, s budget.Settlement) (budget.Settled, error) {
		var out budget.Settled
		err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) (err error) {
			out, err = budget.SettleTx(ctx, tx, s, nil)
			return err
		})
		return out, err
	}
	cases := []struct {
		name string
		// op runs while the release is uncommitted; b and c are the
		// other tasks, each holding 300.
		op func(pool *pgxpool.Pool, store *budget.Store, b, c string) error
		// spent and reserved on the row afterwards
		spent, reserved int64
	}{
		{"a settlement charged into the released headroom", func(pool *pgxpool.Pool, _ *budget.Store, b, _ string) error {
			got, err := settleOne(pool, budget.Settlement{TaskID: b, Model: "m", Source: budget.SourceReported, CostMicros: 700})
			if err == nil && (got.ChargedMicros != 700 || got.ShortfallMicros != 0) {
				return fmt.Errorf("settled %+v, want 700 charged in full", got)
			}
			return err
		}, 700, 300},
		{"a batch of settlements charged into it", func(pool *pgxpool.Pool, _ *budget.Store, b, c string) error {
			_, err := settleMany(ctx, pool, []budget.Settlement{
				{TaskID: b, Model: "m", Source: budget.SourceReported, CostMicros: 500},
				{TaskID: c, Model: "m", Source: budget.SourceReported, CostMicros: 500},
			}, nil)
			return err
		}, 1_000, 0},
		{"a reservation into the released room", func(pool *pgxpool.Pool, _ *budget.Store, _, _ string) error {
			return reserve(ctx, pool, budget.Reservation{TaskID: newID(t, pool), OwnerID: "acme", Amount: 400, At: time.Now()})
		}, 0, 1_000},
		{"a batch of reservations into it", func(pool *pgxpool.Pool, _ *budget.Store, _, _ string) error {
			return reserveMany(ctx, pool, []budget.Reservation{
				{TaskID: newID(t, pool), OwnerID: "acme", Amount: 200, At: time.Now()},
				{TaskID: newID(t, pool), OwnerID: "acme", Amount: 200, At: time.Now()},
			})
		}, 0, 1_000},
		{"a limit lowered to what is left held", func(_ *pgxpool.Pool, store *budget.Store, _, _ string) error {
			_, err := store.SetLimit(ctx, budget.Limit{OwnerID: "acme", Period: budget.PeriodNone, TotalMicros: 600})
			return err
		}, 0, 600},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			pool, store := limited(t, budget.Limit{OwnerID: "acme", Period: budget.PeriodNone, TotalMicros: 1_000})
			a, b, c2 := newID(t, pool), newID(t, pool), newID(t, pool)
			for _, id := range []string{a, b, c2} {
				if err := reserve(ctx, pool, budget.Reservation{TaskID: id, OwnerID: "acme", Amount: 300, At: time.Now()}); err != nil {
					t.Fatal(err)
				}
			}
			release, err := pool.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer release.Rollback(ctx)
			if _, err := budget.SettleTx(ctx, release, budget.Settlement{TaskID: a, Model: "m", Source: budget.SourceReported}, nil); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- c.op(pool, store, b, c2) }()
			var early error
			finished := false
			eventually.Wait(t, "the statement to wait for the balance row's lock", func() bool {
				select {
				case early = <-done:
					finished = true
					return true
				default:
				}
				return sumOf(t, pool, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`) > 0
			})
			if finished {
				// Decided on the snapshot's version, without waiting.
				t.Fatalf("finished before the release committed: %v", early)
			}
			if err := release.Commit(ctx); err != nil {
				t.Fatal(err)
			}
			if err := <-done; err != nil {
				t.Fatalf("after waiting: %v", err)
			}
			spent := sumOf(t, pool, `SELECT spent_micros FROM budget_periods`)
			reserved := sumOf(t, pool, `SELECT reserved_micros FROM budget_periods`)
			if spent != c.spent || reserved != c.reserved {
				t.Errorf("spent %d, reserved %d; want %d, %d", spent, reserved, c.spent, c.reserved)
			}
			mustVerify(t, store)
		})
	}
}
