package budget

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
)

// Reservation is money held for one task while it runs.
type Reservation struct {
	TaskID    string
	OwnerID   string
	Workload  string // the API key's workload; "" for none
	Amount    int64
	Estimated bool      // the amount rests on a default price, not a configured one
	At        time.Time // decides the period charged
}

// ReserveTx holds r.Amount on the owner's budget and, if the workload has a
// cap, on the workload's budget too, with one conditional UPDATE over both
// balance rows: it succeeds only if each covers the amount at the moment it
// runs. It returns ErrInsufficient when either does not (or when the owner
// has no budget); the caller must then roll back, which undoes everything.
func ReserveTx(ctx context.Context, tx pgx.Tx, r Reservation) error {
	if r.Amount <= 0 {
		return fmt.Errorf("%w: reservation must be > 0, got %d", ErrInvalid, r.Amount)
	}
	ownerRow, _, err := openPeriodTx(ctx, tx, r.OwnerID, "", r.At, "system")
	if errors.Is(err, ErrNotFound) {
		return ErrInsufficient
	}
	if err != nil {
		return fmt.Errorf("budget: reserve: %w", err)
	}
	ids := []int64{ownerRow}
	if r.Workload != "" {
		wl, _, err := openPeriodTx(ctx, tx, r.OwnerID, r.Workload, r.At, "system")
		switch {
		case err == nil:
			ids = append(ids, wl)
		case !errors.Is(err, ErrNotFound): // a workload without a cap has only the owner's
			return fmt.Errorf("budget: reserve: %w", err)
		}
	}
	slices.Sort(ids) // one lock order everywhere: no deadlocks between reservations
	// The rows recording the reservation first, the conditional UPDATE last:
	// it locks balance rows every reservation of the owner needs, and the
	// lock is then held only until the caller commits.
	_, err = tx.Exec(ctx, `
		WITH res AS (
			INSERT INTO budget_reservations (task_id, owner_id, amount_micros, estimated, budget_period_ids)
			VALUES ($1, $2, $3, $4, $5)
		)
		INSERT INTO budget_ledger (owner_id, workload, budget_period_id, task_id, kind, amount_micros)
		SELECT owner_id, workload, id, $1, 'reserve', $3 FROM budget_periods WHERE id = ANY($5)`,
		r.TaskID, r.OwnerID, r.Amount, r.Estimated, ids)
	if err != nil {
		return fmt.Errorf("budget: record reservation: %w", err)
	}
	tag, err := tx.Exec(ctx, `
		UPDATE budget_periods
		SET reserved_micros = reserved_micros + $2, updated_at = now()
		WHERE id = ANY($1) AND total_micros - reserved_micros - spent_micros >= $2`, ids, r.Amount)
	if err != nil {
		return fmt.Errorf("budget: reserve: %w", err)
	}
	if tag.RowsAffected() != int64(len(ids)) {
		return ErrInsufficient // the caller rolls back, the rows above with it
	}
	return nil
}

// Source says where a usage figure came from.
type Source string

// Usage sources: the provider's own report, Tollgate's estimate when the
// provider reported none, or an upper bound when attempts were ambiguous.
const (
	SourceReported  Source = "reported"
	SourceEstimated Source = "estimated"
	// SourcePossiblyCharged: the settlement includes attempts whose outcome
	// is unknown (the provider may have run and billed them).
	SourcePossiblyCharged Source = "possibly_charged"
)

// Settlement is the actual cost of a finished task.
type Settlement struct {
	TaskID       string
	Workload     string
	Model        string
	InputTokens  int64
	OutputTokens int64
	Source       Source
	CostMicros   int64
}

// Settled is what a settlement moved, and the alerts it crossed.
type Settled struct {
	ChargedMicros   int64 // moved to spent
	ShortfallMicros int64 // cost the budget could not cover, recorded, never silent
	Alerts          []Alert
}

// SettleTx closes the task's held reservation: the actual cost moves to
// spent on every balance row the reservation held, the rest is released,
// and a usage row records the settlement. A cost above the reservation is
// charged up to the tightest row's remaining balance; anything beyond is
// recorded as shortfall. Alerts are the thresholds this settlement crossed,
// to deliver once the transaction commits. It returns ErrNotFound when the
// task holds no open reservation (already closed).
func SettleTx(ctx context.Context, tx pgx.Tx, s Settlement, thresholds []int) (Settled, error) {
	if s.CostMicros < 0 || s.InputTokens < 0 || s.OutputTokens < 0 {
		return Settled{}, fmt.Errorf("%w: negative settlement", ErrInvalid)
	}
	owner, amount, ids, err := closeReservation(ctx, tx, s.TaskID, "settled")
	if err != nil {
		return Settled{}, err
	}
	// FOR NO KEY UPDATE, not FOR UPDATE: a reservation of the same owner
	// holds a KEY SHARE lock on these rows (its ledger row's foreign key)
	// before it updates them, and FOR UPDATE would queue behind that lock
	// while holding the row's tuple lock the reservation's UPDATE then needs:
	// a deadlock, seen under load.
	var headroom int64
	err = tx.QueryRow(ctx, `
		SELECT min(total_micros - spent_micros - (reserved_micros - $2))
		FROM (SELECT * FROM budget_periods WHERE id = ANY($1) ORDER BY id FOR NO KEY UPDATE) p`, ids, amount).Scan(&headroom)
	if err != nil {
		return Settled{}, fmt.Errorf("budget: settle: %w", err)
	}
	charged := min(s.CostMicros, headroom)
	out := Settled{ChargedMicros: charged, ShortfallMicros: s.CostMicros - charged}
	_, err = tx.Exec(ctx, `
		WITH p AS (
			UPDATE budget_periods SET reserved_micros = reserved_micros - $3, spent_micros = spent_micros + $4, updated_at = now()
			WHERE id = ANY($5) RETURNING id, owner_id, workload
		), l AS (
			INSERT INTO budget_ledger (owner_id, workload, budget_period_id, task_id, kind, amount_micros,
			                           usage_source, model, input_tokens, output_tokens)
			SELECT owner_id, workload, id, $2, k.kind, k.amount, $8, $6, $7, $9
			FROM p, (VALUES ('release', $3::bigint), ('settle', $4::bigint)) AS k (kind, amount)
		)
		INSERT INTO usage_records (task_id, owner_id, workload, model, input_tokens, output_tokens, source,
		                           cost_micros, charged_micros, shortfall_micros)
		VALUES ($2, $1, $11, $6, $7, $9, $8, $10, $4, $12)`,
		owner, s.TaskID, amount, charged, ids, s.Model, s.InputTokens, string(s.Source), s.OutputTokens,
		s.CostMicros, s.Workload, out.ShortfallMicros)
	if err != nil {
		return Settled{}, fmt.Errorf("budget: record settlement: %w", err)
	}
	if out.Alerts, err = crossedTx(ctx, tx, ids, thresholds); err != nil {
		return Settled{}, err
	}
	return out, nil
}

// ReleaseTx returns the task's whole held reservation to every balance row
// it held: the task failed or was canceled before spending anything we know
// of. It returns ErrNotFound when no reservation is held.
func ReleaseTx(ctx context.Context, tx pgx.Tx, taskID string) error {
	_, amount, ids, err := closeReservation(ctx, tx, taskID, "released")
	if err != nil {
		return err
	}
	_, err = tx.Exec(ctx, `
		WITH p AS (
			UPDATE budget_periods SET reserved_micros = reserved_micros - $2, updated_at = now()
			WHERE id = ANY($3) RETURNING id, owner_id, workload
		)
		INSERT INTO budget_ledger (owner_id, workload, budget_period_id, task_id, kind, amount_micros)
		SELECT owner_id, workload, id, $1, 'release', $2 FROM p`, taskID, amount, ids)
	if err != nil {
		return fmt.Errorf("budget: release: %w", err)
	}
	return nil
}

func closeReservation(ctx context.Context, tx pgx.Tx, taskID, state string) (owner string, amount int64, ids []int64, err error) {
	err = tx.QueryRow(ctx, `
		UPDATE budget_reservations SET state = $2, closed_at = now()
		WHERE task_id = $1 AND state = 'held'
		RETURNING owner_id, amount_micros, budget_period_ids`, taskID, state).Scan(&owner, &amount, &ids)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", 0, nil, ErrNotFound
	}
	if err != nil {
		return "", 0, nil, fmt.Errorf("budget: close reservation: %w", err)
	}
	slices.Sort(ids)
	return owner, amount, ids, nil
}

// Alert is a budget crossing a threshold of its period's total.
type Alert struct {
	OwnerID      string    `json:"owner_id"`
	Workload     string    `json:"workload"`
	PeriodStart  time.Time `json:"period_start"`
	ThresholdPct int       `json:"threshold_pct"`
	SpentMicros  int64     `json:"spent_micros"`
	TotalMicros  int64     `json:"total_micros"`
}

// crossedTx records the thresholds (percent of total, by spent money) that
// the rows have reached and returns those recorded now for the first time:
// the unique (row, threshold) key makes each fire once per period, however
// many instances settle concurrently.
func crossedTx(ctx context.Context, tx pgx.Tx, ids []int64, thresholds []int) ([]Alert, error) {
	if len(thresholds) == 0 {
		return nil, nil
	}
	rows, err := tx.Query(ctx, `
		WITH fired AS (
			INSERT INTO budget_alerts (budget_period_id, threshold_pct)
			SELECT p.id, t.pct FROM budget_periods p, unnest($2::int[]) AS t (pct)
			WHERE p.id = ANY($1) AND p.total_micros > 0 AND p.spent_micros * 100 >= t.pct::bigint * p.total_micros
			ON CONFLICT DO NOTHING
			RETURNING budget_period_id, threshold_pct
		)
		SELECT p.owner_id, p.workload, p.period_start, f.threshold_pct, p.spent_micros, p.total_micros
		FROM fired f JOIN budget_periods p ON p.id = f.budget_period_id
		ORDER BY p.id, f.threshold_pct`, ids, thresholds)
	if err != nil {
		return nil, fmt.Errorf("budget: alerts: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Alert, error) {
		var a Alert
		return a, r.Scan(&a.OwnerID, &a.Workload, &a.PeriodStart, &a.ThresholdPct, &a.SpentMicros, &a.TotalMicros)
	})
}
