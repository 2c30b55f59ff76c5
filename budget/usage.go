package budget

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// UsageRow is one settled task.
type UsageRow struct {
	TaskID          string    `db:"task_id"`
	OwnerID         string    `db:"owner_id"`
	Workload        string    `db:"workload"`
	Model           string    `db:"model"`
	InputTokens     int64     `db:"input_tokens"`
	OutputTokens    int64     `db:"output_tokens"`
	Source          Source    `db:"source"`
	CostMicros      int64     `db:"cost_micros"`
	ChargedMicros   int64     `db:"charged_micros"`
	ShortfallMicros int64     `db:"shortfall_micros"`
	SettledAt       time.Time `db:"settled_at"`
	// The classes, parts of the totals (see Tokens).
	CachedInputTokens int64 `db:"cached_input_tokens"`
	CacheWriteTokens  int64 `db:"cache_write_tokens"`
	ReasoningTokens   int64 `db:"reasoning_tokens"`
}

// UsageTotals sums settled usage. Cost is split by source so finance sees
// how much of the spend rests on estimates or on possibly charged attempts.
type UsageTotals struct {
	Tasks                 int64 `db:"tasks"`
	InputTokens           int64 `db:"input_tokens"`
	OutputTokens          int64 `db:"output_tokens"`
	CostMicros            int64 `db:"cost_micros"`
	ChargedMicros         int64 `db:"charged_micros"`
	ShortfallMicros       int64 `db:"shortfall_micros"`
	ReportedMicros        int64 `db:"reported_micros"`
	EstimatedMicros       int64 `db:"estimated_micros"`
	PossiblyChargedMicros int64 `db:"possibly_charged_micros"`
	CachedInputTokens     int64 `db:"cached_input_tokens"`
	CacheWriteTokens      int64 `db:"cache_write_tokens"`
	ReasoningTokens       int64 `db:"reasoning_tokens"`
}

// UsageGroup is the totals of one group of a grouped report. Only the
// fields grouped by are set.
type UsageGroup struct {
	OwnerID     *string    `db:"owner_id"`
	Workload    *string    `db:"workload"`
	Model       *string    `db:"model"`
	PeriodStart *time.Time `db:"period_start"`
	UsageTotals
}

// Grouping dimensions of a usage report.
const (
	groupOwner    = "owner"
	groupWorkload = "workload"
	groupModel    = "model"
	groupDay      = "day"
	groupMonth    = "month"
)

// UsageFilter selects settled usage in [From, To) (UTC). An empty OwnerID
// means every owner.
type UsageFilter struct {
	OwnerID string
	From    time.Time
	To      time.Time
	// GroupBy: any of owner, workload, model, and one of day or month.
	GroupBy []string
	// Limit caps the rows returned (not the totals); 0 means 1000.
	Limit int
}

// UsageReport is the settled usage in a window: rows oldest first (up to
// the limit), groups when grouping was asked for, and totals over all of it.
type UsageReport struct {
	Rows      []UsageRow
	Truncated bool // more rows matched than the limit
	Groups    []UsageGroup
	Totals    UsageTotals
}

// totalsSQL sums usage. A sum of bigints is a numeric; each is read as a
// bigint saturated at 9223372036854775807 (clampBigint), so a report never
// fails on its own size: no real window reaches that ceiling, and one
// that does shows it.
var totalsSQL = `count(*) AS tasks, ` + strings.Join([]string{
	sumAs("sum(input_tokens)", "input_tokens"),
	sumAs("sum(output_tokens)", "output_tokens"),
	sumAs("sum(cost_micros)", "cost_micros"),
	sumAs("sum(charged_micros)", "charged_micros"),
	sumAs("sum(shortfall_micros)", "shortfall_micros"),
	sumAs("sum(cost_micros) FILTER (WHERE source = 'reported')", "reported_micros"),
	sumAs("sum(cost_micros) FILTER (WHERE source = 'estimated')", "estimated_micros"),
	sumAs("sum(cost_micros) FILTER (WHERE source = 'possibly_charged')", "possibly_charged_micros"),
	sumAs("sum(cached_input_tokens)", "cached_input_tokens"),
	sumAs("sum(cache_write_tokens)", "cache_write_tokens"),
	sumAs("sum(reasoning_tokens)", "reasoning_tokens"),
}, ", ")

func sumAs(sum, name string) string { return clampBigint("COALESCE("+sum+", 0)") + " AS " + name }

const usageWhere = `settled_at >= $1 AND settled_at < $2 AND ($3 = '' OR owner_id = $3)`

const rowColumns = `task_id::text AS task_id, owner_id, workload, model, input_tokens, output_tokens, source,
	cost_micros, charged_micros, shortfall_micros, settled_at, cached_input_tokens, cache_write_tokens, reasoning_tokens`

func (f UsageFilter) validate() error {
	if !f.From.Before(f.To) {
		return invalid("from must be before to")
	}
	periods := 0
	for _, g := range f.GroupBy {
		switch g {
		case groupOwner, groupWorkload, groupModel:
		case groupDay, groupMonth:
			periods++
		default:
			return invalid("cannot group by %q (owner, workload, model, day, month)", g)
		}
	}
	if periods > 1 {
		return invalid("group by day or month, not both")
	}
	return nil
}

// Usage returns settled usage for the filter. Rows, groups and totals come
// from one repeatable-read snapshot and the same WHERE clause, so totals
// equal the sum of the rows (and of the groups) to the micro; with groups,
// the totals are their sum.
func (s *Store) Usage(ctx context.Context, f UsageFilter) (UsageReport, error) {
	if err := f.validate(); err != nil {
		return UsageReport{}, err
	}
	limit := f.Limit
	if limit <= 0 {
		limit = 1000
	}
	var rep UsageReport
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `SELECT `+rowColumns+` FROM usage_records WHERE `+usageWhere+`
			ORDER BY settled_at, task_id LIMIT $4`, f.From, f.To, f.OwnerID, limit+1)
		if err != nil {
			return err
		}
		if rep.Rows, err = pgx.CollectRows(rows, pgx.RowToStructByName[UsageRow]); err != nil {
			return err
		}
		if len(rep.Rows) > limit {
			rep.Rows, rep.Truncated = rep.Rows[:limit], true
		}
		if len(f.GroupBy) == 0 {
			rows, err = tx.Query(ctx, `SELECT `+totalsSQL+` FROM usage_records WHERE `+usageWhere, f.From, f.To, f.OwnerID)
			if err != nil {
				return err
			}
			rep.Totals, err = pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[UsageTotals])
			return err
		}
		// The groups partition the window's rows, so their sums are the
		// totals: one pass over millions of rows instead of two.
		cols := groupColumns(f.GroupBy)
		rows, err = tx.Query(ctx, `SELECT `+cols+`, `+totalsSQL+` FROM usage_records WHERE `+usageWhere+`
			GROUP BY 1, 2, 3, 4 ORDER BY 4 NULLS FIRST, 1 NULLS FIRST, 2 NULLS FIRST, 3 NULLS FIRST`, f.From, f.To, f.OwnerID)
		if err != nil {
			return err
		}
		if rep.Groups, err = pgx.CollectRows(rows, pgx.RowToStructByName[UsageGroup]); err != nil {
			return err
		}
		for _, g := range rep.Groups {
			rep.Totals.add(g.UsageTotals)
		}
		return nil
	})
	if err != nil {
		return UsageReport{}, fmt.Errorf("budget: usage: %w", err)
	}
	if rep.Rows == nil {
		rep.Rows = []UsageRow{}
	}
	return rep, nil
}

// utcDay and utcMonth are the UTC day and month a row was settled in, as
// timestamptz. They equal date_trunc(unit, settled_at, 'UTC') but are
// immutable, so the extended statistics usage_records_groups (the baseline
// migration) can be defined on them exactly as written here: with those the
// planner knows a window holds thousands of groups, not one per row, and
// aggregates in a hash table, in parallel, instead of sorting every row.
const (
	utcDay   = `(date_trunc('day', settled_at AT TIME ZONE 'UTC') AT TIME ZONE 'UTC')`
	utcMonth = `(date_trunc('month', settled_at AT TIME ZONE 'UTC') AT TIME ZONE 'UTC')`
)

// add adds o's sums to t, saturating as totalsSQL does.
func (t *UsageTotals) add(o UsageTotals) {
	t.Tasks = SaturatingAdd(t.Tasks, o.Tasks)
	t.InputTokens = SaturatingAdd(t.InputTokens, o.InputTokens)
	t.OutputTokens = SaturatingAdd(t.OutputTokens, o.OutputTokens)
	t.CostMicros = SaturatingAdd(t.CostMicros, o.CostMicros)
	t.ChargedMicros = SaturatingAdd(t.ChargedMicros, o.ChargedMicros)
	t.ShortfallMicros = SaturatingAdd(t.ShortfallMicros, o.ShortfallMicros)
	t.ReportedMicros = SaturatingAdd(t.ReportedMicros, o.ReportedMicros)
	t.EstimatedMicros = SaturatingAdd(t.EstimatedMicros, o.EstimatedMicros)
	t.PossiblyChargedMicros = SaturatingAdd(t.PossiblyChargedMicros, o.PossiblyChargedMicros)
	t.CachedInputTokens = SaturatingAdd(t.CachedInputTokens, o.CachedInputTokens)
	t.CacheWriteTokens = SaturatingAdd(t.CacheWriteTokens, o.CacheWriteTokens)
	t.ReasoningTokens = SaturatingAdd(t.ReasoningTokens, o.ReasoningTokens)
}

// groupColumns selects the grouped dimensions and NULL for the others, so
// every grouping has the same four leading columns.
func groupColumns(by []string) string {
	has := map[string]bool{}
	for _, g := range by {
		has[g] = true
	}
	col := func(on bool, expr, name string) string {
		if on {
			return expr + " AS " + name
		}
		return "NULL::text AS " + name
	}
	period := "NULL::timestamptz AS period_start"
	switch {
	case has[groupDay]:
		period = utcDay + " AS period_start"
	case has[groupMonth]:
		period = utcMonth + " AS period_start"
	}
	return strings.Join([]string{
		col(has[groupOwner], "owner_id", "owner_id"),
		col(has[groupWorkload], "workload", "workload"),
		col(has[groupModel], "model", "model"),
		period,
	}, ", ")
}

// StreamUsage calls fn for every settled row matching the filter, oldest
// first, reading them from the database as they are written out: a report
// of millions of rows never sits in memory.
func (s *Store) StreamUsage(ctx context.Context, f UsageFilter, fn func(UsageRow) error) error {
	if err := f.validate(); err != nil {
		return err
	}
	rows, err := s.pool.Query(ctx, `SELECT `+rowColumns+` FROM usage_records WHERE `+usageWhere+`
		ORDER BY settled_at, task_id`, f.From, f.To, f.OwnerID)
	if err != nil {
		return fmt.Errorf("budget: usage: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		r, err := pgx.RowToStructByName[UsageRow](rows)
		if err != nil {
			return fmt.Errorf("budget: usage: %w", err)
		}
		if err := fn(r); err != nil {
			return err
		}
	}
	return rows.Err()
}

// FormatMicros renders micros as a decimal amount with six places,
// "1.500000" for 1500000: exact, never through a float.
func FormatMicros(m int64) string {
	sign, u := "", uint64(m)
	if m < 0 {
		sign, u = "-", -uint64(m) // math.MinInt64 too: negated in uint64
	}
	return fmt.Sprintf("%s%d.%06d", sign, u/1_000_000, u%1_000_000)
}
