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
func (s *Service) ReapOnce(ctx context.Context) (int, error) {
	n := 0
	for {
		var final *outcome
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
			// recorded ("sent", kept, a River run's error entry, a run in
			// flight) may have been charged, and is settled as such.
			ev, err := readEvidence(ctx, tx, t, jc.ambiguous)
			if err != nil {
				return err
			}
			charged := possibleCalls(ev)
			reaped = true
			s.cfg.Logger.LogAttrs(ctx, slog.LevelError, "ALERT orphaned reservation reaped",
				slog.String("task_id", t.ID), slog.String("owner_id", t.OwnerID), slog.String("status", string(t.Status)),
				slog.Int("possible_calls", charged))
			if t.Status.Final() {
				// Close the money only; the task's own state stands.
				_, err := s.closeMoney(ctx, tx, t, charged)
				return err
			}
			// An answer kept and never recorded is the task's success.
			if final, err = s.reapKept(ctx, tx, t, ev); err != nil || final != nil {
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
			alerts, err := s.finishUnsucceeded(ctx, tx, t, StatusFailed, &f, charged)
			final = &outcome{taskID: t.ID, status: StatusFailed, code: f.Code, created: t.CreatedAt, alerts: alerts}
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
		s.observe(final)
	}
}

// reapLoop runs ReapOnce every interval until ctx ends. Every instance may
// run it: SKIP LOCKED keeps them from working on the same reservation.
func (s *Service) reapLoop(ctx context.Context, interval time.Duration) {
	periodic.Every(ctx, interval, func(ctx context.Context) {
		if _, err := s.ReapOnce(ctx); err != nil && ctx.Err() == nil {
			s.cfg.Logger.Warn("reaper failed", slog.String("error", err.Error()))
		}
	})
}
