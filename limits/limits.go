package limits

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// MaxPerMinute bounds a limit: far above any real traffic, far below
// int64's range, so counts summed in a window cannot overflow.
const MaxPerMinute = 1_000_000_000_000

// MaxWorkloads bounds how many workloads one owner's limits name.
const MaxWorkloads = 1000

var (
	// ErrInvalid: a limit out of range or a workload without a name.
	ErrInvalid = errors.New("limits: invalid")
	// ErrOwnerNotFound: no owner has the id.
	ErrOwnerNotFound = errors.New("limits: no such owner")
)

// Limit is one scope's limits per minute; nil is unlimited.
type Limit struct {
	RequestsPerMinute *int64 `json:"requests_per_minute"`
	TokensPerMinute   *int64 `json:"tokens_per_minute"`
}

// Limits are an owner's limits: its own, and its workloads'.
type Limits struct {
	OwnerID string `json:"owner_id"`
	Limit
	Workloads map[string]Limit `json:"workloads"`
}

// workloadFormat is an API key's workload's format (accounts).
var workloadFormat = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// InvalidError is a limit out of range: the field refused (workloads.W.
// prefixed for a workload's) and why, in words fit for a client. It is
// ErrInvalid; the HTTP layer answers it as a 400 naming the field,
// reading no error text.
type InvalidError struct {
	Field, Reason string
}

func (e *InvalidError) Error() string { return "limits: invalid: " + e.Field + ": " + e.Reason }

// Is makes an *InvalidError match ErrInvalid.
func (e *InvalidError) Is(target error) bool { return target == ErrInvalid }

// InvalidDetail says what is refused and why.
func (e *InvalidError) InvalidDetail() string { return e.Field + ": " + e.Reason + "." }

// InvalidField is the field refused and why.
func (e *InvalidError) InvalidField() (field, reason string) { return e.Field, e.Reason }

// Validate returns ErrInvalid, naming the field, for a value below 0 or
// above MaxPerMinute, a workload with an empty or overlong name, or too
// many workloads.
func (l Limits) Validate() error {
	if err := l.Limit.validate(""); err != nil {
		return err
	}
	if len(l.Workloads) > MaxWorkloads {
		return &InvalidError{Field: "workloads", Reason: fmt.Sprintf("at most %d", MaxWorkloads)}
	}
	for name, w := range l.Workloads {
		if !workloadFormat.MatchString(name) {
			return &InvalidError{Field: "workloads", Reason: "a workload's name must be 1-64 letters, digits, '.', '_' or '-'"}
		}
		if err := w.validate("workloads." + name + "."); err != nil {
			return err
		}
	}
	return nil
}

func (l Limit) validate(prefix string) error {
	for _, f := range []struct {
		name string
		v    *int64
	}{{"requests_per_minute", l.RequestsPerMinute}, {"tokens_per_minute", l.TokensPerMinute}} {
		if f.v != nil && (*f.v < 0 || *f.v > MaxPerMinute) {
			return &InvalidError{Field: prefix + f.name, Reason: fmt.Sprintf("must be an integer from 0 to %d", int64(MaxPerMinute))}
		}
	}
	return nil
}

// Store reads and writes limits.
type Store struct {
	pool *pgxpool.Pool
}

// NewStore returns a Store on pool.
func NewStore(pool *pgxpool.Pool) *Store { return &Store{pool: pool} }

// Put replaces every limit of l.OwnerID with l, in one transaction. It
// returns ErrInvalid (Validate) or ErrOwnerNotFound, changing nothing.
func (s *Store) Put(ctx context.Context, l Limits) error {
	if err := l.Validate(); err != nil {
		return err
	}
	owners := []string{l.OwnerID}
	workloads := []string{""}
	rpm := []*int64{l.RequestsPerMinute}
	tpm := []*int64{l.TokensPerMinute}
	for name, w := range l.Workloads {
		owners, workloads = append(owners, l.OwnerID), append(workloads, name)
		rpm, tpm = append(rpm, w.RequestsPerMinute), append(tpm, w.TokensPerMinute)
	}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `DELETE FROM rate_limits WHERE owner_id = $1`, l.OwnerID); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `
			INSERT INTO rate_limits (owner_id, workload, requests_per_minute, tokens_per_minute)
			SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[], $4::bigint[])`, owners, workloads, rpm, tpm)
		return err
	})
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == pgerrcode.ForeignKeyViolation {
		return ErrOwnerNotFound
	}
	if err != nil {
		return fmt.Errorf("limits: put: %w", err)
	}
	return nil
}

// Get returns owner's limits: all unlimited when none were put. It
// returns ErrOwnerNotFound when no owner has the id.
func (s *Store) Get(ctx context.Context, owner string) (Limits, error) {
	var exists bool
	if err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM owners WHERE id = $1)`, owner).Scan(&exists); err != nil {
		return Limits{}, fmt.Errorf("limits: get: %w", err)
	}
	if !exists {
		return Limits{}, ErrOwnerNotFound
	}
	all, err := s.list(ctx, owner)
	if err != nil {
		return Limits{}, err
	}
	if len(all) == 0 {
		return Limits{OwnerID: owner, Workloads: map[string]Limit{}}, nil
	}
	return all[0], nil
}

// List returns the limits of every owner that has any, by owner id.
func (s *Store) List(ctx context.Context) ([]Limits, error) {
	return s.list(ctx, "")
}

func (s *Store) list(ctx context.Context, owner string) ([]Limits, error) {
	rows, err := s.pool.Query(ctx, `
		SELECT owner_id, workload, requests_per_minute, tokens_per_minute FROM rate_limits
		WHERE $1 = '' OR owner_id = $1 ORDER BY owner_id, workload`, owner)
	if err != nil {
		return nil, fmt.Errorf("limits: list: %w", err)
	}
	type row struct {
		OwnerID           string
		Workload          string
		RequestsPerMinute *int64
		TokensPerMinute   *int64
	}
	list, err := pgx.CollectRows(rows, pgx.RowToStructByName[row])
	if err != nil {
		return nil, fmt.Errorf("limits: list: %w", err)
	}
	var out []Limits
	for _, r := range list {
		if len(out) == 0 || out[len(out)-1].OwnerID != r.OwnerID {
			out = append(out, Limits{OwnerID: r.OwnerID, Workloads: map[string]Limit{}})
		}
		l := &out[len(out)-1]
		lim := Limit{RequestsPerMinute: r.RequestsPerMinute, TokensPerMinute: r.TokensPerMinute}
		if r.Workload == "" {
			l.Limit = lim
		} else {
			l.Workloads[r.Workload] = lim
		}
	}
	return out, nil
}

// WindowOf is the start of the minute window that holds at.
func WindowOf(at time.Time) time.Time { return at.UTC().Truncate(time.Minute) }

// Retention is how long a window's counts are kept after the window
// ends: well past the time they decide, long enough to read back.
const Retention = time.Hour

// Execer runs a statement: a pool, a connection or a transaction.
type Execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// Purge deletes the counts of the windows that ended before before (see
// Retention), and the charges of the minutes that started before it: no
// admission decides on them any more, and a settlement that comes later
// finds nothing to correct. It returns how many windows it deleted.
func Purge(ctx context.Context, db Execer, before time.Time) (int64, error) {
	for _, table := range []string{"rate_charges", "rate_corrections"} {
		if _, err := db.Exec(ctx, `DELETE FROM `+table+` WHERE window_start < $1`, before); err != nil {
			return 0, fmt.Errorf("limits: purge: %w", err)
		}
	}
	tag, err := db.Exec(ctx, `DELETE FROM rate_windows WHERE window_start + span < $1`, before)
	if err != nil {
		return 0, fmt.Errorf("limits: purge: %w", err)
	}
	return tag.RowsAffected(), nil
}
