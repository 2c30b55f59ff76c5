package budget

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Mismatch is a balance that the ledger does not explain.
type Mismatch struct {
	OwnerID     string
	Workload    string
	PeriodStart time.Time
	What        string // total, reserved, spent, held, or charged
	Balance     int64  // what the balance row (or usage) says
	Ledger      int64  // what the ledger (or reservations) says
}

func (m Mismatch) String() string {
	who := m.OwnerID
	if m.Workload != "" {
		who += "/" + m.Workload
	}
	return fmt.Sprintf("owner %s period %s: %s is %d but the ledger says %d",
		who, m.PeriodStart.Format(time.DateOnly), m.What, m.Balance, m.Ledger)
}

// Verify proves the balances from the ledger, in one snapshot: for every
// balance row, total = Σ adjust + Σ topup, reserved = Σ reserve − Σ release
// = the held reservations on it, and spent = Σ settle; and for every owner
// the settled usage charged equals what its own budget rows spent. An empty
// result means every micro is accounted for.
func (s *Store) Verify(ctx context.Context) ([]Mismatch, error) {
	var out []Mismatch
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `
			WITH l AS (
				SELECT budget_period_id AS id,
				       COALESCE(sum(amount_micros) FILTER (WHERE kind IN ('adjust', 'topup')), 0) AS total,
				       COALESCE(sum(amount_micros) FILTER (WHERE kind = 'reserve'), 0)
				         - COALESCE(sum(amount_micros) FILTER (WHERE kind = 'release'), 0) AS reserved,
				       COALESCE(sum(amount_micros) FILTER (WHERE kind = 'settle'), 0) AS spent
				FROM budget_ledger GROUP BY budget_period_id
			), h AS (
				SELECT unnest(budget_period_ids) AS id, sum(amount_micros) AS held
				FROM budget_reservations WHERE state = 'held' GROUP BY 1
			)
			SELECT p.owner_id, p.workload, p.period_start, w.what, w.balance, w.ledger
			FROM budget_periods p
			LEFT JOIN l ON l.id = p.id
			LEFT JOIN h ON h.id = p.id
			CROSS JOIN LATERAL (VALUES
				('total', p.total_micros, COALESCE(l.total, 0)),
				('reserved', p.reserved_micros, COALESCE(l.reserved, 0)),
				('held', p.reserved_micros, COALESCE(h.held, 0)),
				('spent', p.spent_micros, COALESCE(l.spent, 0))
			) AS w (what, balance, ledger)
			WHERE w.balance <> w.ledger
			ORDER BY p.owner_id, p.workload, p.period_start, w.what`)
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (Mismatch, error) {
			var m Mismatch
			return m, r.Scan(&m.OwnerID, &m.Workload, &m.PeriodStart, &m.What, &m.Balance, &m.Ledger)
		})
		if err != nil {
			return err
		}
		rows, err = tx.Query(ctx, `
			WITH u AS (SELECT owner_id, sum(charged_micros) AS charged FROM usage_records GROUP BY owner_id),
			     b AS (SELECT owner_id, sum(spent_micros) AS spent FROM budget_periods WHERE workload = '' GROUP BY owner_id)
			SELECT COALESCE(u.owner_id, b.owner_id), COALESCE(u.charged, 0), COALESCE(b.spent, 0)
			FROM u FULL JOIN b ON b.owner_id = u.owner_id
			WHERE COALESCE(u.charged, 0) <> COALESCE(b.spent, 0)`)
		if err != nil {
			return err
		}
		more, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Mismatch, error) {
			m := Mismatch{What: "charged"}
			return m, r.Scan(&m.OwnerID, &m.Balance, &m.Ledger)
		})
		out = append(out, more...)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("budget: verify: %w", err)
	}
	return out, nil
}
