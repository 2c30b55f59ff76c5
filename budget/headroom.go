package budget

import (
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
