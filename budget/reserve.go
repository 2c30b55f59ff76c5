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
	ids, err := balanceRowsTx(ctx, tx, r.OwnerID, r.Workload, r.At)
	if errors.Is(err, ErrNotFound) {
		return ErrInsufficient
	}
	if err != nil {
		return fmt.Errorf("budget: reserve: %w", err)
	}
	// One statement: the rows locked in id order (one lock order everywhere,
	// whatever order a scan would meet them in: no deadlocks between
	// reservations), the conditional UPDATE, and the rows recording the
	// reservation. It locks balance rows every reservation of the owner
	// needs, so it comes last in the caller's transaction and the lock is
	// held only until commit. When a row cannot cover the amount the
	// records are written all the same and the caller rolls them back.
	var updated int
	err = tx.QueryRow(ctx, `
		WITH locked AS (
			SELECT id FROM budget_periods WHERE id = ANY($5) ORDER BY id FOR NO KEY UPDATE
		), p AS (
			UPDATE budget_periods
			SET reserved_micros = reserved_micros + $3, updated_at = now()
			WHERE id IN (SELECT id FROM locked) AND total_micros - reserved_micros - spent_micros >= $3
			RETURNING id, owner_id, workload
		), res AS (
			INSERT INTO budget_reservations (task_id, owner_id, amount_micros, estimated, budget_period_ids)
			VALUES ($1, $2, $3, $4, $5)
		), l AS (
			INSERT INTO budget_ledger (owner_id, workload, budget_period_id, task_id, kind, amount_micros)
			SELECT owner_id, workload, id, $1, 'reserve', $3 FROM p
		)
		SELECT count(*) FROM p`,
		r.TaskID, r.OwnerID, r.Amount, r.Estimated, ids).Scan(&updated)
	if err != nil {
		return fmt.Errorf("budget: reserve: %w", err)
	}
	if updated != len(ids) {
		return ErrInsufficient // the caller rolls back, the rows above with it
	}
	return nil
}

// balanceRowsTx returns the balance rows a reservation at `at` holds: the
// owner's, and the workload's if it has a cap. Usually one query; a period
// not opened yet is opened from its limit (openPeriodTx). ErrNotFound: the
// owner has no budget.
func balanceRowsTx(ctx context.Context, tx pgx.Tx, owner, workload string, at time.Time) ([]int64, error) {
	daily, _ := PeriodDaily.Bounds(at)
	monthly, _ := PeriodMonthly.Bounds(at)
	none, _ := PeriodNone.Bounds(at)
	rows, err := tx.Query(ctx, `
		SELECT l.workload, p.id
		FROM budget_limits l
		LEFT JOIN budget_periods p ON p.owner_id = l.owner_id AND p.workload = l.workload
		     AND p.period_start = CASE l.period WHEN 'daily' THEN $3::timestamptz WHEN 'monthly' THEN $4::timestamptz ELSE $5::timestamptz END
		WHERE l.owner_id = $1 AND l.workload IN ('', $2)`, owner, workload, daily, monthly, none)
	if err != nil {
		return nil, err
	}
	type row struct {
		workload string
		id       *int64
	}
	list, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (row, error) {
		var x row
		return x, r.Scan(&x.workload, &x.id)
	})
	if err != nil {
		return nil, err
	}
	var ids []int64
	ownerCapped := false
	for _, x := range list {
		ownerCapped = ownerCapped || x.workload == ""
		if x.id == nil {
			id, _, err := openPeriodTx(ctx, tx, owner, x.workload, at, "system")
			if err != nil {
				return nil, err
			}
			x.id = &id
		}
		ids = append(ids, *x.id)
	}
	if !ownerCapped {
		return nil, ErrNotFound
	}
	return ids, nil
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
	// Two statements. The first closes the reservation and locks its
	// balance rows, FOR NO KEY UPDATE rather than FOR UPDATE: a reservation
	// of the same owner holds a KEY SHARE lock on these rows (its ledger
	// row's foreign key) before it updates them, and FOR UPDATE would queue
	// behind that lock while holding the row's tuple lock the reservation's
	// UPDATE then needs: a deadlock, seen under load.
	var owner string
	var amount, headroom int64
	var ids []int64
	err := tx.QueryRow(ctx, `
		WITH r AS (
			UPDATE budget_reservations SET state = 'settled', closed_at = now()
			WHERE task_id = $1 AND state = 'held'
			RETURNING owner_id, amount_micros, budget_period_ids
		), p AS (
			SELECT * FROM budget_periods WHERE id IN (SELECT unnest(budget_period_ids) FROM r) ORDER BY id FOR NO KEY UPDATE
		)
		SELECT r.owner_id, r.amount_micros, r.budget_period_ids,
		       (SELECT min(total_micros - spent_micros - (reserved_micros - r.amount_micros)) FROM p)
		FROM r`, s.TaskID).Scan(&owner, &amount, &ids, &headroom)
	if errors.Is(err, pgx.ErrNoRows) {
		return Settled{}, ErrNotFound
	}
	if err != nil {
		return Settled{}, fmt.Errorf("budget: settle: %w", err)
	}
	slices.Sort(ids)
	charged := min(s.CostMicros, headroom)
	out := Settled{ChargedMicros: charged, ShortfallMicros: s.CostMicros - charged}
	// The second moves the money, writes the ledger and usage rows, and
	// records the alert thresholds the new balances crossed (each once per
	// period: the unique (row, threshold) key decides between instances).
	rows, err := tx.Query(ctx, `
		WITH p AS (
			UPDATE budget_periods SET reserved_micros = reserved_micros - $3, spent_micros = spent_micros + $4, updated_at = now()
			WHERE id = ANY($5) RETURNING id, owner_id, workload, period_start, spent_micros, total_micros
		), l AS (
			INSERT INTO budget_ledger (owner_id, workload, budget_period_id, task_id, kind, amount_micros,
			                           usage_source, model, input_tokens, output_tokens)
			SELECT owner_id, workload, id, $2, k.kind, k.amount, $8, $6, $7, $9
			FROM p, (VALUES ('release', $3::bigint), ('settle', $4::bigint)) AS k (kind, amount)
		), u AS (
			INSERT INTO usage_records (task_id, owner_id, workload, model, input_tokens, output_tokens, source,
			                           cost_micros, charged_micros, shortfall_micros)
			VALUES ($2, $1, $11, $6, $7, $9, $8, $10, $4, $12)
		), fired AS (
			INSERT INTO budget_alerts (budget_period_id, threshold_pct)
			SELECT p.id, t.pct FROM p, unnest($13::int[]) AS t (pct)
			WHERE p.total_micros > 0 AND p.spent_micros * 100 >= t.pct::bigint * p.total_micros
			ON CONFLICT DO NOTHING
			RETURNING budget_period_id, threshold_pct
		)
		SELECT p.owner_id, p.workload, p.period_start, f.threshold_pct, p.spent_micros, p.total_micros
		FROM fired f JOIN p ON p.id = f.budget_period_id
		ORDER BY p.id, f.threshold_pct`,
		owner, s.TaskID, amount, charged, ids, s.Model, s.InputTokens, string(s.Source), s.OutputTokens,
		s.CostMicros, s.Workload, out.ShortfallMicros, thresholds)
	if err != nil {
		return Settled{}, fmt.Errorf("budget: record settlement: %w", err)
	}
	out.Alerts, err = collectAlerts(rows)
	if err != nil {
		return Settled{}, fmt.Errorf("budget: record settlement: %w", err)
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

// collectAlerts reads the alerts SettleTx selects: those its settlement
// crossed, each recorded once per period by the unique (row, threshold) key.
func collectAlerts(rows pgx.Rows) ([]Alert, error) {
	list, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Alert, error) {
		var a Alert
		return a, r.Scan(&a.OwnerID, &a.Workload, &a.PeriodStart, &a.ThresholdPct, &a.SpentMicros, &a.TotalMicros)
	})
	if len(list) == 0 {
		list = nil
	}
	return list, err
}
