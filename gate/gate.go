// Package gate owns the gate in front of each provider key: a throttle
// pause when the provider asks us to slow down, and a circuit breaker when
// the account behind the key is exhausted (quota, credit, billing, revoked
// key).
//
// The gate lives in PostgreSQL, not in process memory, so every worker of
// every instance sharing the database obeys the same pause and the same
// breaker. All times are the database's clock, so instances with skewed
// clocks still agree. An open breaker lets one probe call through per probe
// interval; the probe's success closes it and the queue drains as if nothing
// had happened.
package gate

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Mode is the gate's state.
type Mode string

// The modes.
const (
	Closed Mode = "closed" // calls flow
	Paused Mode = "paused" // throttled until a time
	Open   Mode = "open"   // exhausted; one probe per interval
	// Idle is never stored: status and metrics report an open breaker as
	// idle when its probe is due and no task waits on the key, since the
	// next task's call is then the probe.
	Idle Mode = "idle"
)

// Decision is what a worker may do now.
type Decision struct {
	// Call: go ahead. Probe is set when this call is the breaker's probe.
	Call  bool
	Probe bool
	// Otherwise wait Wait (measured on the database clock) and ask again.
	Wait time.Duration
	Mode Mode
	// Why the key is not closed: the provider failure class and code.
	ReasonClass, ReasonCode string
}

// AdmitTx decides whether a call on key may go out now. For an open
// breaker whose probe time has come, exactly one caller across the fleet
// wins the probe (a conditional UPDATE) and the next probe is scheduled
// probeEvery later; everyone else waits.
func AdmitTx(ctx context.Context, tx pgx.Tx, key string, probeEvery time.Duration) (Decision, error) {
	var d Decision
	var mode string
	var class, code *string
	var wait time.Duration
	err := tx.QueryRow(ctx, `
		SELECT state, reason_class, reason_code,
		       GREATEST(CASE state WHEN 'paused' THEN paused_until WHEN 'open' THEN next_probe_at END - now(), interval '0')
		FROM provider_keys WHERE key = $1`, key).Scan(&mode, &class, &code, &wait)
	if errors.Is(err, pgx.ErrNoRows) {
		return Decision{Call: true, Mode: Closed}, nil
	}
	if err != nil {
		return Decision{}, fmt.Errorf("gate: admit: %w", err)
	}
	d.Mode = Mode(mode)
	if class != nil {
		d.ReasonClass = *class
	}
	if code != nil {
		d.ReasonCode = *code
	}
	switch {
	case d.Mode == Closed:
		d.Call = true
	case d.Mode == Paused && wait <= 0:
		d.Call = true // the pause is over; the next success closes it
	case d.Mode == Open && wait <= 0:
		tag, err := tx.Exec(ctx, `
			UPDATE provider_keys SET next_probe_at = now() + $2::interval, updated_at = now()
			WHERE key = $1 AND state = 'open' AND next_probe_at <= now()`, key, probeEvery)
		if err != nil {
			return Decision{}, fmt.Errorf("gate: claim probe: %w", err)
		}
		if tag.RowsAffected() == 1 {
			d.Call, d.Probe = true, true
		} else {
			d.Wait = probeEvery
		}
	default:
		d.Wait = wait
	}
	return d, nil
}

// PauseTx pauses the key for d (a throttle). It never shortens an existing
// pause and never downgrades an open breaker. It returns the pause's end as
// a duration from now on the database clock.
func PauseTx(ctx context.Context, tx pgx.Tx, key string, d time.Duration, class, code string) (time.Duration, error) {
	var left time.Duration
	err := tx.QueryRow(ctx, `
		INSERT INTO provider_keys AS k (key, state, paused_until, reason_class, reason_code)
		VALUES ($1, 'paused', now() + $2::interval, $3, $4)
		ON CONFLICT (key) DO UPDATE SET
			state = CASE WHEN k.state = 'open' THEN 'open' ELSE 'paused' END,
			paused_until = GREATEST(COALESCE(k.paused_until, now()), EXCLUDED.paused_until),
			reason_class = CASE WHEN k.state = 'open' THEN k.reason_class ELSE EXCLUDED.reason_class END,
			reason_code = CASE WHEN k.state = 'open' THEN k.reason_code ELSE EXCLUDED.reason_code END,
			updated_at = now()
		RETURNING GREATEST(CASE k.state WHEN 'open' THEN k.next_probe_at ELSE k.paused_until END - now(), interval '0')`,
		key, d, class, code).Scan(&left)
	if err != nil {
		return 0, fmt.Errorf("gate: pause: %w", err)
	}
	return left, nil
}

// OpenTx opens the breaker for key: no calls until the next probe, probeEvery
// from now. Opening an open breaker (a failed probe, or a second task
// failing on the same exhausted account) keeps its schedule and its
// opened_at and only refreshes the reason. It reports whether this call
// opened it, so that an outage alerts once, not once per probe or task.
//
// The opening is one conditional upsert: its DO UPDATE skips a row already
// open (locking it all the same), so a row written reports an opening and
// none written reports a breaker that was open. The old state cannot come
// from a locking read in the same statement: PostgreSQL skips a row the
// statement itself has just updated.
func OpenTx(ctx context.Context, tx pgx.Tx, key string, probeEvery time.Duration, class, code string) (opened bool, err error) {
	tag, err := tx.Exec(ctx, `
		INSERT INTO provider_keys AS k (key, state, next_probe_at, reason_class, reason_code, opened_at)
		VALUES ($1, 'open', now() + $2::interval, $3, $4, now())
		ON CONFLICT (key) DO UPDATE SET
			state = 'open', next_probe_at = EXCLUDED.next_probe_at, opened_at = now(),
			reason_class = EXCLUDED.reason_class, reason_code = EXCLUDED.reason_code,
			paused_until = NULL, updated_at = now()
		WHERE k.state <> 'open'`, key, probeEvery, class, code)
	if err != nil {
		return false, fmt.Errorf("gate: open: %w", err)
	}
	if tag.RowsAffected() == 1 {
		return true, nil
	}
	_, err = tx.Exec(ctx, `
		UPDATE provider_keys SET reason_class = $2, reason_code = $3, updated_at = now()
		WHERE key = $1 AND state = 'open'`, key, class, code)
	if err != nil {
		return false, fmt.Errorf("gate: open: %w", err)
	}
	return false, nil
}

// QueueClose queues on b the statement that closes the gate after a
// successful call; wasClosed is set when b's results are read, to whether
// the gate was closed already. A closed gate (the usual case) is left
// untouched, so the statement locks nothing then.
func QueueClose(b *pgx.Batch, key string, wasClosed *bool) {
	b.Queue(`
		UPDATE provider_keys SET state = 'closed', paused_until = NULL, next_probe_at = NULL,
		       reason_class = NULL, reason_code = NULL, opened_at = NULL, updated_at = now()
		WHERE key = $1 AND state <> 'closed'`, key).Exec(func(tag pgconn.CommandTag) error {
		*wasClosed = tag.RowsAffected() == 0
		return nil
	})
}

// QueuePeek queues Peek's read on b; mode is set when b's results are
// read. A key never seen is closed.
func QueuePeek(b *pgx.Batch, key string, mode *Mode) {
	b.Queue(`SELECT state FROM provider_keys WHERE key = $1`, key).Query(func(rows pgx.Rows) error {
		m, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return fmt.Errorf("gate: mode: %w", err)
		}
		*mode = Closed
		if len(m) == 1 {
			*mode = Mode(m[0])
		}
		return nil
	})
}

// State is a key's gate as operators see it.
type State struct {
	Key         string     `json:"key"`
	Mode        Mode       `json:"state"`
	PausedUntil *time.Time `json:"paused_until"`
	NextProbeAt *time.Time `json:"next_probe_at"`
	ReasonClass *string    `json:"reason_class"`
	ReasonCode  *string    `json:"reason_code"`
	OpenedAt    *time.Time `json:"opened_at"`
}

// Store reads and steers gates outside a worker's transaction.
type Store struct {
	pool *pgxpool.Pool
}

// NewStore returns a Store on pool.
func NewStore(pool *pgxpool.Pool) *Store { return &Store{pool: pool} }

// Get returns the key's gate; a key never seen is closed.
func (s *Store) Get(ctx context.Context, key string) (State, error) {
	st := State{Key: key, Mode: Closed}
	var mode string
	err := s.pool.QueryRow(ctx, `
		SELECT state, paused_until, next_probe_at, reason_class, reason_code, opened_at
		FROM provider_keys WHERE key = $1`, key).
		Scan(&mode, &st.PausedUntil, &st.NextProbeAt, &st.ReasonClass, &st.ReasonCode, &st.OpenedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return st, nil
	}
	if err != nil {
		return State{}, fmt.Errorf("gate: get: %w", err)
	}
	st.Mode = Mode(mode)
	return st, nil
}

// ProbeNow brings an open breaker's next probe forward to now, for an
// operator who knows the account was topped up.
func (s *Store) ProbeNow(ctx context.Context, key string) error {
	_, err := s.pool.Exec(ctx, `UPDATE provider_keys SET next_probe_at = now(), updated_at = now() WHERE key = $1 AND state = 'open'`, key)
	if err != nil {
		return fmt.Errorf("gate: probe now: %w", err)
	}
	return nil
}

// ModeTx returns the key's mode without deciding anything: for choosing a
// fallback whose key is not open.
func ModeTx(ctx context.Context, tx pgx.Tx, key string) (Mode, error) {
	var mode Mode
	b := &pgx.Batch{}
	QueuePeek(b, key, &mode)
	return mode, tx.SendBatch(ctx, b).Close()
}
