package budget

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Mismatch is a balance that the ledger does not explain, or a task whose
// money was not closed as its end requires.
type Mismatch struct {
	OwnerID     string
	Workload    string
	PeriodStart time.Time
	// What: total, reserved, spent, held or charged (a balance), or a task
	// kind, "unsettled" or "released_after_call" (below).
	What    string
	Balance int64 // what the balance row (or usage) says; for a task, its reservation
	Ledger  int64 // what the ledger (or reservations) says; for a task, what it was charged
	TaskID  string
	State   string // for a task: its status and its reservation's state, or the journal entry's state
}

// The task kinds of Mismatch.
const (
	// whatUnsettled: a finished task whose reservation is still held, or
	// a succeeded task whose reservation was not settled (its cost never
	// charged).
	whatUnsettled = "unsettled"
	// whatReleasedAfterCall: a journal entry of a call that may have been
	// made and billed (sent, ambiguous or succeeded) on a task whose
	// reservation was released uncharged.
	whatReleasedAfterCall = "released_after_call"
)

func (m Mismatch) String() string {
	who := m.OwnerID
	if m.Workload != "" {
		who += "/" + m.Workload
	}
	switch m.What {
	case whatUnsettled:
		return fmt.Sprintf("owner %s task %s: finished without a settlement (%s), reservation %d, charged %d",
			who, m.TaskID, m.State, m.Balance, m.Ledger)
	case whatReleasedAfterCall:
		return fmt.Sprintf("owner %s task %s: a journal entry %s (a call that may have been billed), but its reservation of %d was released uncharged",
			who, m.TaskID, m.State, m.Balance)
	}
	return fmt.Sprintf("owner %s period %s: %s is %d but the ledger says %d",
		who, m.PeriodStart.Format(time.DateOnly), m.What, m.Balance, m.Ledger)
}

// clampBigint is the SQL expression x, a numeric, as a bigint saturated at
// the type's bounds: a sum of bigints is numeric and may not fit the
// int64 it is read into.
func clampBigint(x string) string {
	return `LEAST(GREATEST(` + x + `, -9223372036854775808), 9223372036854775807)::bigint`
}

// Verify proves the balances from the ledger, in one snapshot: for every
// balance row, total = Σ adjust + Σ topup, reserved = Σ reserve − Σ release
// = the held reservations on it, and spent = Σ settle; and for every owner
// the settled usage charged equals what its own budget rows spent. It also
// checks every task's money against its end: no finished task left
// unsettled ("unsettled"), and no call that may have been billed on a
// task whose reservation was released uncharged ("released_after_call").
// An empty result means every micro is accounted for.
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
			SELECT p.owner_id, p.workload, p.period_start, w.what, w.balance, `+clampBigint("w.ledger")+`
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
			SELECT COALESCE(u.owner_id, b.owner_id), `+clampBigint("COALESCE(u.charged, 0)")+`, `+clampBigint("COALESCE(b.spent, 0)")+`
			FROM u FULL JOIN b ON b.owner_id = u.owner_id
			WHERE COALESCE(u.charged, 0) <> COALESCE(b.spent, 0)`)
		if err != nil {
			return err
		}
		more, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Mismatch, error) {
			m := Mismatch{What: "charged"}
			return m, r.Scan(&m.OwnerID, &m.Balance, &m.Ledger)
		})
		if err != nil {
			return err
		}
		out = append(out, more...)
		rows, err = tx.Query(ctx, tasksMoneySQL)
		if err != nil {
			return err
		}
		more, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (Mismatch, error) {
			var m Mismatch
			return m, r.Scan(&m.OwnerID, &m.What, &m.TaskID, &m.State, &m.Balance, &m.Ledger)
		})
		out = append(out, more...)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("budget: verify: %w", err)
	}
	return out, nil
}

// tasksMoneySQL finds the tasks whose money disagrees with their end (the
// task kinds of Mismatch): a finished task whose reservation is still held
// or missing, or a succeeded one whose reservation was not settled; and a
// journal entry of a call that may have been made (sent, ambiguous,
// succeeded) on a task whose reservation was released, charging nothing.
// Every path that ends a task closes its reservation in the same
// transaction (settled after a call that may have been billed, released
// only when none was), so on a healthy database it returns nothing.
const tasksMoneySQL = `
	SELECT t.owner_id, 'unsettled', t.id::text, t.status || ', reservation ' || COALESCE(r.state, 'missing'),
	       COALESCE(r.amount_micros, 0), COALESCE(u.charged_micros, 0)
	FROM tasks t
	LEFT JOIN budget_reservations r ON r.task_id = t.id
	LEFT JOIN usage_records u ON u.task_id = t.id
	WHERE t.finished_at IS NOT NULL
	  AND (r.task_id IS NULL OR r.state = 'held' OR (t.status = 'succeeded' AND r.state <> 'settled'))
	UNION ALL
	SELECT r.owner_id, 'released_after_call', r.task_id::text, min(a.state), r.amount_micros, 0
	FROM budget_reservations r
	JOIN task_attempts a ON a.task_id = r.task_id AND a.state IN ('sent', 'ambiguous', 'succeeded')
	WHERE r.state = 'released'
	GROUP BY r.owner_id, r.task_id, r.amount_micros
	ORDER BY 1, 3`
