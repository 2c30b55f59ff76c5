package budget

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tollgate/tollgate/accounts"
)

// Errors returned by this package.
var (
	// ErrInsufficient: a budget cannot cover the reservation. Nothing changed.
	ErrInsufficient = errors.New("budget: insufficient budget for the reservation")
	// ErrBelowCommitted: a new total would be below what is already reserved
	// plus spent in the current period.
	ErrBelowCommitted = errors.New("budget: total below reserved plus spent")
	// ErrInvalid: an argument is out of range.
	ErrInvalid = errors.New("budget: invalid")
	// ErrNotFound: no such budget, or no open reservation.
	ErrNotFound = errors.New("budget: not found")
)

// Period is how often a budget starts afresh.
type Period string

// Periods are UTC calendar periods.
const (
	PeriodNone    Period = "none"
	PeriodDaily   Period = "daily"
	PeriodMonthly Period = "monthly"
)

// InvalidError is an argument out of range: Detail says what is refused
// and why, in words fit for a client (it names the field and never
// echoes a secret). It is ErrInvalid; the HTTP layer answers it as a 400
// with Detail, reading no error text.
type InvalidError struct {
	Detail string
	err    error // the refusal of another package it stands for, if any
}

func (e *InvalidError) Error() string { return "budget: invalid: " + e.Detail }

// Is makes an *InvalidError match ErrInvalid.
func (e *InvalidError) Is(target error) bool { return target == ErrInvalid }

func (e *InvalidError) Unwrap() error { return e.err }

// InvalidDetail is Detail, for callers that map any package's refusal.
func (e *InvalidError) InvalidDetail() string { return e.Detail }

// invalid is an *InvalidError of the formatted detail.
func invalid(format string, args ...any) error {
	return &InvalidError{Detail: fmt.Sprintf(format, args...)}
}

// ParsePeriod returns ErrInvalid for anything but the three periods.
func ParsePeriod(s string) (Period, error) {
	switch p := Period(s); p {
	case PeriodNone, PeriodDaily, PeriodMonthly:
		return p, nil
	}
	return "", invalid("period %q is not none, daily or monthly", s)
}

// bounds returns the UTC period that contains at. A period-less budget has
// one everlasting period starting at the Unix epoch, and no end.
func (p Period) bounds(at time.Time) (start time.Time, end *time.Time) {
	at = at.UTC()
	switch p {
	case PeriodDaily:
		start = time.Date(at.Year(), at.Month(), at.Day(), 0, 0, 0, 0, time.UTC)
		e := start.AddDate(0, 0, 1)
		return start, &e
	case PeriodMonthly:
		start = time.Date(at.Year(), at.Month(), 1, 0, 0, 0, 0, time.UTC)
		e := start.AddDate(0, 1, 0)
		return start, &e
	}
	return time.Unix(0, 0).UTC(), nil
}

// Balance is one budget's state in one period.
type Balance struct {
	OwnerID        string     `json:"owner_id"`
	Workload       string     `json:"workload"`
	Period         Period     `json:"period"`
	PeriodStart    time.Time  `json:"period_start"`
	PeriodEnd      *time.Time `json:"period_end"`
	TotalMicros    int64      `json:"total_micros"`
	ReservedMicros int64      `json:"reserved_micros"`
	SpentMicros    int64      `json:"spent_micros"`
}

// Available is what can still be reserved.
func (b Balance) Available() int64 { return b.TotalMicros - b.ReservedMicros - b.SpentMicros }

// Store reads and changes budgets outside of a task's transaction.
type Store struct {
	pool *pgxpool.Pool
	now  func() time.Time
}

// NewStore returns a Store on pool. now is the clock that decides which
// period a change falls in (nil for time.Now).
func NewStore(pool *pgxpool.Pool, now func() time.Time) *Store {
	if now == nil {
		now = time.Now
	}
	return &Store{pool: pool, now: now}
}

// Limit is a budget as configured.
type Limit struct {
	OwnerID     string
	Workload    string // "" for the owner's own cap
	Period      Period
	TotalMicros int64
	Actor       string // who set it, recorded in the ledger
}

// Set sets the owner's period-less cap, creating the owner if needed: the
// `tollgate budget set` command.
func (s *Store) Set(ctx context.Context, owner string, totalMicros int64) (Balance, error) {
	return s.SetLimit(ctx, Limit{OwnerID: owner, Period: PeriodNone, TotalMicros: totalMicros, Actor: "cli"})
}

// SetLimit creates or changes one budget; see SetLimits.
func (s *Store) SetLimit(ctx context.Context, l Limit) (Balance, error) {
	list, err := s.SetLimits(ctx, []Limit{l})
	if err != nil {
		return Balance{}, err
	}
	return list[0], nil
}

// SetLimits creates or changes budgets, all or none, in one transaction.
// The current period's total moves by the change of the limit (keeping its
// top-ups), recorded as an adjust ledger row naming the actor. It returns
// ErrBelowCommitted when a total would fall below what is reserved plus
// spent, and ErrInvalid for bad arguments. Changing a budget's period takes
// effect from its next period row.
func (s *Store) SetLimits(ctx context.Context, limits []Limit) ([]Balance, error) {
	for i := range limits {
		l := &limits[i]
		if l.Actor == "" {
			l.Actor = "system"
		}
		field := "total_micros"
		if l.Workload != "" {
			field = "workloads." + l.Workload + ".total_micros"
		}
		if err := checkTotal(field, l.TotalMicros); err != nil {
			return nil, err
		}
		if _, err := ParsePeriod(string(l.Period)); err != nil {
			return nil, err
		}
		if l.Workload != "" && !accounts.ValidOwner(l.Workload) {
			return nil, invalid("workload %q must be 1-64 letters, digits, '.', '_' or '-'", l.Workload)
		}
	}
	var out []Balance
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		for _, l := range limits {
			b, err := s.setLimitTx(ctx, tx, l)
			if err != nil {
				return err
			}
			out = append(out, b)
		}
		return nil
	})
	if err != nil {
		return nil, translate(err)
	}
	return out, nil
}

func (s *Store) setLimitTx(ctx context.Context, tx pgx.Tx, l Limit) (Balance, error) {
	if err := accounts.EnsureOwnerTx(ctx, tx, l.OwnerID); err != nil {
		return Balance{}, err
	}
	var old int64
	err := tx.QueryRow(ctx, `SELECT total_micros FROM budget_limits WHERE owner_id = $1 AND workload = $2 FOR UPDATE`,
		l.OwnerID, l.Workload).Scan(&old)
	existed := err == nil
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return Balance{}, err
	}
	_, err = tx.Exec(ctx, `
		INSERT INTO budget_limits (owner_id, workload, period, total_micros, updated_by)
		VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (owner_id, workload) DO UPDATE SET period = EXCLUDED.period,
			total_micros = EXCLUDED.total_micros, updated_at = now(), updated_by = EXCLUDED.updated_by`,
		l.OwnerID, l.Workload, string(l.Period), l.TotalMicros, l.Actor)
	if err != nil {
		return Balance{}, err
	}
	id, opened, err := openPeriodTx(ctx, tx, l.OwnerID, l.Workload, s.now(), l.Actor)
	if err != nil {
		return Balance{}, err
	}
	if existed && !opened && l.TotalMicros != old {
		// Both within [0, MaxTotalMicros]: the difference fits.
		if err := adjustTx(ctx, tx, adjustment{id: id, delta: l.TotalMicros - old, kind: "adjust", actor: l.Actor, note: "limit changed", field: "total_micros"}); err != nil {
			return Balance{}, err
		}
	}
	return balanceTx(ctx, tx, id)
}

// Topup adds money to the current period of a budget (for a period-less
// budget, for good). It returns ErrNotFound when the budget does not exist,
// and ErrInvalid naming amount_micros when the amount is not positive or
// would take the period's total past MaxTotalMicros (an unlimited budget
// needs no top-up).
func (s *Store) Topup(ctx context.Context, owner, workload string, amountMicros int64, actor, note string) (Balance, error) {
	if amountMicros <= 0 || amountMicros > MaxTotalMicros {
		return Balance{}, invalid("amount_micros must be between 1 and %d, got %d", MaxTotalMicros, amountMicros)
	}
	var b Balance
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		id, _, err := openPeriodTx(ctx, tx, owner, workload, s.now(), actor)
		if err != nil {
			return err
		}
		if err := adjustTx(ctx, tx, adjustment{id: id, delta: amountMicros, kind: "topup", actor: actor, note: note, field: "amount_micros"}); err != nil {
			return err
		}
		b, err = balanceTx(ctx, tx, id)
		return err
	})
	if err != nil {
		return Balance{}, translate(err)
	}
	return b, nil
}

// Balances returns the owner's budgets (its own cap first, then each
// workload's) in the period current at the store's clock. A period not yet
// opened shows its full total, unused.
func (s *Store) Balances(ctx context.Context, owner string) ([]Balance, error) {
	rows, err := s.pool.Query(ctx, `SELECT workload, period, total_micros FROM budget_limits WHERE owner_id = $1 ORDER BY workload`, owner)
	if err != nil {
		return nil, fmt.Errorf("budget: balances: %w", err)
	}
	type limit struct {
		workload, period string
		total            int64
	}
	limits, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (limit, error) {
		var l limit
		return l, r.Scan(&l.workload, &l.period, &l.total)
	})
	if err != nil {
		return nil, fmt.Errorf("budget: balances: %w", err)
	}
	if len(limits) == 0 {
		return nil, ErrNotFound
	}
	out := make([]Balance, 0, len(limits))
	for _, l := range limits {
		start, end := Period(l.period).bounds(s.now())
		b := Balance{OwnerID: owner, Workload: l.workload, Period: Period(l.period), PeriodStart: start, PeriodEnd: end, TotalMicros: l.total}
		err := s.pool.QueryRow(ctx, `SELECT total_micros, reserved_micros, spent_micros FROM `+balanceRowByKey,
			owner, l.workload, start).Scan(&b.TotalMicros, &b.ReservedMicros, &b.SpentMicros)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return nil, fmt.Errorf("budget: balances: %w", err)
		}
		out = append(out, b)
	}
	return out, nil
}

// adjustment is a change of a balance row's total, with what its ledger
// row records: kind (adjust or topup), actor and note. field names the
// argument a refusal names.
type adjustment struct {
	id, delta         int64
	kind, actor, note string
	field             string
}

// adjustTx moves the total of balance row a.id by a.delta, with its ledger
// row. The new total is computed in numeric and must stay within
// MaxTotalMicros, else nothing changes and it returns ErrInvalid naming
// a.field; below what is committed it is ErrBelowCommitted (the CHECK).
func adjustTx(ctx context.Context, tx pgx.Tx, a adjustment) error {
	var found, moved bool
	err := tx.QueryRow(ctx, `
		WITH k AS (
			`+lockRowsSQL(`id = $1`)+`
		), p AS (
			UPDATE budget_periods b SET updated_at = now(), total_micros = k.total_micros + $2,
			       reserved_micros = k.reserved_micros, spent_micros = k.spent_micros
			FROM k WHERE b.id = k.id AND k.total_micros::numeric + $2 <= $6
			RETURNING b.owner_id, b.workload
		), l AS (
			`+ledgerAdjustRow+`
			SELECT owner_id, workload, $1, $3, $2, $4, $5 FROM p
		)
		SELECT EXISTS (SELECT 1 FROM k), EXISTS (SELECT 1 FROM p)`, a.id, a.delta, a.kind, a.actor, a.note, MaxTotalMicros).Scan(&found, &moved)
	switch {
	case err != nil:
		return err
	case !found:
		return ErrNotFound
	case !moved:
		return invalid("%s would take the total above %d, the maximum (which stands for unlimited)", a.field, MaxTotalMicros)
	}
	return nil
}

func balanceTx(ctx context.Context, tx pgx.Tx, id int64) (Balance, error) {
	var b Balance
	var period string
	err := tx.QueryRow(ctx, `
		SELECT owner_id, workload, period, period_start, period_end, total_micros, reserved_micros, spent_micros
		FROM budget_periods WHERE id = $1`, id).
		Scan(&b.OwnerID, &b.Workload, &period, &b.PeriodStart, &b.PeriodEnd, &b.TotalMicros, &b.ReservedMicros, &b.SpentMicros)
	b.Period = Period(period)
	return b, err
}

// translate turns database errors into this package's errors.
func translate(err error) error {
	var pgErr *pgconn.PgError
	var ai *accounts.InvalidError
	switch {
	case errors.As(err, &pgErr) && pgErr.Code == pgerrcode.CheckViolation && pgErr.ConstraintName == "budget_periods_amounts":
		return ErrBelowCommitted
	case errors.As(err, &ai):
		return &InvalidError{Detail: ai.Detail, err: err}
	case errors.Is(err, ErrNotFound), errors.Is(err, ErrInvalid):
		return err
	}
	return fmt.Errorf("budget: %w", err)
}
