package budget

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

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
	// The classes, parts of the totals as in Tokens: cached and
	// cache-written input, reasoning output.
	CachedInputTokens int64
	CacheWriteTokens  int64
	ReasoningTokens   int64
	Source            Source
	CostMicros        int64
	// ChargeCapMicros, when not nil, is the most the settlement charges,
	// whatever the headroom; the rest of the cost is recorded as
	// shortfall. A cost resting on a usage report beyond any sane bound
	// (PlausibleUsage) carries one: the report is charged at most the
	// reservation, anything else in the cost as usual.
	ChargeCapMicros *int64
}

// tokens returns the settlement's token counts by class.
func (s Settlement) tokens() Tokens {
	return Tokens{Input: s.InputTokens, Output: s.OutputTokens, CachedInput: s.CachedInputTokens, CacheWrite: s.CacheWriteTokens, Reasoning: s.ReasoningTokens}
}

// valid returns ErrInvalid for a negative cost, token count or cap, and
// for classes beyond their totals (Tokens.Normalized makes them fit).
func (s Settlement) valid() error {
	if s.CostMicros < 0 || s.InputTokens < 0 || s.OutputTokens < 0 || (s.ChargeCapMicros != nil && *s.ChargeCapMicros < 0) {
		return invalid("negative settlement")
	}
	if s.tokens().Normalized() != s.tokens() {
		return invalid("settlement token classes beyond their totals")
	}
	return nil
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
// task holds no open reservation (already closed), leaving tx usable.
// Settlements settles with the caller's COMMIT.
func SettleTx(ctx context.Context, tx pgx.Tx, s Settlement, thresholds []int) (Settled, error) {
	var out Settled
	b := &pgx.Batch{}
	if err := queueSettle(b, s, thresholds, false, &out); err != nil {
		return Settled{}, err
	}
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return Settled{}, err
	}
	return out, nil
}

func queueSettle(b *pgx.Batch, s Settlement, thresholds []int, abort bool, out *Settled) error {
	if err := s.valid(); err != nil {
		return err
	}
	// One statement: it closes the reservation; locks its balance rows in
	// the lock order of balance rows, FOR NO KEY UPDATE rather than FOR UPDATE (a reservation of the
	// same owner holds a KEY SHARE lock on these rows, its ledger row's
	// foreign key, before it updates them, and FOR UPDATE would queue behind
	// that lock while holding the tuple lock the reservation's UPDATE then
	// needs: a deadlock, seen under load); charges the cost up to the
	// tightest row's headroom, read under the lock; moves the money; writes
	// the ledger and usage rows; and records the alert thresholds the new
	// balances crossed (each once per period: the unique (row, threshold)
	// key decides between instances). It returns one row, plus one per
	// alert fired.
	b.Queue(`
		WITH r AS (`+closeHeldSQL("settled")+`), locked AS (
			SELECT b.id, b.total_micros, b.reserved_micros, b.spent_micros,
			       b.total_micros - b.spent_micros - (b.reserved_micros - r.amount_micros) AS headroom
			FROM budget_periods b, r WHERE b.id = ANY(r.budget_period_ids)
			ORDER BY b.workload <> '', b.id FOR NO KEY UPDATE OF b
		), m AS (
			SELECT r.owner_id, r.amount_micros AS amount,
			       LEAST($7::bigint, (SELECT min(headroom) FROM locked), $10::bigint) AS charged FROM r
		), p AS (
			UPDATE budget_periods b SET `+setFromLocked+`, reserved_micros = k.reserved_micros - m.amount, spent_micros = k.spent_micros + m.charged
			FROM m, locked k WHERE b.id = k.id
			`+settledReturning+`
		), l AS (
			`+ledgerUsageRow+`
			SELECT p.owner_id, p.workload, p.id, $1, k.kind, k.amount, $6, $3, $4, $5
			FROM p, m, LATERAL (VALUES ('release', m.amount), ('settle', m.charged)) AS k (kind, amount)
		), u AS (
			`+usageRow+`
			SELECT $1, m.owner_id, $2, $3, $4, $5, $6, $7, m.charged, $7 - m.charged, $11, $12, $13 FROM m
		), `+firedCTE+`
		SELECT CASE WHEN m.charged IS NULL AND $9 THEN tollgate_abort('`+codeNoReservation+`', 'budget: no held reservation')
		            ELSE m.charged END,
		       `+alertColumns+`
		FROM (SELECT 1) AS one
		LEFT JOIN m ON true
		`+firedJoin,
		s.TaskID, s.Workload, s.Model, s.InputTokens, s.OutputTokens, string(s.Source), s.CostMicros, thresholds, abort, s.ChargeCapMicros,
		s.CachedInputTokens, s.CacheWriteTokens, s.ReasoningTokens,
	).Query(func(rows pgx.Rows) error {
		err := scanSettled(rows, s.CostMicros, out)
		if isCode(err, codeNoReservation) || errors.Is(err, ErrNotFound) {
			return ErrNotFound
		}
		if err != nil {
			return fmt.Errorf("budget: settle: %w", err)
		}
		return nil
	})
	return nil
}

// firedCTE, in a settlement statement whose balance rows as updated are
// p and whose alert thresholds are $8, records the thresholds those rows
// crossed, each once per period (the unique (row, threshold) key decides
// between instances), and returns the ones it recorded. The comparison is
// in numeric: spent × 100 and pct × total overflow a bigint for totals
// above about 9.2 × 10^16 micros, an unlimited budget's among them.
const firedCTE = `fired AS (
			INSERT INTO budget_alerts (budget_period_id, threshold_pct)
			SELECT p.id, t.pct FROM p, unnest($8::int[]) AS t (pct)
			WHERE p.total_micros > 0 AND p.spent_micros::numeric * 100 >= t.pct::numeric * p.total_micros
			ON CONFLICT DO NOTHING
			RETURNING budget_period_id, threshold_pct
		)`

// settledReturning is what the UPDATE p of a settlement statement returns:
// the balance rows as updated, which firedCTE and firedJoin read.
const settledReturning = `RETURNING b.id, b.owner_id, b.workload, b.period_start, b.spent_micros, b.total_micros`

// alertColumns and firedJoin end a settlement statement: its answer row,
// then one more per alert firedCTE recorded, read by scanSettled.
const (
	alertColumns = `a.owner_id, a.workload, a.period_start, a.threshold_pct, a.spent_micros, a.total_micros`
	firedJoin    = `LEFT JOIN (SELECT p.id, p.owner_id, p.workload, p.period_start, f.threshold_pct, p.spent_micros, p.total_micros
		           FROM fired f JOIN p ON p.id = f.budget_period_id) AS a ON true
		ORDER BY a.id, a.threshold_pct`
)

// scanSettled reads the settlement statement's rows into out: what was
// charged, hence the shortfall, and the alerts fired. No charge read means
// no held reservation: ErrNotFound.
func scanSettled(rows pgx.Rows, cost int64, out *Settled) error {
	defer rows.Close()
	var charged *int64
	for rows.Next() {
		var a Alert
		var owner, workload *string
		var start *time.Time
		var pct *int
		var spent, total *int64
		if err := rows.Scan(&charged, &owner, &workload, &start, &pct, &spent, &total); err != nil {
			return err
		}
		if pct != nil {
			a.OwnerID, a.Workload, a.PeriodStart, a.ThresholdPct, a.SpentMicros, a.TotalMicros = *owner, *workload, *start, *pct, *spent, *total
			out.Alerts = append(out.Alerts, a)
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if charged == nil {
		return ErrNotFound
	}
	out.ChargedMicros, out.ShortfallMicros = *charged, cost-*charged
	return nil
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

// codeBatchShort: a balance row cannot charge every settlement of a batch
// in full; each is settled on its own, where the shortfall is recorded.
const codeBatchShort = "TG403"

// Settlements collects settlements, one to n, to send with the caller's
// COMMIT (Queue), and where each one's answer goes.
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

// Queue queues on b the statement that settles everything added, for a
// pipeline that ends with COMMIT: the balance rows it locks are then held
// only while PostgreSQL runs it and commits. One settlement is settled as
// SettleTx settles it, except that a task holding no open reservation
// aborts the transaction (SQLSTATE TG404) and b's results return
// ErrNotFound. More are settled as one batch (see the package doc): every
// reservation closed, each balance row updated once with the batch's
// totals, the ledger and usage rows and the alerts as for one. A batch
// settles only if every member is charged its full cost; otherwise, or
// when a member holds no reservation, the statement aborts the
// transaction and b's results return errBatchShort or ErrNotFound, and the
// caller settles each on its own, where a shortfall is charged up to the
// headroom and recorded. The alerts a batch fired are all told in the
// first member's answer. The answers fill in the outs given to Add when
// b's results are read.
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
			`+lockRowsSQL(`id IN (SELECT period_id FROM rr)`)+`
		), totals AS (
			SELECT period_id, sum(amount) AS released, sum(cost) AS charged FROM rr GROUP BY period_id
		), p AS (
			UPDATE budget_periods b
			SET `+setFromLocked+`, reserved_micros = k.reserved_micros - t.released, spent_micros = k.spent_micros + t.charged
			FROM totals t, locked k
			WHERE b.id = t.period_id AND k.id = t.period_id
			  AND k.reserved_micros - t.released + k.spent_micros + t.charged <= k.total_micros
			`+settledReturning+`
		), l AS (
			`+ledgerUsageRow+`
			SELECT p.owner_id, p.workload, p.id, rr.task_id, k.kind, k.amount, s.source, s.model, s.input_tokens, s.output_tokens
			FROM rr JOIN p ON p.id = rr.period_id JOIN s ON s.ord = rr.ord,
			     LATERAL (VALUES ('release', rr.amount), ('settle', rr.cost)) AS k (kind, amount)
		), u AS (
			`+usageRow+`
			SELECT s.task_id, r.owner_id, s.workload, s.model, s.input_tokens, s.output_tokens, s.source, s.cost, s.cost, 0,
			       s.cached_input_tokens, s.cache_write_tokens, s.reasoning_tokens
			FROM s JOIN r ON r.ord = s.ord
		), `+firedCTE+`
		SELECT CASE WHEN (SELECT count(*) FROM r) < $9 THEN tollgate_abort('`+codeNoReservation+`', 'budget: a member of the batch holds no reservation')
		            WHEN (SELECT count(*) FROM p) < (SELECT count(*) FROM totals) THEN tollgate_abort('`+codeBatchShort+`', 'budget: a balance row cannot charge the batch in full')
		            ELSE $9 END,
		       `+alertColumns+`
		FROM (SELECT 1) AS one
		`+firedJoin,
		ids, workloads, models, input, output, sources, costs, thresholds, n, cached, written, reasoning,
	).Query(func(rows pgx.Rows) error {
		var first Settled
		err := scanSettled(rows, 0, &first)
		switch {
		case isCode(err, codeNoReservation):
			return ErrNotFound
		case isCode(err, codeBatchShort):
			return errBatchShort
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

// errBatchShort is the answer of a batch of settlements that a balance row
// cannot charge in full; each member is then settled on its own.
var errBatchShort = errors.New("budget: a balance row cannot charge the batch in full")
