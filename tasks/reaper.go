package tasks

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tollgate/tollgate/internal/periodic"
	"github.com/tollgate/tollgate/provider"
)

// reapGrace is how long past its deadline an unfinished task may hold its
// reservation before the reaper steps in: its job normally fails it on
// time, so a task still open after this has lost its job.
const reapGrace = 5 * time.Minute

// ReapOnce finds reservations that should not be held any more, and closes
// them: held by a finished task (which only a bug or a hand edit leaves),
// or by a task long past its deadline (whose job was lost). Each is closed
// with ledger rows, like any settlement, and counted as an orphan: an
// orphan is an alarm, not a silent fix. An unfinished task with a kept
// answer succeeds with it (reapKept); any other unfinished task fails. It
// returns how many it closed.
//
// The reservations come first: a finished task holding one is what the
// reaper is for, and held reservations are also how unfinished tasks are
// found without an index of tasks on their finish (see
// WriteSafetyNetsOnce).
func (s *Service) ReapOnce(ctx context.Context) (int, error) {
	return s.maintenance.reapOnce(ctx)
}

// reapOnce carries out Service.ReapOnce.
func (s *maintenance) reapOnce(ctx context.Context) (int, error) {
	n := 0
	for {
		var final *outcome
		var closedOnly *spend // a finished task's settlement, its end announced already
		reaped := false
		err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			var id string
			err := tx.QueryRow(ctx, `
				SELECT r.task_id::text FROM budget_reservations r JOIN tasks t ON t.id = r.task_id
				WHERE r.state = 'held' AND (t.finished_at IS NOT NULL OR t.deadline_at < now() - $1::interval)
				ORDER BY r.created_at
				LIMIT 1
				FOR UPDATE OF r, t SKIP LOCKED`, reapGrace).Scan(&id)
			if errors.Is(err, pgx.ErrNoRows) {
				return nil
			}
			if err != nil {
				return err
			}
			t, err := lockTask(ctx, tx, id)
			if err != nil {
				return err
			}
			jc, err := countJournal(ctx, tx, t.ID, t.Model)
			if err != nil {
				return err
			}
			// Not only ambiguous attempts: a call whose outcome was never
			// recorded (its entry still "sent", or its answer kept) may
			// have been charged, and is settled as such.
			ev, err := s.readEvidence(ctx, tx, t, jc.ambiguous)
			if err != nil {
				return err
			}
			charged := possibleCalls(ev)
			reaped = true
			s.cfg.Logger.LogAttrs(ctx, slog.LevelError, "ALERT orphaned reservation reaped",
				slog.String("task_id", t.ID), slog.String("owner_id", t.OwnerID), slog.String("status", string(t.Status)),
				slog.Int("possible_calls", charged))
			if t.Status.Final() {
				// Close the money only; the task's own state stands. A
				// kept copy left over goes.
				m, err := s.outcomes.closeMoney(ctx, tx, t, moneyAfter(charged))
				if err != nil {
					return err
				}
				closedOnly = m.spent
				_, err = tx.Exec(ctx, forgetKeptSQL, t.ID, nil)
				return err
			}
			// An answer kept and never recorded is the task's success.
			// Its recording runs under a savepoint: should it fail (what
			// failed the run's recording may fail it again), the task is
			// failed below instead, so that one task never stalls the
			// reaper.
			if final, err = s.reapKeptSavepoint(ctx, tx, t, ev); err != nil || final != nil {
				return err
			}
			lastClass := jc.lastClass
			switch {
			case lastClass == "" && charged > 0:
				lastClass = provider.ClassAmbiguous
			case lastClass == "":
				lastClass = provider.ClassTransient
			}
			f := failureFor(lastClass, jc.lastCode, "deadline")
			money, err := s.outcomes.finishUnsucceeded(ctx, tx, t, StatusFailed, &f, charged)
			if err != nil {
				return err
			}
			final = &outcome{taskID: t.ID, status: StatusFailed, code: f.Code, created: t.CreatedAt, money: money}
			// A kept answer not recorded (it cannot be opened, or its
			// recording failed) is settled with the task: it goes.
			_, err = tx.Exec(ctx, forgetKeptSQL, t.ID, nil)
			return err
		})
		if err != nil {
			return n, fmt.Errorf("tasks: reap: %w", err)
		}
		if !reaped {
			return n, nil
		}
		n++
		s.cfg.Metrics.OrphanReaped()
		s.outcomes.observe(final)
		s.outcomes.countSpend(closedOnly)
	}
}

// reapKeptSavepoint is reapKept under a savepoint of tx: when recording
// the kept answer fails, the savepoint is rolled back, the failure logged,
// and it returns nil for the caller to fail the task instead.
func (s *maintenance) reapKeptSavepoint(ctx context.Context, tx pgx.Tx, t Task, ev callEvidence) (*outcome, error) {
	if len(ev.kept) == 0 {
		return nil, nil
	}
	sp, err := tx.Begin(ctx)
	if err != nil {
		return nil, err
	}
	final, err := s.recording.reapKept(ctx, sp, t, ev)
	if err == nil && final != nil {
		return final, sp.Commit(ctx)
	}
	if rerr := sp.Rollback(ctx); rerr != nil {
		return nil, rerr
	}
	if err != nil {
		s.cfg.Logger.LogAttrs(ctx, slog.LevelError, "ALERT kept answer not recorded by the reaper; the task fails, settled as possibly charged",
			slog.String("task_id", t.ID), slog.String("error", err.Error()))
	}
	return nil, nil
}

// reapLoop runs ReapOnce every interval until ctx ends. Every instance may
// run it: SKIP LOCKED keeps them from working on the same reservation.
func (s *maintenance) reapLoop(ctx context.Context, interval time.Duration) {
	periodic.Every(ctx, interval, func(ctx context.Context) {
		if _, err := s.reapOnce(ctx); err != nil && ctx.Err() == nil {
			s.cfg.Logger.Warn("reaper failed", slog.String("error", err.Error()))
		}
	})
}
