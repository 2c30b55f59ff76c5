package budget_test

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/tollgate/tollgate/budget"
)

// Each usage class is priced at its own price, or at its total's when it
// has none; the classes are parts of the totals, never added to them.
func TestCostByClass(t *testing.T) {
	t.Parallel()
	plain := budget.Price{InputPerMTok: 1_000_000, OutputPerMTok: 2_000_000} // 1 and 2 micros a token
	classed := budget.Price{InputPerMTok: 1_000_000, OutputPerMTok: 2_000_000,
		CachedInputPerMTok: ptr(100_000), CacheWritePerMTok: ptr(1_250_000), ReasoningPerMTok: ptr(3_000_000)}
	maxP := budget.MaxPricePerMTok
	cases := []struct {
		name  string
		price budget.Price
		t     budget.Tokens
		want  int64
	}{
		{"plain usage, as Cost", plain, budget.Tokens{Input: 1000, Output: 500}, 2000},
		{"classes without prices cost their totals' price", plain,
			budget.Tokens{Input: 1000, Output: 500, CachedInput: 400, CacheWrite: 100, Reasoning: 300}, 2000},
		{"each class at its price", classed,
			// 500 plain input + 400 cached × 0.1 + 100 written × 1.25 + 200 output × 2 + 300 reasoning × 3
			budget.Tokens{Input: 1000, Output: 500, CachedInput: 400, CacheWrite: 100, Reasoning: 300}, 500 + 40 + 125 + 400 + 900},
		{"a free class", budget.Price{InputPerMTok: 1_000_000, CachedInputPerMTok: ptr(0)},
			budget.Tokens{Input: 1000, CachedInput: 1000}, 0},
		{"only a cached price set: writes at the input price", budget.Price{InputPerMTok: 1_000_000, CachedInputPerMTok: ptr(500_000)},
			budget.Tokens{Input: 1000, CachedInput: 200, CacheWrite: 200}, 600 + 100 + 200},
		{"fractions round up once, over the sum", classed, budget.Tokens{Input: 1, CachedInput: 1}, 1},
		{"classes beyond their totals count as the whole total", classed,
			budget.Tokens{Input: 100, Output: 10, CachedInput: 80, CacheWrite: 80, Reasoning: 50}, 8 + 25 + 30},
		{"negative classes count as zero", classed, budget.Tokens{Input: 100, Output: 10, CachedInput: -5, Reasoning: -1}, 100 + 20},
		{"the bounds multiply exactly", budget.Price{InputPerMTok: maxP, OutputPerMTok: maxP, CachedInputPerMTok: ptr(maxP),
			CacheWritePerMTok: ptr(maxP), ReasoningPerMTok: ptr(maxP)},
			budget.Tokens{Input: budget.MaxUsageTokens, Output: budget.MaxUsageTokens, CachedInput: 1, CacheWrite: 1, Reasoning: 1}, 2_000_000_000_000_000},
		{"huge usage saturates", classed,
			budget.Tokens{Input: math.MaxInt64, Output: math.MaxInt64, CachedInput: math.MaxInt64 / 2, CacheWrite: math.MaxInt64 / 2, Reasoning: math.MaxInt64}, math.MaxInt64},
		{"huge class prices saturate, never wrap", budget.Price{CachedInputPerMTok: ptr(math.MaxInt64), CacheWritePerMTok: ptr(math.MaxInt64),
			ReasoningPerMTok: ptr(math.MaxInt64)},
			budget.Tokens{Input: math.MaxInt64, Output: math.MaxInt64, CachedInput: math.MaxInt64 / 2, CacheWrite: math.MaxInt64 / 2, Reasoning: math.MaxInt64}, math.MaxInt64},
		{"a product of 2^64 in a class, 0 when wrapped", budget.Price{ReasoningPerMTok: ptr(1 << 62)},
			budget.Tokens{Output: 4, Reasoning: 4}, 18_446_744_073_710},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := c.price.CostOf(c.t); got != c.want {
				t.Errorf("CostOf(%+v) = %d, want %d", c.t, got, c.want)
			}
		})
	}
}

func TestTokensNormalized(t *testing.T) {
	t.Parallel()
	cases := []struct {
		in, want budget.Tokens
	}{
		{budget.Tokens{Input: 10, Output: 5, CachedInput: 3, CacheWrite: 2, Reasoning: 4}, budget.Tokens{Input: 10, Output: 5, CachedInput: 3, CacheWrite: 2, Reasoning: 4}},
		{budget.Tokens{Input: 10, Output: 5, CachedInput: 12, CacheWrite: 2, Reasoning: 9}, budget.Tokens{Input: 10, Output: 5, CachedInput: 10, Reasoning: 5}},
		{budget.Tokens{Input: 10, CachedInput: 6, CacheWrite: 6}, budget.Tokens{Input: 10, CachedInput: 6, CacheWrite: 4}},
		{budget.Tokens{Input: -1, Output: -1, CachedInput: -1, CacheWrite: -1, Reasoning: -1}, budget.Tokens{}},
		{budget.Tokens{Input: math.MaxInt64, CachedInput: math.MaxInt64, CacheWrite: math.MaxInt64}, budget.Tokens{Input: math.MaxInt64, CachedInput: math.MaxInt64}},
	}
	for _, c := range cases {
		if got := c.in.Normalized(); got != c.want {
			t.Errorf("%+v.Normalized() = %+v, want %+v", c.in, got, c.want)
		}
	}
}

func TestClassPricesAreBounded(t *testing.T) {
	t.Parallel()
	for _, p := range []budget.Price{
		{CachedInputPerMTok: ptr(-1)},
		{CacheWritePerMTok: ptr(budget.MaxPricePerMTok + 1)},
		{ReasoningPerMTok: ptr(math.MaxInt64)},
	} {
		if err := p.Valid(); !errors.Is(err, budget.ErrInvalid) {
			t.Errorf("%+v.Valid() = %v, want ErrInvalid", p, err)
		}
	}
	if err := (budget.Price{CachedInputPerMTok: ptr(0), ReasoningPerMTok: ptr(budget.MaxPricePerMTok)}).Valid(); err != nil {
		t.Errorf("prices within the bounds refused: %v", err)
	}
}

// The token classes reach the usage rows by both settlement statements
// (one settlement, a batch), the report sums them, and the table refuses a
// row whose classes exceed their totals, as Settlement refuses one.
func TestUsageRowsKeepTheClasses(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, store := limited(t, budget.Limit{OwnerID: "acme", Period: budget.PeriodNone, TotalMicros: 1_000_000})
	settle := func(i int) budget.Settlement {
		id := newID(t, pool)
		if err := reserve(ctx, pool, budget.Reservation{TaskID: id, OwnerID: "acme", Amount: 10_000, At: time.Now()}); err != nil {
			t.Fatal(err)
		}
		return budget.Settlement{TaskID: id, Model: "m", InputTokens: 1000 * int64(i), OutputTokens: 100 * int64(i),
			CachedInputTokens: 300 * int64(i), CacheWriteTokens: 200 * int64(i), ReasoningTokens: 50 * int64(i),
			Source: budget.SourceReported, CostMicros: 7 * int64(i)}
	}
	one := settle(1)
	if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		_, err := budget.SettleTx(ctx, tx, one, nil)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := settleMany(ctx, pool, []budget.Settlement{settle(2), settle(3)}, nil); err != nil {
		t.Fatal(err)
	}
	rep, err := store.Usage(ctx, budget.UsageFilter{From: time.Now().Add(-time.Hour), To: time.Now().Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	want := budget.UsageTotals{Tasks: 3, InputTokens: 6000, OutputTokens: 600, CostMicros: 42, ChargedMicros: 42, ReportedMicros: 42,
		CachedInputTokens: 1800, CacheWriteTokens: 1200, ReasoningTokens: 300}
	if diff := cmp.Diff(want, rep.Totals); diff != "" {
		t.Errorf("totals mismatch (-want +got):\n%s", diff)
	}
	for _, r := range rep.Rows {
		n := r.InputTokens / 1000
		if r.CachedInputTokens != 300*n || r.CacheWriteTokens != 200*n || r.ReasoningTokens != 50*n {
			t.Errorf("row %+v: classes not those settled", r)
		}
	}
	if n := sumOf(t, pool, `SELECT count(*) FROM usage_records WHERE cached_input_tokens + cache_write_tokens > input_tokens OR reasoning_tokens > output_tokens`); n != 0 {
		t.Errorf("%d usage rows with classes beyond their totals", n)
	}

	bad := settle(1)
	bad.ReasoningTokens = bad.OutputTokens + 1
	if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		_, err := budget.SettleTx(ctx, tx, bad, nil)
		return err
	}); !errors.Is(err, budget.ErrInvalid) {
		t.Errorf("settlement with reasoning beyond the output: %v, want ErrInvalid", err)
	}
	for _, cols := range []string{"cached_input_tokens = 900, cache_write_tokens = 200", "reasoning_tokens = 101", "cache_write_tokens = -1"} {
		_, err := pool.Exec(ctx, `UPDATE usage_records SET `+cols+` WHERE task_id = $1`, one.TaskID)
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || pe.ConstraintName != "usage_records_classes" {
			t.Errorf("SET %s: %v, want a violation of usage_records_classes", cols, err)
		}
	}
}
