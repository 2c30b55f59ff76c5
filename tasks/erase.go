package tasks

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/tollgate/tollgate/replay"
)

// Erasure: a task's bodies go, its metadata stays, and a tombstone says
// when, by whom and why.

// ErrErased is returned for a task whose bodies were erased (by retention
// or on request); Tombstone says when and by whom.
var ErrErased = errors.New("tasks: bodies erased")

// ErrNotFinished is returned for an operation that needs a finished task.
var ErrNotFinished = errors.New("tasks: task not finished")

// Tombstone records an erasure.
type Tombstone struct {
	ErasedAt time.Time `json:"erased_at"`
	ErasedBy string    `json:"erased_by"`
	Reason   string    `json:"reason"` // "deleted" or "retention"
}

// eraseTx erases a task's bodies (stored request, sealed request and
// output, replay response texts) and keeps the metadata finance and
// support need: ids, model, status, usage, costs, timings, classes.
func eraseTx(ctx context.Context, tx pgx.Tx, ids []string, by, reason string) (int64, error) {
	tag, err := tx.Exec(ctx, `
		UPDATE tasks SET request = jsonb_build_object('messages', '[]'::jsonb, 'erased', true),
		       payload = NULL, output_sealed = NULL, answer_sealed = NULL,
		       bodies_erased_at = now(), bodies_erased_by = $2, bodies_erased_reason = $3
		WHERE id = ANY($1) AND bodies_erased_at IS NULL`, ids, by, reason)
	if err != nil {
		return 0, err
	}
	// A kept answer of a finished task is a leftover; it goes too.
	if _, err := tx.Exec(ctx, `DELETE FROM task_kept_answers WHERE task_id = ANY($1)`, ids); err != nil {
		return 0, err
	}
	return tag.RowsAffected(), replay.EraseTx(ctx, tx, ids)
}

// Erase erases the bodies of the owner's task now ("" owner: any owner's,
// for admins), leaving a tombstone naming who asked. It returns
// ErrNotFound, or ErrErased with the existing tombstone when already
// erased.
func (s *Service) Erase(ctx context.Context, owner, id, by string) (Tombstone, error) {
	return s.maintenance.erase(ctx, owner, id, by)
}

// erase carries out Service.Erase.
func (s *maintenance) erase(ctx context.Context, owner, id, by string) (Tombstone, error) {
	if uuid.Validate(id) != nil {
		return Tombstone{}, ErrNotFound
	}
	var ts Tombstone
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		t, err := lockTask(ctx, tx, id)
		if err != nil {
			return err
		}
		if owner != "" && t.OwnerID != owner {
			return ErrNotFound
		}
		if !t.Status.Final() {
			return fmt.Errorf("%w: the task is still running", ErrNotFinished)
		}
		if _, err := eraseTx(ctx, tx, []string{id}, by, "deleted"); err != nil {
			return err
		}
		ts, err = tombstoneTx(ctx, tx, id)
		return err
	})
	if err != nil && !errors.Is(err, ErrNotFound) && !errors.Is(err, ErrNotFinished) {
		return Tombstone{}, fmt.Errorf("tasks: erase: %w", err)
	}
	return ts, err
}

// TombstoneOf returns the task's tombstone, or nil when its bodies are
// intact.
func (s *Service) TombstoneOf(ctx context.Context, id string) (*Tombstone, error) {
	return s.reader.tombstoneOf(ctx, id)
}

// tombstoneOf carries out Service.TombstoneOf.
func (s *reader) tombstoneOf(ctx context.Context, id string) (*Tombstone, error) {
	var ts Tombstone
	var at *time.Time
	var by, reason *string
	err := s.pool.QueryRow(ctx, selectTombstone, id).Scan(&at, &by, &reason)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("tasks: tombstone: %w", err)
	}
	if at == nil {
		return nil, nil
	}
	ts.ErasedAt, ts.ErasedBy, ts.Reason = *at, deref(by), deref(reason)
	return &ts, nil
}

// selectTombstone reads a task's tombstone columns, NULL while its bodies
// are intact.
const selectTombstone = `SELECT bodies_erased_at, bodies_erased_by, bodies_erased_reason FROM tasks WHERE id = $1`

// tombstoneTx reads the tombstone of a task whose bodies tx erased.
func tombstoneTx(ctx context.Context, tx pgx.Tx, id string) (Tombstone, error) {
	var ts Tombstone
	err := tx.QueryRow(ctx, selectTombstone, id).Scan(&ts.ErasedAt, &ts.ErasedBy, &ts.Reason)
	return ts, err
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
