package budget

import (
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
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

// QueueReserve queues on b the one statement that holds every reservation
// of rs, all of one owner and at one instant (rs[i].OwnerID and rs[i].At
// are taken from rs[0]): it finds their balance rows itself (the owner's,
// and each workload's if it has a cap) and adds to each row the sum of the
// reservations it covers, if the row can cover that sum at the moment it
// runs. Sent in one pipeline with COMMIT (pipetx), it holds the rows, which
// every reservation and settlement of the owner needs, only while
// PostgreSQL runs it and commits.
//
// It opens no period. When the reservations cannot be held in full (a row
// short, an owner with no budget, a period not opened yet) the statement
// aborts the transaction, so nothing after it runs, and b's results return
// ErrInsufficient, or for a period not opened yet an error of its own: the
// period opener (BalanceRows) opens it. A batch's caller then reserves
// each member on its own, opening periods first. Every amount must be positive: the reservation's CHECK
// constraint refuses others.
func QueueReserve(b *pgx.Batch, rs ...Reservation) {
	if len(rs) == 0 {
		return
	}
	daily, monthly, none := periodStarts(rs[0].At)
	if len(rs) == 1 {
		// Scalars rather than arrays of one: no arrays to unnest.
		r := rs[0]
		b.Queue(reserveOneSQL, r.OwnerID, daily, monthly, none, r.TaskID, r.Workload, r.Amount, r.Estimated).QueryRow(scanReserved)
		return
	}
	ids, workloads := make([]string, len(rs)), make([]string, len(rs))
	amounts, estimated := make([]int64, len(rs)), make([]bool, len(rs))
	for i, r := range rs {
		ids[i], workloads[i], amounts[i], estimated[i] = r.TaskID, r.Workload, r.Amount, r.Estimated
	}
	b.Queue(reserveManySQL, rs[0].OwnerID, daily, monthly, none, ids, workloads, amounts, estimated).QueryRow(scanReserved)
}

// The reservation statement for one and for many: the same statement over
// q, the reservations to hold, given as scalars or as arrays.
var (
	reserveOneSQL  = reserveSQL(`SELECT $5::uuid AS task_id, $6::text AS workload, $7::bigint AS amount, $8::bool AS estimated`)
	reserveManySQL = reserveSQL(`SELECT * FROM unnest($5::uuid[], $6::text[], $7::bigint[], $8::bool[]) AS q (task_id, workload, amount, estimated)`)
)

// reserveSQL is the reservation statement over q, a query of the
// reservations (task_id, workload, amount, estimated) of owner $1 at the
// instant whose period starts are $2 to $4. One statement: per
// reservation, its balance rows' ids, whether their periods are all open
// and whether the owner has a budget (per); per balance row, the sum it
// must cover (need); the rows locked in the lock order of balance rows
// (below); the conditional UPDATE; the rows recording the reservations;
// and the abort when any of them cannot be held. Sums are numeric, and a
// row adds one only when its headroom covers it, so nothing overflows.
func reserveSQL(q string) string {
	return `
		WITH q AS (` + q + `), rows AS (
			SELECT l.workload, p.id` + balanceRowsFrom(1, 2, `(l.workload = '' OR l.workload IN (SELECT workload FROM q))`) + `
		), per AS (
			SELECT q.task_id, q.amount, q.estimated,
			       COALESCE(array_agg(rows.id ORDER BY rows.id) FILTER (WHERE rows.id IS NOT NULL), '{}') AS ids,
			       COALESCE(bool_and(rows.id IS NOT NULL), false) AS open,
			       COALESCE(bool_or(rows.workload = ''), false) AS capped
			FROM q LEFT JOIN rows ON rows.workload IN ('', q.workload)
			GROUP BY q.task_id, q.amount, q.estimated
		), need AS (
			SELECT x.id, sum(per.amount) AS amount FROM per, unnest(per.ids) AS x (id) GROUP BY x.id
		), locked AS (
			` + lockRowsSQL(`id IN (SELECT id FROM need)`) + `
		), p AS (
			UPDATE budget_periods b
			SET ` + setFromLocked + `, reserved_micros = k.reserved_micros + need.amount, spent_micros = k.spent_micros
			FROM need, locked k
			WHERE b.id = need.id AND k.id = need.id AND k.total_micros - k.reserved_micros - k.spent_micros >= need.amount
			RETURNING b.id, b.owner_id, b.workload
		), res AS (
			INSERT INTO budget_reservations (task_id, owner_id, amount_micros, estimated, budget_period_ids)
			SELECT task_id, $1, amount, estimated, ids FROM per
		), l AS (
			` + ledgerTaskRow + `
			SELECT p.owner_id, p.workload, p.id, per.task_id, 'reserve', per.amount
			FROM per, unnest(per.ids) AS x (id) JOIN p ON p.id = x.id
		)
		SELECT CASE WHEN bool_or(NOT capped) THEN tollgate_abort('` + codeInsufficient + `', 'budget: the owner has no budget')
		            WHEN bool_or(NOT open) THEN tollgate_abort('` + codePeriodNotOpen + `', 'budget: a period is not opened yet')
		            WHEN (SELECT count(*) FROM p) = (SELECT count(*) FROM need) THEN count(*)
		            ELSE tollgate_abort('` + codeInsufficient + `', 'budget: insufficient budget for the reservation') END
		FROM per`
}

// scanReserved reads a reservation's answer (reserveSQL).
func scanReserved(row pgx.Row) error {
	var n int64
	if err := row.Scan(&n); err != nil {
		switch {
		case isCode(err, codeInsufficient):
			return ErrInsufficient
		case isCode(err, codePeriodNotOpen):
			return errPeriodNotOpen
		}
		return fmt.Errorf("budget: reserve: %w", err)
	}
	return nil
}

// errPeriodNotOpen is QueueReserve's answer when a balance row it needs
// belongs to a period not opened yet; BalanceRows.Open opens it.
var errPeriodNotOpen = errors.New("budget: a period is not opened yet")

// lockRowsSQL locks the balance rows that pass where, in the lock order of
// balance rows, and returns their amounts as locked (k in the statements
// that use it).
//
// A statement that locks balance rows and updates them computes the new
// amounts from the rows as it locked them (setFromLocked, then reserved
// and spent), never from the rows its UPDATE scanned. Under READ COMMITTED
// the UPDATE scans with the statement's snapshot, taken before the lock
// was granted: when another transaction changed a row meanwhile, the scan
// finds the old version, evaluates its WHERE on it (a reservation the
// newest version can cover would be refused) and builds the new row from
// it, and PostgreSQL checks the CHECK constraint on that row before it
// finds the newer version and re-evaluates (a settlement charged to the
// newest headroom would fail with budget_periods_amounts, seen under
// concurrent settlements near a cap). The locked values are the newest
// version, and stay so while the lock is held.
//
// The lock order of balance rows: every statement that locks them locks
// the owner's row (workload ”) first, then its workloads' rows by id. A
// transaction may run several such statements (a batch of admissions or
// settlements across workloads), so id order within each statement would
// not be enough: with the owner's row first, whoever holds any of an
// owner's rows of a period holds that owner's row, and two transactions
// cannot each hold a row the other waits for.
func lockRowsSQL(where string) string {
	return `SELECT id, total_micros, reserved_micros, spent_micros FROM budget_periods WHERE ` + where +
		` ORDER BY workload <> '', id FOR NO KEY UPDATE`
}

// setFromLocked starts the SET of an UPDATE of balance rows from k, the
// rows as lockRowsSQL locked them.
const setFromLocked = `updated_at = now(), total_micros = k.total_micros`

// SQLSTATEs the statements of this package raise through tollgate_abort to
// abort the caller's transaction.
const (
	codeInsufficient  = "TG402" // a balance row cannot cover a reservation
	codeNoReservation = "TG404" // a settlement found no held reservation
	codePeriodNotOpen = "TG412" // QueueReserve needs a period not opened yet
)

// isCode reports whether err is a PostgreSQL error with SQLSTATE code.
func isCode(err error, code string) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == code
}
