package budget

import (
	"context"
	"errors"
	"fmt"
	"slices"
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

// ReserveTx holds r.Amount on the owner's budget and, if the workload has a
// cap, on the workload's budget too, with one conditional UPDATE over both
// balance rows: it succeeds only if each covers the amount at the moment it
// runs. It returns ErrInsufficient when either does not (or when the owner
// has no budget); the caller must then roll back, which undoes everything.
// QueueReserveTx is the same reservation sent with the caller's COMMIT.
func ReserveTx(ctx context.Context, tx pgx.Tx, r Reservation) error {
	b := &pgx.Batch{}
	if err := QueueReserveTx(ctx, tx, b, r); err != nil {
		return err
	}
	return tx.SendBatch(ctx, b).Close()
}

// QueueReserveTx finds the balance rows r holds (a read in tx, which opens a
// period not opened yet) and queues on b the one statement that reserves on
// them. Sent in one pipeline with COMMIT (pipetx), it holds the rows, which
// every reservation and settlement of the owner needs, only while
// PostgreSQL runs it and commits. When a row cannot cover the amount the
// statement aborts the transaction (tollgate_abort, SQLSTATE TG402), so
// nothing after it runs, and b's results return ErrInsufficient. It
// returns ErrInsufficient at once when the owner has no budget, and
// ErrInvalid for an amount that is not positive.
func QueueReserveTx(ctx context.Context, tx pgx.Tx, b *pgx.Batch, r Reservation) error {
	if r.Amount <= 0 {
		return fmt.Errorf("%w: reservation must be > 0, got %d", ErrInvalid, r.Amount)
	}
	ids, err := BalanceRowsTx(ctx, tx, r.OwnerID, r.Workload, r.At)
	if err != nil {
		return err
	}
	QueueReserveOn(b, r, ids)
	return nil
}

// BalanceRowsTx returns the ids of the balance rows a reservation of
// owner's workload at `at` holds, opening a period not opened yet. It
// returns ErrInsufficient when the owner has no budget. Reservations of one
// owner and workload in one period share them, so a caller reserving for
// many tasks reads them once.
func BalanceRowsTx(ctx context.Context, tx pgx.Tx, owner, workload string, at time.Time) ([]int64, error) {
	rows, b := &BalanceRows{}, &pgx.Batch{}
	QueueBalanceRows(b, owner, workload, at, rows)
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return nil, fmt.Errorf("budget: reserve: %w", err)
	}
	return rows.Resolve(ctx, tx)
}

// QueueReserveOn queues on b QueueReserveTx's statement for r on the
// balance rows ids (from BalanceRowsTx). r.Amount must be positive, as
// QueueReserveTx checks: the reservation's CHECK constraint refuses others.
func QueueReserveOn(b *pgx.Batch, r Reservation, ids []int64) {
	b.Queue(`WITH found AS (SELECT $5::bigint[] AS ids, true AS open, true AS capped)`+reserveSQL,
		r.TaskID, r.OwnerID, r.Amount, r.Estimated, ids).QueryRow(scanReserved)
}

// QueueReserve queues on b the reservation of QueueReserveOn for r, finding
// its balance rows itself: the statement needs no read before it, so a
// caller can send its own rows, this and COMMIT in one round trip. It
// opens no period: when a period r needs is not opened yet (the first
// reservation of a day or month) it aborts the transaction and b's results
// return ErrPeriodNotOpen, and the caller reserves with QueueReserveTx,
// which opens it. b's results return ErrInsufficient when a row cannot
// cover r or the owner has no budget. r.Amount must be positive.
func QueueReserve(b *pgx.Batch, r Reservation) {
	daily, _ := PeriodDaily.Bounds(r.At)
	monthly, _ := PeriodMonthly.Bounds(r.At)
	none, _ := PeriodNone.Bounds(r.At)
	// The rows as QueueBalanceRows reads them, found: whether every period
	// is open and whether the owner has a budget at all.
	b.Queue(`
		WITH rows AS (
			SELECT l.workload, p.id
			FROM budget_limits l
			LEFT JOIN budget_periods p ON p.owner_id = l.owner_id AND p.workload = l.workload
			     AND p.period_start = CASE l.period WHEN 'daily' THEN $6::timestamptz WHEN 'monthly' THEN $7::timestamptz ELSE $8::timestamptz END
			WHERE l.owner_id = $2 AND l.workload IN ('', $5)
		), found AS (
			SELECT COALESCE(array_agg(id ORDER BY id) FILTER (WHERE id IS NOT NULL), '{}') AS ids,
			       COALESCE(bool_and(id IS NOT NULL), false) AS open,
			       COALESCE(bool_or(workload = ''), false) AS capped
			FROM rows
		)`+reserveSQL,
		r.TaskID, r.OwnerID, r.Amount, r.Estimated, r.Workload, daily, monthly, none).QueryRow(scanReserved)
}

// reserveSQL is the reservation itself, after a CTE named found that gives
// the balance rows' ids (ids), whether their periods are all open (open)
// and whether the owner has a budget (capped); $1 to $4 are the task, the
// owner, the amount and whether it is estimated. One statement: the rows
// locked in the lock order of balance rows (below), the conditional
// UPDATE, the rows recording the reservation, and the abort when a row
// could not cover the amount.
const reserveSQL = `, locked AS (
		SELECT ` + lockedAmounts + ` FROM budget_periods WHERE id IN (SELECT unnest(ids) FROM found) ORDER BY workload <> '', id FOR NO KEY UPDATE
	), p AS (
		UPDATE budget_periods b
		SET ` + setFromLocked + `, reserved_micros = k.reserved_micros + $3, spent_micros = k.spent_micros
		FROM locked k
		WHERE b.id = k.id AND k.total_micros - k.reserved_micros - k.spent_micros >= $3
		RETURNING b.id, b.owner_id, b.workload
	), res AS (
		INSERT INTO budget_reservations (task_id, owner_id, amount_micros, estimated, budget_period_ids)
		SELECT $1, $2, $3, $4, ids FROM found
	), l AS (
		INSERT INTO budget_ledger (owner_id, workload, budget_period_id, task_id, kind, amount_micros)
		SELECT owner_id, workload, id, $1, 'reserve', $3 FROM p
	)
	SELECT CASE WHEN NOT f.capped THEN tollgate_abort('` + codeInsufficient + `', 'budget: the owner has no budget')
	            WHEN NOT f.open THEN tollgate_abort('` + codePeriodNotOpen + `', 'budget: a period is not opened yet')
	            WHEN (SELECT count(*) FROM p) = cardinality(f.ids) THEN cardinality(f.ids)
	            ELSE tollgate_abort('` + codeInsufficient + `', 'budget: insufficient budget for the reservation') END
	FROM found f`

// scanReserved reads a reservation's answer (reserveSQL).
func scanReserved(row pgx.Row) error {
	var n int64
	if err := row.Scan(&n); err != nil {
		switch {
		case isCode(err, codeInsufficient):
			return ErrInsufficient
		case isCode(err, codePeriodNotOpen):
			return ErrPeriodNotOpen
		}
		return fmt.Errorf("budget: reserve: %w", err)
	}
	return nil
}

// ErrPeriodNotOpen is QueueReserve's answer when a balance row it needs
// belongs to a period not opened yet; QueueReserveTx opens it.
var ErrPeriodNotOpen = errors.New("budget: a period is not opened yet")

// A statement that locks balance rows and updates them computes the new
// amounts from the rows as it locked them (lockedAmounts; setFromLocked,
// then reserved and spent), never from the rows its UPDATE scanned. Under READ COMMITTED the UPDATE
// scans with the statement's snapshot, taken before the lock was granted:
// when another transaction changed a row meanwhile, the scan finds the old
// version, evaluates its WHERE on it (a reservation the newest version can
// cover would be refused) and builds the new row from it, and PostgreSQL
// checks the CHECK constraint on that row before it finds the newer
// version and re-evaluates (a settlement charged to the newest headroom
// would fail with budget_periods_amounts, seen under concurrent
// settlements near a cap). The locked values are the newest version, and
// stay so while the lock is held.
const (
	lockedAmounts = `id, total_micros, reserved_micros, spent_micros`
	setFromLocked = `updated_at = now(), total_micros = k.total_micros`
)

// The lock order of balance rows: every statement that locks them locks
// the owner's row (workload '') first, then its workloads' rows by id. A
// transaction may run several such statements (a batch of admissions or settlements across
// workloads), so id order within each statement would not be enough: with
// the owner's row first, whoever holds any of an owner's rows of a period
// holds that owner's row, and two transactions cannot each hold a row the
// other waits for.

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

// BalanceRows is what QueueBalanceRows reads: the balance rows a
// reservation at `at` holds (the owner's, and the workload's if it has a
// cap), some perhaps not opened yet; Resolve opens those from their limit
// (openPeriodTx).
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
// caller's other statements; Resolve then opens what is missing. Rows read
// in the reservation's transaction, as by BalanceRowsTx.
func QueueBalanceRows(b *pgx.Batch, owner, workload string, at time.Time, out *BalanceRows) {
	daily, _ := PeriodDaily.Bounds(at)
	monthly, _ := PeriodMonthly.Bounds(at)
	none, _ := PeriodNone.Bounds(at)
	*out = BalanceRows{owner: owner, workload: workload, at: at}
	b.Queue(`
		SELECT l.workload, p.id
		FROM budget_limits l
		LEFT JOIN budget_periods p ON p.owner_id = l.owner_id AND p.workload = l.workload
		     AND p.period_start = CASE l.period WHEN 'daily' THEN $3::timestamptz WHEN 'monthly' THEN $4::timestamptz ELSE $5::timestamptz END
		WHERE l.owner_id = $1 AND l.workload IN ('', $2)`, owner, workload, daily, monthly, none).Query(func(rows pgx.Rows) (err error) {
		out.list, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (balanceRow, error) {
			var x balanceRow
			return x, r.Scan(&x.workload, &x.id)
		})
		return err
	})
}

// Resolve returns the ids of the rows read, opening in tx the periods not
// opened yet. It returns ErrInsufficient when the owner has no budget.
func (r *BalanceRows) Resolve(ctx context.Context, tx pgx.Tx) ([]int64, error) {
	ids, err := r.resolve(ctx, tx)
	if errors.Is(err, ErrNotFound) {
		return nil, ErrInsufficient
	}
	if err != nil {
		return nil, fmt.Errorf("budget: reserve: %w", err)
	}
	return ids, nil
}

func (r *BalanceRows) resolve(ctx context.Context, tx pgx.Tx) ([]int64, error) {
	var ids []int64
	ownerCapped := false
	for _, x := range r.list {
		ownerCapped = ownerCapped || x.workload == ""
		if x.id == nil {
			id, _, err := openPeriodTx(ctx, tx, r.owner, x.workload, r.at, "system")
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

// Tokens returns the settlement's token counts by class.
func (s Settlement) Tokens() Tokens {
	return Tokens{Input: s.InputTokens, Output: s.OutputTokens, CachedInput: s.CachedInputTokens, CacheWrite: s.CacheWriteTokens, Reasoning: s.ReasoningTokens}
}

// valid returns ErrInvalid for a negative cost, token count or cap, and
// for classes beyond their totals (Tokens.Normalized makes them fit).
func (s Settlement) valid() error {
	if s.CostMicros < 0 || s.InputTokens < 0 || s.OutputTokens < 0 || (s.ChargeCapMicros != nil && *s.ChargeCapMicros < 0) {
		return fmt.Errorf("%w: negative settlement", ErrInvalid)
	}
	if s.Tokens().Normalized() != s.Tokens() {
		return fmt.Errorf("%w: settlement token classes beyond their totals", ErrInvalid)
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
// task holds no open reservation (already closed). QueueSettle is the same
// settlement sent with the caller's COMMIT.
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

// QueueSettle queues on b the one statement of SettleTx, for a pipeline
// that ends with COMMIT (pipetx): the balance rows it locks are then held
// only while PostgreSQL runs it and commits. When the task holds no open
// reservation the statement aborts the transaction (SQLSTATE TG404) and
// b's results return ErrNotFound. out is filled in when b's results are
// read.
func QueueSettle(b *pgx.Batch, s Settlement, thresholds []int, out *Settled) error {
	return queueSettle(b, s, thresholds, true, out)
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
		WITH r AS (
			UPDATE budget_reservations SET state = 'settled', closed_at = now()
			WHERE task_id = $1 AND `+stillHeld+`
			RETURNING owner_id, amount_micros, budget_period_ids
		), locked AS (
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
			RETURNING b.id, b.owner_id, b.workload, b.period_start, b.spent_micros, b.total_micros
		), l AS (
			INSERT INTO budget_ledger (owner_id, workload, budget_period_id, task_id, kind, amount_micros,
			                           usage_source, model, input_tokens, output_tokens)
			SELECT p.owner_id, p.workload, p.id, $1, k.kind, k.amount, $6, $3, $4, $5
			FROM p, m, LATERAL (VALUES ('release', m.amount), ('settle', m.charged)) AS k (kind, amount)
		), u AS (
			INSERT INTO usage_records (task_id, owner_id, workload, model, input_tokens, output_tokens, source,
			                           cost_micros, charged_micros, shortfall_micros,
			                           cached_input_tokens, cache_write_tokens, reasoning_tokens)
			SELECT $1, m.owner_id, $2, $3, $4, $5, $6, $7, m.charged, $7 - m.charged, $11, $12, $13 FROM m
		), `+firedCTE+`
		SELECT CASE WHEN m.charged IS NULL AND $9 THEN tollgate_abort('`+codeNoReservation+`', 'budget: no held reservation')
		            ELSE m.charged END,
		       a.owner_id, a.workload, a.period_start, a.threshold_pct, a.spent_micros, a.total_micros
		FROM (SELECT 1) AS one
		LEFT JOIN m ON true
		LEFT JOIN (SELECT p.id, p.owner_id, p.workload, p.period_start, f.threshold_pct, p.spent_micros, p.total_micros
		           FROM fired f JOIN p ON p.id = f.budget_period_id) AS a ON true
		ORDER BY a.id, a.threshold_pct`,
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

// ReleaseTx returns the task's whole held reservation to every balance row
// it held: the task failed or was canceled before spending anything we know
// of. It returns ErrNotFound when no reservation is held.
func ReleaseTx(ctx context.Context, tx pgx.Tx, taskID string) error {
	_, amount, ids, err := closeReservation(ctx, tx, taskID, "released")
	if err != nil {
		return err
	}
	_, err = tx.Exec(ctx, `
		WITH locked AS (
			SELECT `+lockedAmounts+` FROM budget_periods WHERE id = ANY($3) ORDER BY workload <> '', id FOR NO KEY UPDATE
		), p AS (
			UPDATE budget_periods b SET `+setFromLocked+`, reserved_micros = k.reserved_micros - $2, spent_micros = k.spent_micros
			FROM locked k WHERE b.id = k.id RETURNING b.id, b.owner_id, b.workload
		)
		INSERT INTO budget_ledger (owner_id, workload, budget_period_id, task_id, kind, amount_micros)
		SELECT owner_id, workload, id, $1, 'release', $2 FROM p`, taskID, amount, ids)
	if err != nil {
		return fmt.Errorf("budget: release: %w", err)
	}
	return nil
}

// stillHeld is how a statement that closes reservations by task id says
// "held": closed_at IS NULL, which the table's CHECK
// (budget_reservations_closed) makes the same as state = 'held'. Written
// as state = 'held', the condition matches the predicate of the partial
// indexes on held reservations, and a plan made while statistics said
// nothing was held (ANALYZE in a quiet moment, then a burst) walks one of
// them, every held reservation, instead of the primary key: at 3,000 held,
// 209 buffers and 2,999 rows filtered out for one settlement. Nothing
// else implies those predicates, so only the primary key can find the row.
const stillHeld = `closed_at IS NULL`

func closeReservation(ctx context.Context, tx pgx.Tx, taskID, state string) (owner string, amount int64, ids []int64, err error) {
	err = tx.QueryRow(ctx, `
		UPDATE budget_reservations SET state = $2, closed_at = now()
		WHERE task_id = $1 AND `+stillHeld+`
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
