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
	daily, _ := PeriodDaily.Bounds(at)
	monthly, _ := PeriodMonthly.Bounds(at)
	none, _ := PeriodNone.Bounds(at)
	b.Queue(`
		SELECT COALESCE(bool_or(NOT (p.total_micros - p.reserved_micros - p.spent_micros >= $2)), false)
		FROM budget_limits l
		JOIN budget_periods p ON p.owner_id = l.owner_id AND p.workload = l.workload
		     AND p.period_start = CASE l.period WHEN 'daily' THEN $3::timestamptz WHEN 'monthly' THEN $4::timestamptz ELSE $5::timestamptz END
		WHERE l.owner_id = $1 AND l.workload = ''`,
		owner, amount, daily, monthly, none).QueryRow(func(r pgx.Row) error { return r.Scan(refused) })
}
