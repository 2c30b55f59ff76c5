package tasks

// This file holds what Tollgate reads or writes of River's own rows beyond
// River's API: each piece says what River offers and why it does not do.
// Everything else goes through River's client (InsertTx, InsertManyTx,
// JobCompleteTx, JobGetTx).

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
)

// dropNetSQL deletes an inline run's safety net once its task has ended
// ($1 the job id). A net that has started running (this process stalled
// past its time) is left to finish: its run finds the task finished and
// completes itself.
//
// Why not JobDeleteTx: this statement is queued on the batch that ends the
// task and is sent with its COMMIT (pipetx), where a call to River's
// client, a round trip of its own, cannot go; and JobDeleteTx deletes a
// net in any state but running, where this one leaves a net that has run
// to finish as it would.
const dropNetSQL = `DELETE FROM river_job WHERE id = $1 AND state IN ('scheduled', 'available')`

// rescheduleJob makes job id, a safety net not yet running, due after
// wait: available at once with a future time when the wait is short, so
// that River's scheduler's interval does not stretch it; scheduled
// otherwise.
//
// Why SQL: River's client changes a job's time only to make it available
// now (JobRetryTx); it has no call to move a scheduled job to a given time.
func rescheduleJob(ctx context.Context, tx pgx.Tx, id int64, wait time.Duration) error {
	_, err := tx.Exec(ctx, `
		UPDATE river_job SET scheduled_at = now() + $2::interval,
		       state = CASE WHEN $2::interval <= $3::interval THEN 'available' ELSE 'scheduled' END::river_job_state
		WHERE id = $1 AND state IN ('scheduled', 'available')`, id, wait, riverSchedulerInterval)
	return err
}

// riverSchedulerInterval is how often River's scheduler makes scheduled
// jobs available (River's default, which Tollgate keeps).
const riverSchedulerInterval = 5 * time.Second
