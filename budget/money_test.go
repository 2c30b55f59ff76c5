package budget_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tollgate/tollgate/budget"
	"github.com/tollgate/tollgate/internal/testdb"
)

// A cost that does not fit an int64 saturates, never wraps: a wrapped
// product is a reservation of one micro, or a negative cost.
func TestPriceCostNeverWraps(t *testing.T) {
	t.Parallel()
	maxP := budget.MaxPricePerMTok
	cases := []struct {
		name    string
		price   budget.Price
		in, out int64
		want    int64
	}{
		{"bounds multiply exactly", budget.Price{InputPerMTok: maxP, OutputPerMTok: maxP}, budget.MaxUsageTokens, budget.MaxUsageTokens, 2_000_000_000_000_000},
		{"huge price, few tokens: exact", budget.Price{InputPerMTok: math.MaxInt64, OutputPerMTok: math.MaxInt64}, 4, 1000, 9_260_265_525_002_195},
		{"huge price, huge usage", budget.Price{InputPerMTok: math.MaxInt64, OutputPerMTok: math.MaxInt64}, math.MaxInt64, math.MaxInt64, math.MaxInt64},
		{"huge usage", budget.Price{InputPerMTok: 1_000_000, OutputPerMTok: 2_000_000}, math.MaxInt64, math.MaxInt64, math.MaxInt64},
		{"product of 2^64, 0 when wrapped", budget.Price{OutputPerMTok: 1 << 62}, 0, 4, 18_446_744_073_710},
		{"just fits", budget.Price{InputPerMTok: 1_000_000}, math.MaxInt64, 0, math.MaxInt64},
		{"negative counts count as zero", budget.Price{InputPerMTok: 1_000_000}, -5, 0, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := c.price.Cost(c.in, c.out); got != c.want {
				t.Errorf("%+v.Cost(%d, %d) = %d, want %d", c.price, c.in, c.out, got, c.want)
			}
		})
	}
}

func TestCheckedArithmetic(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		f       func(a, b int64) (int64, bool)
		a, b    int64
		want    int64
		wantOK  bool
		satWant int64
		sat     func(a, b int64) int64
	}{
		{"add", budget.AddMicros, 2, 3, 5, true, 5, budget.SaturatingAdd},
		{"add overflows", budget.AddMicros, math.MaxInt64, 1, 0, false, math.MaxInt64, budget.SaturatingAdd},
		{"add underflows", budget.AddMicros, math.MinInt64, -1, 0, false, math.MinInt64, budget.SaturatingAdd},
		{"mul", budget.MulMicros, 3, budget.MaxTotalMicros, 3 * budget.MaxTotalMicros, true, 3 * budget.MaxTotalMicros, budget.SaturatingMul},
		{"mul overflows", budget.MulMicros, 10, budget.MaxTotalMicros, 0, false, math.MaxInt64, budget.SaturatingMul},
		{"mul by zero", budget.MulMicros, 0, math.MaxInt64, 0, true, 0, budget.SaturatingMul},
		{"mul min by -1", budget.MulMicros, math.MinInt64, -1, 0, false, math.MaxInt64, budget.SaturatingMul},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, ok := c.f(c.a, c.b)
			if got != c.want || ok != c.wantOK {
				t.Errorf("(%d, %d) = %d, %v; want %d, %v", c.a, c.b, got, ok, c.want, c.wantOK)
			}
			if got := c.sat(c.a, c.b); got != c.satWant {
				t.Errorf("saturating (%d, %d) = %d, want %d", c.a, c.b, got, c.satWant)
			}
		})
	}
}

func TestPricesBeyondTheBoundAreRefused(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{"a=1000000000001:1", "a=1:9223372036854775807"} {
		if _, err := budget.ParsePrices(bad); err == nil || !strings.Contains(err.Error(), "1000000000000") {
			t.Errorf("ParsePrices(%q) = %v, want an error naming the bound", bad, err)
		}
	}
	if _, err := budget.ParsePrices("a=1000000000000:1000000000000"); err != nil {
		t.Errorf("ParsePrices at the bound: %v", err)
	}
}

// An unlimited total (the maximum) settles, and alerts at its thresholds:
// the alert comparison is in numeric, where a bigint would overflow, fail
// the settlement and lose the provider's answer. So does int64's maximum
// when a database holds it (set by SQL, above the bound).
func TestUnlimitedTotalSettlesAndAlerts(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name       string
		total      int64 // set by SQL when above the maximum, as a database from before the bound holds it
		costs      []int64
		batch      bool
		wantAlerts string
	}{
		{"small spend, one by one", budget.Unlimited, []int64{5, 7}, false, "[]"},
		{"small spend, batched", budget.Unlimited, []int64{5, 7}, true, "[]"},
		{"70 percent of unlimited", budget.Unlimited, []int64{700_000_000_000_000_000}, false, "[70]"},
		{"95 percent of unlimited, batched", budget.Unlimited, []int64{500_000_000_000_000_000, 450_000_000_000_000_000}, true, "[70 90]"},
		{"int64's maximum stored before the bound", math.MaxInt64, []int64{5}, false, "[]"},
		{"int64's maximum stored before the bound, batched", math.MaxInt64, []int64{5, 6}, true, "[]"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			pool, _ := testdb.NewPool(t)
			store := budget.NewStore(pool, nil)
			setLimits(t, store, budget.Limit{OwnerID: "acme", Period: budget.PeriodNone, TotalMicros: min(c.total, budget.MaxTotalMicros)})
			if c.total > budget.MaxTotalMicros {
				forceTotal(t, pool, "acme", c.total)
			}
			var ss []budget.Settlement
			var want int64
			for _, cost := range c.costs {
				id := newID(t, pool)
				if err := reserve(ctx, pool, budget.Reservation{TaskID: id, OwnerID: "acme", Amount: cost, At: time.Now()}); err != nil {
					t.Fatal(err)
				}
				ss = append(ss, budget.Settlement{TaskID: id, Model: "m", Source: budget.SourceReported, CostMicros: cost})
				want += cost
			}
			var fired []int
			if c.batch {
				out, err := settleMany(ctx, pool, ss, budget.DefaultThresholds)
				if err != nil {
					t.Fatal(err)
				}
				for _, a := range out[0].Alerts {
					fired = append(fired, a.ThresholdPct)
				}
			} else {
				for _, s := range ss {
					err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
						got, err := budget.SettleTx(ctx, tx, s, budget.DefaultThresholds)
						for _, a := range got.Alerts {
							fired = append(fired, a.ThresholdPct)
						}
						return err
					})
					if err != nil {
						t.Fatal(err)
					}
				}
			}
			if got := fmt.Sprint(fired); got != c.wantAlerts && !(got == "[]" && c.wantAlerts == "[]") {
				t.Errorf("alerts fired %v, want %s", fired, c.wantAlerts)
			}
			if spent := sumOf(t, pool, `SELECT spent_micros FROM budget_periods WHERE owner_id = 'acme'`); spent != want {
				t.Errorf("spent %d, want %d", spent, want)
			}
			if c.total <= budget.MaxTotalMicros {
				mustVerify(t, store)
			}
		})
	}
}

// forceTotal sets owner's total by hand, ledger included, as a database
// written before the bound may hold it.
func forceTotal(t *testing.T, pool *pgxpool.Pool, owner string, total int64) {
	t.Helper()
	_, err := pool.Exec(context.Background(), `
		WITH l AS (UPDATE budget_limits SET total_micros = $2 WHERE owner_id = $1)
		UPDATE budget_periods SET total_micros = $2 WHERE owner_id = $1`, owner, total)
	if err != nil {
		t.Fatal(err)
	}
}

// Totals and top-ups beyond the maximum are refused naming the field; a
// top-up near int64's maximum overflowed the total's bigint.
func TestTotalsAndTopupsBeyondTheMaximumAreRefused(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name      string
		total     int64
		topup     int64 // 0: none
		workload  string
		newTotal  int64 // 0: no change of the limit
		wantErr   string
		wantTotal int64
	}{
		{name: "total of int64's maximum", total: math.MaxInt64, wantErr: "total_micros must be between 0 and 1000000000000000000"},
		{name: "workload total beyond the maximum", total: 10, workload: "w", newTotal: budget.MaxTotalMicros + 1, wantErr: "workloads.w.total_micros must be"},
		{name: "top-up near int64's maximum", total: 1000, topup: math.MaxInt64 - 10, wantErr: "amount_micros must be between 1 and 1000000000000000000"},
		{name: "top-up past the maximum", total: budget.MaxTotalMicros - 10, topup: 11, wantErr: "amount_micros would take the total above 1000000000000000000"},
		{name: "top-up to the maximum", total: budget.MaxTotalMicros - 10, topup: 10, wantTotal: budget.MaxTotalMicros},
		{name: "limit raised past the maximum by earlier top-ups", total: 1000, topup: 500, newTotal: budget.MaxTotalMicros, wantErr: "total_micros would take the total above"},
		{name: "unlimited", total: budget.Unlimited, wantTotal: budget.Unlimited},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			pool, _ := testdb.NewPool(t)
			store := budget.NewStore(pool, nil)
			b, err := store.SetLimit(ctx, budget.Limit{OwnerID: "acme", Period: budget.PeriodNone, TotalMicros: c.total})
			if err == nil && c.topup > 0 {
				b, err = store.Topup(ctx, "acme", "", c.topup, "admin:test", "")
			}
			if err == nil && c.newTotal > 0 {
				b, err = store.SetLimit(ctx, budget.Limit{OwnerID: "acme", Workload: c.workload, Period: budget.PeriodNone, TotalMicros: c.newTotal})
			}
			switch {
			case c.wantErr != "" && (!errors.Is(err, budget.ErrInvalid) || !strings.Contains(err.Error(), c.wantErr)):
				t.Fatalf("err = %v, want ErrInvalid containing %q", err, c.wantErr)
			case c.wantErr == "" && err != nil:
				t.Fatal(err)
			case c.wantErr == "" && b.TotalMicros != c.wantTotal:
				t.Errorf("total %d, want %d", b.TotalMicros, c.wantTotal)
			}
			mustVerify(t, store)
		})
	}
}

// A settlement of an implausible usage report is charged at most its
// reservation, even with headroom to spare, alone or in a batch beside
// plausible ones; the rest is recorded as shortfall.
func TestImplausibleSettlementIsCappedAtTheReservation(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		batch bool
	}{{"alone", false}, {"in a batch", true}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			pool, store := limited(t, budget.Limit{OwnerID: "acme", Period: budget.PeriodNone, TotalMicros: 1_000_000})
			lie, honest := newID(t, pool), newID(t, pool)
			for _, id := range []string{lie, honest} {
				if err := reserve(ctx, pool, budget.Reservation{TaskID: id, OwnerID: "acme", Amount: 100, At: time.Now()}); err != nil {
					t.Fatal(err)
				}
			}
			ss := []budget.Settlement{
				{TaskID: lie, Model: "m", InputTokens: budget.MaxUsageTokens, Source: budget.SourceReported, CostMicros: 5000, ChargeCapMicros: ptr(100)},
				{TaskID: honest, Model: "m", Source: budget.SourceReported, CostMicros: 300},
			}
			var out []budget.Settled
			if c.batch {
				var err error
				if out, err = settleMany(ctx, pool, ss, nil); err != nil {
					t.Fatal(err)
				}
			} else {
				for _, s := range ss {
					err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
						got, err := budget.SettleTx(ctx, tx, s, nil)
						out = append(out, got)
						return err
					})
					if err != nil {
						t.Fatal(err)
					}
				}
			}
			if out[0].ChargedMicros != 100 || out[0].ShortfallMicros != 4900 {
				t.Errorf("implausible: charged %d shortfall %d, want 100 and 4900", out[0].ChargedMicros, out[0].ShortfallMicros)
			}
			if out[1].ChargedMicros != 300 || out[1].ShortfallMicros != 0 {
				t.Errorf("plausible: charged %d shortfall %d, want 300 and 0", out[1].ChargedMicros, out[1].ShortfallMicros)
			}
			if got := sumOf(t, pool, `SELECT shortfall_micros FROM usage_records WHERE task_id = $1`, lie); got != 4900 {
				t.Errorf("recorded shortfall %d, want 4900", got)
			}
			if got := sumOf(t, pool, `SELECT spent_micros FROM budget_periods WHERE owner_id = 'acme'`); got != 400 {
				t.Errorf("spent %d, want 400", got)
			}
			mustVerify(t, store)
		})
	}
}

// Usage totals beyond an int64 saturate instead of failing the report.
func TestUsageTotalsSaturate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, store := limited(t, budget.Limit{OwnerID: "acme", Period: budget.PeriodNone, TotalMicros: 1000})
	for range 2 {
		_, err := pool.Exec(ctx, `
			INSERT INTO usage_records (task_id, owner_id, model, input_tokens, output_tokens, source, cost_micros, charged_micros, shortfall_micros)
			VALUES (gen_random_uuid(), 'acme', 'm', 9223372036854775807, 1, 'reported', 9223372036854775807, 0, 9223372036854775807)`)
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, group := range [][]string{nil, {budget.GroupModel}} {
		rep, err := store.Usage(ctx, budget.UsageFilter{From: time.Now().Add(-time.Hour), To: time.Now().Add(time.Hour), GroupBy: group})
		if err != nil {
			t.Fatalf("usage grouped by %v: %v", group, err)
		}
		if rep.Totals.InputTokens != math.MaxInt64 || rep.Totals.ShortfallMicros != math.MaxInt64 || rep.Totals.OutputTokens != 2 {
			t.Errorf("totals grouped by %v = %+v, want saturated input and shortfall, 2 output", group, rep.Totals)
		}
	}
}

// Verify finds a task whose money was not closed as its end requires, two
// kinds the balances alone cannot show, and stays quiet on healthy books.
func TestVerifyFindsTasksWhoseMoneyWasNotClosed(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		// corrupt turns a healthy task, held (reservation held, task
		// running, a journal entry sent), into the state to find.
		corrupt  func(ctx context.Context, tx pgx.Tx, id string) error
		wantWhat string
		wantText string
	}{
		{"healthy, settled", func(ctx context.Context, tx pgx.Tx, id string) error {
			if err := journal(ctx, tx, id, "succeeded"); err != nil {
				return err
			}
			if _, err := budget.SettleTx(ctx, tx, budget.Settlement{TaskID: id, Model: "m", Source: budget.SourceReported, CostMicros: 40}, nil); err != nil {
				return err
			}
			return end(ctx, tx, id, "succeeded")
		}, "", ""},
		{"healthy, released before any call", func(ctx context.Context, tx pgx.Tx, id string) error {
			if err := budget.ReleaseTx(ctx, tx, id); err != nil {
				return err
			}
			return end(ctx, tx, id, "canceled")
		}, "", ""},
		{"healthy, settled as possibly charged", func(ctx context.Context, tx pgx.Tx, id string) error {
			if err := journal(ctx, tx, id, "ambiguous"); err != nil {
				return err
			}
			if _, err := budget.SettleTx(ctx, tx, budget.Settlement{TaskID: id, Model: "m", Source: budget.SourcePossiblyCharged, CostMicros: 100}, nil); err != nil {
				return err
			}
			return end(ctx, tx, id, "failed")
		}, "", ""},
		{"finished with its reservation held", func(ctx context.Context, tx pgx.Tx, id string) error {
			if err := journal(ctx, tx, id, "succeeded"); err != nil {
				return err
			}
			return end(ctx, tx, id, "succeeded")
		}, budget.WhatUnsettled, "finished without a settlement (succeeded, reservation held), reservation 100, charged 0"},
		{"succeeded, reservation released", func(ctx context.Context, tx pgx.Tx, id string) error {
			if err := budget.ReleaseTx(ctx, tx, id); err != nil {
				return err
			}
			return end(ctx, tx, id, "succeeded")
		}, budget.WhatUnsettled, "(succeeded, reservation released)"},
		{"a sent entry, reservation released", func(ctx context.Context, tx pgx.Tx, id string) error {
			if err := journal(ctx, tx, id, "sent"); err != nil {
				return err
			}
			if err := budget.ReleaseTx(ctx, tx, id); err != nil {
				return err
			}
			return end(ctx, tx, id, "failed")
		}, budget.WhatReleasedAfterCall, "a journal entry sent (a call that may have been billed), but its reservation of 100 was released uncharged"},
		{"an ambiguous entry, reservation released", func(ctx context.Context, tx pgx.Tx, id string) error {
			if err := journal(ctx, tx, id, "ambiguous"); err != nil {
				return err
			}
			if err := budget.ReleaseTx(ctx, tx, id); err != nil {
				return err
			}
			return end(ctx, tx, id, "failed")
		}, budget.WhatReleasedAfterCall, "a journal entry ambiguous"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			pool, store := limited(t, budget.Limit{OwnerID: "acme", Period: budget.PeriodNone, TotalMicros: 1000})
			id := newID(t, pool)
			err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
				if _, err := tx.Exec(ctx, `
					INSERT INTO tasks (id, owner_id, idempotency_key, request_hash, request, model, status, reserved_micros, deadline_at)
					VALUES ($1, 'acme', $2, '\x00', '{}', 'm', 'running', 100, now() + interval '1 hour')`, id, id); err != nil {
					return err
				}
				return reserveTx(ctx, tx, budget.Reservation{TaskID: id, OwnerID: "acme", Amount: 100, At: time.Now()})
			})
			if err != nil {
				t.Fatal(err)
			}
			mustVerify(t, store) // running and held: healthy
			if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return c.corrupt(ctx, tx, id) }); err != nil {
				t.Fatal(err)
			}
			mm, err := store.Verify(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if c.wantWhat == "" {
				for _, m := range mm {
					t.Errorf("verify on healthy books: %s", m)
				}
				return
			}
			if len(mm) != 1 || mm[0].What != c.wantWhat || mm[0].TaskID != id || mm[0].OwnerID != "acme" || !strings.Contains(mm[0].String(), c.wantText) {
				t.Fatalf("verify = %v, want one %s mismatch for task %s containing %q", mm, c.wantWhat, id, c.wantText)
			}
		})
	}
}

// journal writes task id's first journal entry in state.
func journal(ctx context.Context, tx pgx.Tx, id, state string) error {
	_, err := tx.Exec(ctx, `INSERT INTO task_attempts (task_id, attempt, state, provider_key, idempotency_key, model) VALUES ($1, 1, $2, 'p', $3, 'm')`, id, state, id)
	return err
}

// end finishes task id in status.
func end(ctx context.Context, tx pgx.Tx, id, status string) error {
	_, err := tx.Exec(ctx, `
		UPDATE tasks SET status = $2, finished_at = now(),
		       result = CASE WHEN $2 = 'succeeded' THEN '{}'::jsonb END,
		       error = CASE WHEN $2 = 'failed' THEN '{}'::jsonb END
		WHERE id = $1`, id, status)
	return err
}

func ptr(v int64) *int64 { return &v }
