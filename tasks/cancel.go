package tasks

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
)

// ErrFinished is returned by Cancel for a task that already finished.
var ErrFinished = errors.New("tasks: task already finished")

// Cancel cancels the owner's task. A queued task is canceled at once and
// its reservation released. A running task is marked: when its in-flight
// call returns, it is canceled and settled for what that call spent. It
// returns the task as it now is, ErrNotFound, or ErrFinished.
func (s *Service) Cancel(ctx context.Context, owner, id string) (Task, error) {
	return s.maintenance.cancel(ctx, owner, id)
}

// cancel carries out Service.Cancel.
func (s *maintenance) cancel(ctx context.Context, owner, id string) (Task, error) {
	if uuid.Validate(id) != nil {
		return Task{}, ErrNotFound
	}
	var final *outcome
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var err error
		final, err = s.cancelTx(ctx, tx, owner, id)
		return err
	})
	if err != nil {
		if errors.Is(err, ErrNotFound) || errors.Is(err, ErrFinished) {
			return Task{}, err
		}
		return Task{}, fmt.Errorf("tasks: cancel: %w", err)
	}
	s.outcomes.observe(final)
	return s.reader.get(ctx, owner, id)
}

// cancelTx cancels the owner's task id in tx, or marks it when a call of
// it may be in flight (the task is stored running: its entry is "sent")
// or a run of it may be about to begin one (its job is running). It
// returns the task's end, to be announced once tx commits, nil when the
// task is only marked.
func (s *maintenance) cancelTx(ctx context.Context, tx pgx.Tx, owner, id string) (*outcome, error) {
	t, err := lockTask(ctx, tx, id)
	if err != nil {
		return nil, err
	}
	if t.OwnerID != owner {
		return nil, ErrNotFound
	}
	if t.Status.Final() {
		return nil, ErrFinished
	}
	running := t.Status == StatusRunning
	if !running && t.jobID != nil {
		if running, err = s.jobRunning(ctx, tx, *t.jobID); err != nil {
			return nil, err
		}
	}
	if running {
		_, err := tx.Exec(ctx, `UPDATE tasks SET cancel_requested = true, updated_at = now() WHERE id = $1`, id)
		return nil, err
	}
	jc, err := countJournal(ctx, tx, t.ID, t.Model)
	if err != nil {
		return nil, err
	}
	money, err := s.outcomes.finishUnsucceeded(ctx, tx, t, StatusCanceled, nil, jc.possiblyCharged())
	return &outcome{taskID: t.ID, status: StatusCanceled, created: t.CreatedAt, money: money}, err
}

// jobRunning reports whether the River job jobID is running, a run of its
// task possibly about to call, and holds the job's row until tx ends
// (lockJobState). A job that exists and is not running is canceled in tx
// with its task, so that no worker picks it up afterwards.
func (s *maintenance) jobRunning(ctx context.Context, tx pgx.Tx, jobID int64) (bool, error) {
	state, err := lockJobState(ctx, tx, jobID)
	if err != nil {
		return false, err
	}
	switch state {
	case "running":
		return true, nil
	case "": // no such job
		return false, nil
	}
	if _, err := s.river.JobCancelTx(ctx, tx, jobID); err != nil && !errors.Is(err, river.ErrNotFound) {
		return false, err
	}
	return false, nil
}
