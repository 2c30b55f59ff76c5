package budget

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// QueueNoHeadroom queues on b a read of whether the owner's own budget
// (workload "") in its current period cannot cover amount, so that a
// caller can refuse before the expensive work a reservation follows
// (redacting and sealing a large request). It reads without locks: a
// refusal it reports is what a reservation at the same moment answers,
// with the same comparison. It never reports one for a period not yet
// opened (which opens full), an owner without a budget, or a total it
// cannot compare (NULL): the reservation decides those.
func QueueNoHeadroom(b *pgx.Batch, owner string, at time.Time, amount int64, refused *bool) {
	daily, monthly, none := periodStarts(at)
	b.Queue(noHeadroomSQL, owner, amount, daily, monthly, none).QueryRow(func(r pgx.Row) error { return r.Scan(refused) })
}

// noHeadroomSQL compares with $2 what the owner's own balance row can
// still reserve; a period not opened yet has no row, and compares NULL.
var noHeadroomSQL = `SELECT COALESCE(bool_or(NOT (p.total_micros - p.reserved_micros - p.spent_micros >= $2)), false)` +
	balanceRowsFrom(1, 3, `l.workload = ''`)

// Room is the tightest of the owner's own budget and workload's (when not
// ""), in its period current at the store's clock, in one read without
// locks: the balance with the least available. A period not yet opened
// shows its full total. found is false for an owner without a budget.
func (s *Store) Room(ctx context.Context, owner, workload string) (b Balance, found bool, err error) {
	daily, monthly, none := periodStarts(s.now())
	err = s.pool.QueryRow(ctx, roomSQL, owner, workload, daily, monthly, none).Scan(&b.Workload, &b.TotalMicros, &b.ReservedMicros, &b.SpentMicros)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return Balance{}, false, nil
	case err != nil:
		return Balance{}, false, fmt.Errorf("budget: room: %w", err)
	}
	b.OwnerID = owner
	return b, true, nil
}

// roomSQL reads the balance of owner $1 and workload $2 (its own and the
// workload's) with the least available.
var roomSQL = `SELECT l.workload, COALESCE(p.total_micros, l.total_micros), COALESCE(p.reserved_micros, 0), COALESCE(p.spent_micros, 0)` +
	balanceRowsFrom(1, 3, `l.workload IN ('', $2)`) + `
		ORDER BY COALESCE(p.total_micros, l.total_micros) - COALESCE(p.reserved_micros, 0) - COALESCE(p.spent_micros, 0)
		LIMIT 1`
