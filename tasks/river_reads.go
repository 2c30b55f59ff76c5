package tasks

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
)

// River's tables read with SQL of this package, where River's client has
// no call that does the same (River v0.51: JobGetTx, JobListTx,
// JobCancelTx).

// queueWaitSQL reads, per provider queue, how long the job River will fetch
// next has been due: the first available job in the order of River's
// fetch index (state, queue, priority, scheduled_at, id), so one index
// probe per queue however long the backlog. Snoozed and paused work
// (behind a breaker, a Retry-After) is scheduled, not available, and does
// not count: that wait is the provider's, and leaves new work queued.
//
// River's JobListTx cannot: it orders by id, scheduled_at or the state's
// time, never by priority first as River fetches, it lists one set of
// queues per call instead of the head of each, and it reads whole rows
// (their args among them) where only a time is needed.
const queueWaitSQL = `
	SELECT q.queue, COALESCE(GREATEST(EXTRACT(EPOCH FROM now() - j.scheduled_at), 0), 0)::float8
	FROM unnest($1::text[]) AS q(queue)
	LEFT JOIN LATERAL (
		SELECT scheduled_at FROM river_job
		WHERE state = 'available' AND queue = q.queue
		ORDER BY priority, scheduled_at, id
		LIMIT 1) j ON true`

// readQueueWaits returns how long the next job of each of queues has been
// due (queueWaitSQL), zero for an empty queue, in one query.
func readQueueWaits(ctx context.Context, q querier, queues []string) (map[string]time.Duration, error) {
	rows, err := q.Query(ctx, queueWaitSQL, queues)
	if err != nil {
		return nil, err
	}
	waits := make(map[string]time.Duration, len(queues))
	var queue string
	var secs float64
	_, err = pgx.ForEachRow(rows, []any{&queue, &secs}, func() error {
		waits[queue] = time.Duration(secs * float64(time.Second))
		return nil
	})
	return waits, err
}

// lockJobState locks the River job id's row (FOR UPDATE) and returns its
// state, "" when there is no such job. A worker that has fetched the job
// may be about to begin an attempt (its begin, which locks the task after
// Cancel, then finds the cancel asked), and one that has not cannot fetch
// it until the transaction ends, since River fetches with SKIP LOCKED: no
// run starts while Cancel decides.
//
// River's JobGetTx reads the row without locking it, so a worker could
// fetch the job between the read and the cancel; and JobCancelTx on a
// running job cancels the run's context, interrupting a call Cancel lets
// finish and settles for.
func lockJobState(ctx context.Context, tx pgx.Tx, id int64) (string, error) {
	var state string
	err := tx.QueryRow(ctx, `SELECT state FROM river_job WHERE id = $1 FOR UPDATE`, id).Scan(&state)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	return state, err
}
