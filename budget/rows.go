package budget

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
)

// balanceRowsFrom is the FROM and WHERE clauses of every read of the
// balance rows a reservation holds: each limit l of the owner (parameter
// $owner) whose workload passes the condition workloads, joined to p, its
// balance row in the period containing the instant whose period starts
// (periodStarts) are the three parameters from $starts on. p's columns are
// NULL when that period is not opened yet.
func balanceRowsFrom(owner, starts int, workloads string) string {
	arg := func(n int) string { return "$" + strconv.Itoa(n) + "::timestamptz" }
	return `
		FROM budget_limits l
		LEFT JOIN budget_periods p ON p.owner_id = l.owner_id AND p.workload = l.workload
		     AND p.period_start = CASE l.period WHEN 'daily' THEN ` + arg(starts) + ` WHEN 'monthly' THEN ` + arg(starts+1) + ` ELSE ` + arg(starts+2) + ` END
		WHERE l.owner_id = $` + strconv.Itoa(owner) + ` AND ` + workloads
}

// periodStarts returns the starts of the daily, monthly and period-less
// periods containing at, the arguments balanceRowsFrom compares with.
func periodStarts(at time.Time) (daily, monthly, none time.Time) {
	daily, _ = PeriodDaily.bounds(at)
	monthly, _ = PeriodMonthly.bounds(at)
	none, _ = PeriodNone.bounds(at)
	return daily, monthly, none
}

// balanceRowByKey finds a balance row by its key: owner $1, workload $2,
// period start $3.
const balanceRowByKey = `budget_periods WHERE owner_id = $1 AND workload = $2 AND period_start = $3`

// openerSQL reads the balance rows a reservation of workload $2 holds.
var openerSQL = `SELECT l.workload, p.id` + balanceRowsFrom(1, 3, `l.workload IN ('', $2)`)

// BalanceRows is the period opener: QueueBalanceRows reads the balance
// rows a reservation holds (the owner's, and the workload's if it has a
// cap), and Open opens those whose period is not opened yet, which
// QueueReserve never does. Only the first reservation of a day or month
// finds one to open.
type BalanceRows struct {
	owner, workload string
	at              time.Time
	list            []balanceRow
}

type balanceRow struct {
	workload string
	id       *int64 // nil: the period is not opened yet
}

// QueueBalanceRows queues on b the read of the balance rows a reservation
// of owner's workload at `at` holds, into out, so that it travels with the
// caller's other statements; out.Open then opens what is missing.
func QueueBalanceRows(b *pgx.Batch, owner, workload string, at time.Time, out *BalanceRows) {
	daily, monthly, none := periodStarts(at)
	*out = BalanceRows{owner: owner, workload: workload, at: at}
	b.Queue(openerSQL, owner, workload, daily, monthly, none).Query(func(rows pgx.Rows) (err error) {
		out.list, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (balanceRow, error) {
			var x balanceRow
			return x, r.Scan(&x.workload, &x.id)
		})
		return err
	})
}

// Open opens in tx, from their limits, the periods of the rows read that
// are not opened yet, so that a reservation queued after it in tx finds
// every row it holds. It returns ErrInsufficient when the owner has no
// budget.
func (r *BalanceRows) Open(ctx context.Context, tx pgx.Tx) error {
	ownerCapped := false
	for _, x := range r.list {
		ownerCapped = ownerCapped || x.workload == ""
		if x.id != nil {
			continue
		}
		if _, _, err := openPeriodTx(ctx, tx, r.owner, x.workload, r.at, "system"); err != nil {
			if errors.Is(err, ErrNotFound) {
				return ErrInsufficient
			}
			return fmt.Errorf("budget: reserve: %w", err)
		}
	}
	if !ownerCapped {
		return ErrInsufficient
	}
	return nil
}

// openPeriodTx returns the balance row of the budget's period containing
// at, opening it from the limit if needed (with an adjust ledger row for its
// total). It returns ErrNotFound when the budget has no limit.
func openPeriodTx(ctx context.Context, tx pgx.Tx, owner, workload string, at time.Time, actor string) (id int64, opened bool, err error) {
	var period string
	var total int64
	err = tx.QueryRow(ctx, `SELECT period, total_micros FROM budget_limits WHERE owner_id = $1 AND workload = $2`,
		owner, workload).Scan(&period, &total)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, false, ErrNotFound
	}
	if err != nil {
		return 0, false, err
	}
	start, end := Period(period).bounds(at)
	err = tx.QueryRow(ctx, `
		INSERT INTO budget_periods (owner_id, workload, period, period_start, period_end, total_micros)
		VALUES ($1, $2, $3, $4, $5, $6)
		ON CONFLICT (owner_id, workload, period_start) DO NOTHING
		RETURNING id`, owner, workload, period, start, end, total).Scan(&id)
	if err == nil {
		_, err = tx.Exec(ctx, `
			`+ledgerAdjustRow+`
			VALUES ($1, $2, $3, 'adjust', $4, $5, 'period opened')`, owner, workload, id, total, actor)
		return id, true, err
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return 0, false, err
	}
	// Another transaction opened it first; ON CONFLICT waited for it to
	// commit, so this new statement sees the row.
	err = tx.QueryRow(ctx, `SELECT id FROM `+balanceRowByKey, owner, workload, start).Scan(&id)
	return id, false, err
}
