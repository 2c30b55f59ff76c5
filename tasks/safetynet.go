package tasks

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"github.com/tollgate/tollgate/internal/periodic"
)

// safetyNetGrace is how long past a run's job timeout its safety net waits: a
// live run has ended by then, by finishing its task or by writing the net
// itself (reschedule).
const safetyNetGrace = 30 * time.Second

// setJobSQL names task $1's River job, $2: its safety net, once written.
const setJobSQL = `UPDATE tasks SET job_id = $2 WHERE id = $1`

// safetyNetBatch bounds the nets one WriteSafetyNetsOnce transaction writes.
const safetyNetBatch = 100

// WriteSafetyNetsOnce writes the safety net of every run on arrival that
// has outlived its job timeout plus safetyNetGrace without one: its
// process died or stalled mid-call. Such a task is running, holds its
// reservation and has no job. Its net is a River job available at once,
// which finds the journal entry "sent" and counts the call as possibly
// made. The task's row is locked
// (SKIP LOCKED: a run finishing it right now goes first, and the task is
// then no longer running), so a net is written once, whichever instances
// sweep. It returns how many it wrote.
//
// Unfinished tasks are found by their held reservations (the index
// budget_reservations_held_created): an index of tasks on their status or
// finish would make every finish change an indexed column, and a finish
// could no longer be a HOT update (the baseline migration).
func (s *Service) WriteSafetyNetsOnce(ctx context.Context) (int, error) {
	return s.maintenance.writeSafetyNetsOnce(ctx)
}

// writeSafetyNetsOnce carries out Service.WriteSafetyNetsOnce.
func (s *maintenance) writeSafetyNetsOnce(ctx context.Context) (int, error) {
	n := 0
	for {
		wrote := 0
		err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			rows, err := tx.Query(ctx, `
				SELECT t.id::text, t.model,
				       (SELECT a.provider_key FROM task_attempts a WHERE a.task_id = t.id ORDER BY a.attempt DESC LIMIT 1)
				FROM budget_reservations r JOIN tasks t ON t.id = r.task_id
				WHERE r.state = 'held' AND r.created_at < now() - $1::interval
				  AND t.status = 'running' AND t.job_id IS NULL
				ORDER BY r.created_at
				LIMIT $2
				FOR UPDATE OF t SKIP LOCKED`, s.cfg.jobTimeout()+safetyNetGrace, safetyNetBatch)
			if err != nil {
				return err
			}
			defer rows.Close()
			type lost struct{ id, model, queue string }
			var found []lost
			for rows.Next() {
				var l lost
				var journalled *string
				if err := rows.Scan(&l.id, &l.model, &journalled); err != nil {
					return err
				}
				switch m, _, err := s.cfg.Catalog.Resolve(l.model); {
				case journalled != nil:
					l.queue = queueFor(*journalled)
				case err == nil:
					l.queue = queueFor(m.Provider)
				default:
					continue // no provider key to queue it on; the reaper fails it past its deadline
				}
				found = append(found, l)
			}
			if err := rows.Err(); err != nil {
				return err
			}
			if len(found) == 0 {
				return nil
			}
			jobs := make([]river.InsertManyParams, len(found))
			for i, l := range found {
				jobs[i] = river.InsertManyParams{Args: TaskArgs{TaskID: l.id}, InsertOpts: &river.InsertOpts{Queue: l.queue}}
			}
			res, err := s.river.InsertManyTx(ctx, tx, jobs)
			if err != nil {
				return err
			}
			if len(res) != len(found) {
				return fmt.Errorf("%d nets written for %d tasks", len(res), len(found))
			}
			b := &pgx.Batch{}
			for i, l := range found {
				b.Queue(setJobSQL, l.id, res[i].Job.ID)
				s.cfg.Logger.LogAttrs(ctx, slog.LevelWarn, "run on arrival outlived its deadline; its safety net will finish the task",
					slog.String("task_id", l.id))
			}
			if err := tx.SendBatch(ctx, b).Close(); err != nil {
				return err
			}
			wrote = len(found)
			return nil
		})
		if err != nil {
			return n, fmt.Errorf("tasks: nets: %w", err)
		}
		n += wrote
		if wrote < safetyNetBatch {
			return n, nil
		}
	}
}

// safetyNetLoop runs WriteSafetyNetsOnce every interval until ctx ends. Every instance may
// run it: SKIP LOCKED keeps them from writing a task's net twice.
func (s *maintenance) safetyNetLoop(ctx context.Context, interval time.Duration) {
	periodic.Every(ctx, interval, func(ctx context.Context) {
		if _, err := s.writeSafetyNetsOnce(ctx); err != nil && ctx.Err() == nil {
			s.cfg.Logger.Warn("writing safety nets failed", slog.String("error", err.Error()))
		}
	})
}
