package budget

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// UsageRow is one settled task.
type UsageRow struct {
	TaskID          string    `db:"task_id"`
	OwnerID         string    `db:"owner_id"`
	Model           string    `db:"model"`
	InputTokens     int64     `db:"input_tokens"`
	OutputTokens    int64     `db:"output_tokens"`
	Source          Source    `db:"source"`
	CostMicros      int64     `db:"cost_micros"`
	ChargedMicros   int64     `db:"charged_micros"`
	ShortfallMicros int64     `db:"shortfall_micros"`
	SettledAt       time.Time `db:"settled_at"`
}

// UsageTotals sums a report's rows. Reported and estimated cost are kept
// apart so finance can see how much of the spend rests on estimates.
type UsageTotals struct {
	Tasks           int64
	InputTokens     int64
	OutputTokens    int64
	CostMicros      int64
	ChargedMicros   int64
	ShortfallMicros int64
	ReportedMicros  int64
	EstimatedMicros int64
}

// UsageFilter selects settled usage in [From, To). An empty OwnerID means
// every owner.
type UsageFilter struct {
	OwnerID string
	From    time.Time
	To      time.Time
}

// UsageReport is the settled usage in a window, rows oldest first.
type UsageReport struct {
	Rows   []UsageRow
	Totals UsageTotals
}

// Usage returns settled usage for the filter. Totals are computed in SQL
// over the same rows, so they equal the sum of the rows to the micro.
func (s *Store) Usage(ctx context.Context, f UsageFilter) (UsageReport, error) {
	if !f.From.Before(f.To) {
		return UsageReport{}, fmt.Errorf("%w: from must be before to", ErrInvalid)
	}
	var rep UsageReport
	// One repeatable-read snapshot for rows and totals, so a settlement
	// landing between the two queries cannot make them disagree.
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		var err error
		rep, err = usageTx(ctx, tx, f)
		return err
	})
	if err != nil {
		return UsageReport{}, fmt.Errorf("budget: usage: %w", err)
	}
	return rep, nil
}

func usageTx(ctx context.Context, tx pgx.Tx, f UsageFilter) (UsageReport, error) {
	rows, err := tx.Query(ctx, `
		SELECT task_id::text AS task_id, owner_id, model, input_tokens, output_tokens, source,
		       cost_micros, charged_micros, shortfall_micros, settled_at
		FROM usage_records
		WHERE settled_at >= $1 AND settled_at < $2 AND ($3 = '' OR owner_id = $3)
		ORDER BY settled_at, task_id`, f.From, f.To, f.OwnerID)
	if err != nil {
		return UsageReport{}, err
	}
	list, err := pgx.CollectRows(rows, pgx.RowToStructByName[UsageRow])
	if err != nil {
		return UsageReport{}, err
	}
	var t UsageTotals
	err = tx.QueryRow(ctx, `
		SELECT count(*), COALESCE(sum(input_tokens), 0), COALESCE(sum(output_tokens), 0),
		       COALESCE(sum(cost_micros), 0), COALESCE(sum(charged_micros), 0), COALESCE(sum(shortfall_micros), 0),
		       COALESCE(sum(cost_micros) FILTER (WHERE source = 'reported'), 0),
		       COALESCE(sum(cost_micros) FILTER (WHERE source = 'estimated'), 0)
		FROM usage_records
		WHERE settled_at >= $1 AND settled_at < $2 AND ($3 = '' OR owner_id = $3)`, f.From, f.To, f.OwnerID).
		Scan(&t.Tasks, &t.InputTokens, &t.OutputTokens, &t.CostMicros, &t.ChargedMicros, &t.ShortfallMicros,
			&t.ReportedMicros, &t.EstimatedMicros)
	if err != nil {
		return UsageReport{}, err
	}
	if list == nil {
		list = []UsageRow{}
	}
	return UsageReport{Rows: list, Totals: t}, nil
}
