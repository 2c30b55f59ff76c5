package budget

import (
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// Batches of one owner's reservations or settlements, each written as one
// statement that updates every balance row once, with the batch's total,
// instead of once per task.
//
// Why: every reservation and settlement of an owner updates the owner's
// budget row. A transaction that updates one row n times writes n versions
// of it, each while holding the row's lock, which every other admission and
// settlement of the owner waits for. One UPDATE with the sum writes one
// version and holds the lock for a fraction of the time.
//
// The sum is exact because a batch is all or nothing: its caller commits
// every member or none, and on an abort writes each member on its own
// (ReserveTx, QueueSettle), which tells the cases apart. Reservations are
// positive, so a balance row covers every reservation of a batch taken one
// after the other if and only if it covers their sum. A batch of
// settlements charges every member its full cost, and settles only if
// every row can take the batch's totals (reserved minus what it releases,
// plus spent plus what it charges, within the total), checked by the
// UPDATE itself on the row as locked; otherwise each member is
// settled alone, where a cost above the headroom is charged up to it and
// the shortfall recorded. The caps hold at the commit, the only moment
// another transaction can see the rows.

// codeBatchShort: a balance row cannot charge every settlement of a batch
// in full; each is settled on its own, where the shortfall is recorded.
const codeBatchShort = "TG403"

// QueueReserveMany queues on b one statement that holds every reservation
// of rs, all of owner and at one instant (rs[i].OwnerID and rs[i].At are
// taken from rs[0]), as QueueReserve would one by one: it finds the balance
// rows itself, then adds to each row the sum of the reservations it
// covers, if the row can cover that sum. It opens no period. When the
// batch cannot be held in full (a row short, an owner with no budget, a
// period not opened yet) the statement aborts the transaction and b's
// results return ErrInsufficient or ErrPeriodNotOpen; the caller then
// reserves each member on its own. Every amount must be positive. A batch
// of one is QueueReserve's.
func QueueReserveMany(b *pgx.Batch, rs []Reservation) {
	switch len(rs) {
	case 0:
		return
	case 1:
		// QueueReserve's statement is cheaper for one (no arrays to
		// unnest and group): about 0.13 ms a call in BenchmarkBatch.
		QueueReserve(b, rs[0])
		return
	}
	at := rs[0].At
	daily, _ := PeriodDaily.Bounds(at)
	monthly, _ := PeriodMonthly.Bounds(at)
	none, _ := PeriodNone.Bounds(at)
	ids, workloads := make([]string, len(rs)), make([]string, len(rs))
	amounts, estimated := make([]int64, len(rs)), make([]bool, len(rs))
	for i, r := range rs {
		ids[i], workloads[i], amounts[i], estimated[i] = r.TaskID, r.Workload, r.Amount, r.Estimated
	}
	b.Queue(`
		WITH q AS (
			SELECT * FROM unnest($1::uuid[], $2::text[], $3::bigint[], $4::bool[]) AS q (task_id, workload, amount, estimated)
		), rows AS (
			SELECT l.workload, p.id
			FROM budget_limits l
			LEFT JOIN budget_periods p ON p.owner_id = l.owner_id AND p.workload = l.workload
			     AND p.period_start = CASE l.period WHEN 'daily' THEN $6::timestamptz WHEN 'monthly' THEN $7::timestamptz ELSE $8::timestamptz END
			WHERE l.owner_id = $5 AND (l.workload = '' OR l.workload IN (SELECT workload FROM q))
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
			SELECT `+lockedAmounts+` FROM budget_periods WHERE id IN (SELECT id FROM need) ORDER BY workload <> '', id FOR NO KEY UPDATE
		), p AS (
			UPDATE budget_periods b
			SET `+setFromLocked+`, reserved_micros = k.reserved_micros + need.amount, spent_micros = k.spent_micros
			FROM need, locked k
			WHERE b.id = need.id AND k.id = need.id AND k.total_micros - k.reserved_micros - k.spent_micros >= need.amount
			RETURNING b.id, b.owner_id, b.workload
		), res AS (
			INSERT INTO budget_reservations (task_id, owner_id, amount_micros, estimated, budget_period_ids)
			SELECT task_id, $5, amount, estimated, ids FROM per
		), l AS (
			INSERT INTO budget_ledger (owner_id, workload, budget_period_id, task_id, kind, amount_micros)
			SELECT p.owner_id, p.workload, p.id, per.task_id, 'reserve', per.amount
			FROM per, unnest(per.ids) AS x (id) JOIN p ON p.id = x.id
		)
		SELECT CASE WHEN bool_or(NOT capped) THEN tollgate_abort('`+codeInsufficient+`', 'budget: the owner has no budget')
		            WHEN bool_or(NOT open) THEN tollgate_abort('`+codePeriodNotOpen+`', 'budget: a period is not opened yet')
		            WHEN (SELECT count(*) FROM p) = (SELECT count(*) FROM need) THEN count(*)
		            ELSE tollgate_abort('`+codeInsufficient+`', 'budget: insufficient budget for the batch') END
		FROM per`,
		ids, workloads, amounts, estimated, rs[0].OwnerID, daily, monthly, none).QueryRow(scanReserved)
}

// Settlements collects settlements to send together (Queue), and where
// each one's answer goes.
type Settlements struct {
	list []Settlement
	outs []*Settled
}

// Add adds s, whose answer Queue's results fill in out. It returns
// ErrInvalid for a negative cost, token count or cap.
func (ss *Settlements) Add(s Settlement, out *Settled) error {
	if err := s.valid(); err != nil {
		return err
	}
	ss.list = append(ss.list, s)
	ss.outs = append(ss.outs, out)
	return nil
}

// Len is the number of settlements added.
func (ss *Settlements) Len() int { return len(ss.list) }

// Queue queues on b the statement that settles everything added, for a
// pipeline that ends with COMMIT. One settlement is QueueSettle's. More
// are settled as one batch: every reservation closed, each balance row
// updated once with the batch's totals, the ledger and usage rows and the
// alerts as QueueSettle writes them. A batch settles only if every member
// is charged its full cost; otherwise, or when a member holds no
// reservation, the statement aborts the transaction and b's results return
// ErrBatchShort or ErrNotFound, and the caller settles each on its own,
// where a shortfall is charged up to the headroom and recorded. The alerts
// a batch fired are all told in the first member's answer.
func (ss *Settlements) Queue(b *pgx.Batch, thresholds []int) {
	// A settlement with a charge cap (an implausible usage report's) is
	// settled by its own statement, in the same transaction, and the
	// batch takes the others. Such reports are rare.
	list, outs := ss.list[:0:0], ss.outs[:0:0]
	for i, s := range ss.list {
		if s.ChargeCapMicros != nil {
			_ = queueSettle(b, s, thresholds, true, ss.outs[i])
			continue
		}
		list, outs = append(list, s), append(outs, ss.outs[i])
	}
	(&Settlements{list: list, outs: outs}).queueBatch(b, thresholds)
}

func (ss *Settlements) queueBatch(b *pgx.Batch, thresholds []int) {
	switch len(ss.list) {
	case 0:
		return
	case 1:
		// Validated by Add.
		_ = queueSettle(b, ss.list[0], thresholds, true, ss.outs[0])
		return
	}
	n := len(ss.list)
	ids, workloads, models, sources := make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	input, output, costs := make([]int64, n), make([]int64, n), make([]int64, n)
	cached, written, reasoning := make([]int64, n), make([]int64, n), make([]int64, n)
	for i, s := range ss.list {
		ids[i], workloads[i], models[i], sources[i] = s.TaskID, s.Workload, s.Model, string(s.Source)
		input[i], output[i], costs[i] = s.InputTokens, s.OutputTokens, s.CostMicros
		cached[i], written[i], reasoning[i] = s.CachedInputTokens, s.CacheWriteTokens, s.ReasoningTokens
	}
	ss.outs[0].Alerts = nil
	b.Queue(`
		WITH s AS (
			SELECT * FROM unnest($1::uuid[], $2::text[], $3::text[], $4::bigint[], $5::bigint[], $6::text[], $7::bigint[],
			                     $10::bigint[], $11::bigint[], $12::bigint[])
			       WITH ORDINALITY AS s (task_id, workload, model, input_tokens, output_tokens, source, cost,
			                             cached_input_tokens, cache_write_tokens, reasoning_tokens, ord)
		), r AS (
			UPDATE budget_reservations res SET state = 'settled', closed_at = now()
			FROM s WHERE res.task_id = s.task_id AND res.`+stillHeld+`
			RETURNING res.task_id, res.owner_id, res.amount_micros AS amount, res.budget_period_ids, s.ord, s.cost
		), rr AS (
			SELECT r.*, x.id AS period_id FROM r, unnest(r.budget_period_ids) AS x (id)
		), locked AS (
			SELECT `+lockedAmounts+` FROM budget_periods WHERE id IN (SELECT period_id FROM rr) ORDER BY workload <> '', id FOR NO KEY UPDATE
		), totals AS (
			SELECT period_id, sum(amount) AS released, sum(cost) AS charged FROM rr GROUP BY period_id
		), p AS (
			UPDATE budget_periods b
			SET `+setFromLocked+`, reserved_micros = k.reserved_micros - t.released, spent_micros = k.spent_micros + t.charged
			FROM totals t, locked k
			WHERE b.id = t.period_id AND k.id = t.period_id
			  AND k.reserved_micros - t.released + k.spent_micros + t.charged <= k.total_micros
			RETURNING b.id, b.owner_id, b.workload, b.period_start, b.spent_micros, b.total_micros
		), l AS (
			INSERT INTO budget_ledger (owner_id, workload, budget_period_id, task_id, kind, amount_micros,
			                           usage_source, model, input_tokens, output_tokens)
			SELECT p.owner_id, p.workload, p.id, rr.task_id, k.kind, k.amount, s.source, s.model, s.input_tokens, s.output_tokens
			FROM rr JOIN p ON p.id = rr.period_id JOIN s ON s.ord = rr.ord,
			     LATERAL (VALUES ('release', rr.amount), ('settle', rr.cost)) AS k (kind, amount)
		), u AS (
			INSERT INTO usage_records (task_id, owner_id, workload, model, input_tokens, output_tokens, source,
			                           cost_micros, charged_micros, shortfall_micros,
			                           cached_input_tokens, cache_write_tokens, reasoning_tokens)
			SELECT s.task_id, r.owner_id, s.workload, s.model, s.input_tokens, s.output_tokens, s.source, s.cost, s.cost, 0,
			       s.cached_input_tokens, s.cache_write_tokens, s.reasoning_tokens
			FROM s JOIN r ON r.ord = s.ord
		), `+firedCTE+`
		SELECT CASE WHEN (SELECT count(*) FROM r) < $9 THEN tollgate_abort('`+codeNoReservation+`', 'budget: a member of the batch holds no reservation')
		            WHEN (SELECT count(*) FROM p) < (SELECT count(*) FROM totals) THEN tollgate_abort('`+codeBatchShort+`', 'budget: a balance row cannot charge the batch in full')
		            ELSE $9 END,
		       a.owner_id, a.workload, a.period_start, a.threshold_pct, a.spent_micros, a.total_micros
		FROM (SELECT 1) AS one
		LEFT JOIN (SELECT p.id, p.owner_id, p.workload, p.period_start, f.threshold_pct, p.spent_micros, p.total_micros
		           FROM fired f JOIN p ON p.id = f.budget_period_id) AS a ON true
		ORDER BY a.id, a.threshold_pct`,
		ids, workloads, models, input, output, sources, costs, thresholds, n, cached, written, reasoning,
	).Query(func(rows pgx.Rows) error {
		var first Settled
		err := scanSettled(rows, 0, &first)
		switch {
		case isCode(err, codeNoReservation):
			return ErrNotFound
		case isCode(err, codeBatchShort):
			return ErrBatchShort
		case err != nil:
			return fmt.Errorf("budget: settle: %w", err)
		}
		for i, s := range ss.list {
			ss.outs[i].ChargedMicros, ss.outs[i].ShortfallMicros = s.CostMicros, 0
		}
		ss.outs[0].Alerts = first.Alerts
		return nil
	})
}

// ErrBatchShort is the answer of a batch of settlements that a balance row
// cannot charge in full; each member is then settled on its own.
var ErrBatchShort = errors.New("budget: a balance row cannot charge the batch in full")
