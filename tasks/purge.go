package tasks

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"github.com/tollgate/tollgate/limits"
	"github.com/tollgate/tollgate/webhooks"
)

// PurgeBodies erases the bodies of finished tasks older than their owner's
// body retention, as of now, in batches of batch rows, each batch its own
// short transaction (SKIP LOCKED, so it never waits on or blocks live
// work). Metadata stays. It returns how many tasks it erased.
func (s *Service) PurgeBodies(ctx context.Context, now time.Time, batch int) (int64, error) {
	return s.maintenance.purgeBodies(ctx, now, batch)
}

// purgeBodies carries out Service.PurgeBodies.
func (s *maintenance) purgeBodies(ctx context.Context, now time.Time, batch int) (int64, error) {
	if batch <= 0 {
		batch = 1000
	}
	var total int64
	for {
		var n int64
		err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			rows, err := tx.Query(ctx, `
				SELECT t.id::text FROM tasks t JOIN owners o ON o.id = t.owner_id
				WHERE t.bodies_erased_at IS NULL AND t.finished_at IS NOT NULL
				  AND t.finished_at < $1::timestamptz - make_interval(days => o.body_retention_days)
				ORDER BY t.created_at
				LIMIT $2
				FOR UPDATE OF t SKIP LOCKED`, now, batch)
			if err != nil {
				return err
			}
			ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
			if err != nil || len(ids) == 0 {
				return err
			}
			n, err = eraseTx(ctx, tx, ids, "system", "retention")
			return err
		})
		if err != nil {
			return total, fmt.Errorf("tasks: purge: %w", err)
		}
		total += n
		if n < int64(batch) {
			return total, nil
		}
	}
}

// PurgeArgs is the periodic River job that applies body retention. River
// enqueues periodic jobs from its elected leader only, so one instance
// purges at a time however many run.
type PurgeArgs struct{}

// Kind names the job kind in river_job.
func (PurgeArgs) Kind() string { return "tollgate_purge_bodies" }

type purgeWorker struct {
	river.WorkerDefaults[PurgeArgs]
	m *maintenance
}

// Work applies body retention, then webhook events' retention
// (webhooks.EventRetention).
func (w *purgeWorker) Work(ctx context.Context, _ *river.Job[PurgeArgs]) error {
	now := w.m.cfg.Now()
	n, err := w.m.purgeBodies(ctx, now, 1000)
	if n > 0 {
		w.m.cfg.Logger.Info("retention purged task bodies", slog.Int64("tasks", n))
	}
	if err != nil {
		return err
	}
	if _, err = limits.Purge(ctx, w.m.pool, now.Add(-limits.Retention)); err != nil {
		return err
	}
	n, err = webhooks.PurgeEvents(ctx, w.m.pool, now.Add(-webhooks.EventRetention))
	if n > 0 {
		w.m.cfg.Logger.Info("retention deleted webhook events", slog.Int64("events", n))
	}
	return err
}
