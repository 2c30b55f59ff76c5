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
	// ErrInsufficient: the budget cannot cover the reservation. Nothing changed.
	ErrInsufficient = errors.New("budget: insufficient budget for the reservation")
	// ErrBelowCommitted: a new total would be below what is already reserved
	// plus spent.
	ErrBelowCommitted = errors.New("budget: total below reserved plus spent")
	// ErrInvalid: an argument is out of range.
	ErrInvalid = errors.New("budget: invalid")
	// ErrNotFound: the owner has no budget.
	ErrNotFound = errors.New("budget: not found")
)

// Budget is one owner's account.
type Budget struct {
	OwnerID        string
	TotalMicros    int64
	ReservedMicros int64
	SpentMicros    int64
	UpdatedAt      time.Time
}

// Available is what can still be reserved.
func (b Budget) Available() int64 { return b.TotalMicros - b.ReservedMicros - b.SpentMicros }

// Store reads and writes budgets outside of a task's transaction.
type Store struct {
	pool *pgxpool.Pool
}

// NewStore returns a Store on pool.
func NewStore(pool *pgxpool.Pool) *Store { return &Store{pool: pool} }

// Set sets the owner's total, creating the owner and its budget if needed.
// It returns ErrBelowCommitted when the total would fall below reserved plus
// spent money, and ErrInvalid for a negative total or bad owner.
func (s *Store) Set(ctx context.Context, owner string, totalMicros int64) (Budget, error) {
	if totalMicros < 0 {
		return Budget{}, fmt.Errorf("%w: total must be >= 0, got %d", ErrInvalid, totalMicros)
	}
	var b Budget
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if err := accounts.EnsureOwnerTx(ctx, tx, owner); err != nil {
			return err
		}
		return tx.QueryRow(ctx, `
			INSERT INTO budgets (owner_id, total_micros) VALUES ($1, $2)
			ON CONFLICT (owner_id) DO UPDATE SET total_micros = EXCLUDED.total_micros, updated_at = now()
			RETURNING owner_id, total_micros, reserved_micros, spent_micros, updated_at`,
			owner, totalMicros).Scan(&b.OwnerID, &b.TotalMicros, &b.ReservedMicros, &b.SpentMicros, &b.UpdatedAt)
	})
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == pgerrcode.CheckViolation && pgErr.ConstraintName == "budgets_amounts" {
		return Budget{}, ErrBelowCommitted
	}
	if errors.Is(err, accounts.ErrInvalid) {
		return Budget{}, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if err != nil {
		return Budget{}, fmt.Errorf("budget: set: %w", err)
	}
	return b, nil
}

// Get returns the owner's budget, or ErrNotFound.
func (s *Store) Get(ctx context.Context, owner string) (Budget, error) {
	var b Budget
	err := s.pool.QueryRow(ctx, `
		SELECT owner_id, total_micros, reserved_micros, spent_micros, updated_at
		FROM budgets WHERE owner_id = $1`, owner).
		Scan(&b.OwnerID, &b.TotalMicros, &b.ReservedMicros, &b.SpentMicros, &b.UpdatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return Budget{}, ErrNotFound
	}
	if err != nil {
		return Budget{}, fmt.Errorf("budget: get: %w", err)
	}
	return b, nil
}

// Reservation is money held for one task while it runs.
type Reservation struct {
	TaskID    string
	OwnerID   string
	Amount    int64
	Estimated bool // the amount came from a default price, not a configured one
}

// ReserveTx holds r.Amount of the owner's budget for the task, with one
// conditional UPDATE: it succeeds only if the unreserved, unspent balance
// covers the amount at the moment it runs. It returns ErrInsufficient when
// it does not (or when the owner has no budget); the caller must then roll
// back.
func ReserveTx(ctx context.Context, tx pgx.Tx, r Reservation) error {
	if r.Amount <= 0 {
		return fmt.Errorf("%w: reservation must be > 0, got %d", ErrInvalid, r.Amount)
	}
	tag, err := tx.Exec(ctx, `
		UPDATE budgets
		SET reserved_micros = reserved_micros + $2, updated_at = now()
		WHERE owner_id = $1 AND total_micros - reserved_micros - spent_micros >= $2`,
		r.OwnerID, r.Amount)
	if err != nil {
		return fmt.Errorf("budget: reserve: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return ErrInsufficient
	}
	_, err = tx.Exec(ctx, `
		WITH res AS (
			INSERT INTO budget_reservations (task_id, owner_id, amount_micros, estimated)
			VALUES ($1, $2, $3, $4)
		)
		INSERT INTO budget_ledger (owner_id, task_id, kind, amount_micros) VALUES ($2, $1, 'reserve', $3)`,
		r.TaskID, r.OwnerID, r.Amount, r.Estimated)
	if err != nil {
		return fmt.Errorf("budget: record reservation: %w", err)
	}
	return nil
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
	Model        string
	InputTokens  int64
	OutputTokens int64
	Source       Source
	CostMicros   int64
}

// Settled is what a settlement moved.
type Settled struct {
	ChargedMicros   int64 // moved to spent
	ShortfallMicros int64 // cost the budget could not cover, recorded, never silent
}

// SettleTx closes the task's held reservation: the actual cost moves to
// spent, the rest of the reservation is released, and a usage row records
// the settlement. A cost above the reservation is charged up to the owner's
// remaining balance; anything beyond is recorded as shortfall. It returns
// ErrNotFound when the task holds no open reservation (already closed).
func SettleTx(ctx context.Context, tx pgx.Tx, s Settlement) (Settled, error) {
	if s.CostMicros < 0 || s.InputTokens < 0 || s.OutputTokens < 0 {
		return Settled{}, fmt.Errorf("%w: negative settlement", ErrInvalid)
	}
	owner, amount, err := closeReservation(ctx, tx, s.TaskID, "settled")
	if err != nil {
		return Settled{}, err
	}
	var charged int64
	err = tx.QueryRow(ctx, `
		WITH b AS (
			SELECT owner_id,
			       LEAST($3::bigint, total_micros - spent_micros - (reserved_micros - $2)) AS charge
			FROM budgets WHERE owner_id = $1 FOR UPDATE
		)
		UPDATE budgets SET reserved_micros = reserved_micros - $2,
		                   spent_micros = spent_micros + b.charge,
		                   updated_at = now()
		FROM b WHERE budgets.owner_id = b.owner_id
		RETURNING b.charge`, owner, amount, s.CostMicros).Scan(&charged)
	if err != nil {
		return Settled{}, fmt.Errorf("budget: settle: %w", err)
	}
	out := Settled{ChargedMicros: charged, ShortfallMicros: s.CostMicros - charged}
	_, err = tx.Exec(ctx, `
		WITH l AS (
			INSERT INTO budget_ledger (owner_id, task_id, kind, amount_micros)
			VALUES ($1, $2, 'release', $3), ($1, $2, 'spend', $4)
		)
		INSERT INTO usage_records (task_id, owner_id, model, input_tokens, output_tokens, source,
		                           cost_micros, charged_micros, shortfall_micros)
		VALUES ($2, $1, $5, $6, $7, $8, $9, $4, $10)`,
		owner, s.TaskID, amount, charged, s.Model, s.InputTokens, s.OutputTokens, string(s.Source),
		s.CostMicros, out.ShortfallMicros)
	if err != nil {
		return Settled{}, fmt.Errorf("budget: record settlement: %w", err)
	}
	return out, nil
}

// ReleaseTx returns the task's whole held reservation to the owner's
// balance: the task failed or was canceled before spending anything we know
// of. It returns ErrNotFound when no reservation is held.
func ReleaseTx(ctx context.Context, tx pgx.Tx, taskID string) error {
	owner, amount, err := closeReservation(ctx, tx, taskID, "released")
	if err != nil {
		return err
	}
	_, err = tx.Exec(ctx, `
		WITH l AS (
			INSERT INTO budget_ledger (owner_id, task_id, kind, amount_micros) VALUES ($1, $2, 'release', $3)
		)
		UPDATE budgets SET reserved_micros = reserved_micros - $3, updated_at = now() WHERE owner_id = $1`,
		owner, taskID, amount)
	if err != nil {
		return fmt.Errorf("budget: release: %w", err)
	}
	return nil
}

func closeReservation(ctx context.Context, tx pgx.Tx, taskID, state string) (owner string, amount int64, err error) {
	err = tx.QueryRow(ctx, `
		UPDATE budget_reservations SET state = $2, closed_at = now()
		WHERE task_id = $1 AND state = 'held'
		RETURNING owner_id, amount_micros`, taskID, state).Scan(&owner, &amount)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", 0, ErrNotFound
	}
	if err != nil {
		return "", 0, fmt.Errorf("budget: close reservation: %w", err)
	}
	return owner, amount, nil
}
