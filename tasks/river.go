package tasks

// This file holds what Tollgate reads or writes of River's own rows beyond
// River's API: each piece says what River offers and why it does not do.
// Everything else goes through River's client (InsertTx, InsertManyTx,
// JobCompleteTx, JobGetTx).

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river/rivertype"

	"github.com/tollgate/tollgate/provider"
)

// noCallPrefix starts the text of every error a run returns before calling
// the provider. River keeps that text in river_job.errors, which is how a
// later run tells an attempt that never reached the provider from one that
// may have (see unrecordedRuns).
//
// Why the error's text: a run that fails before calling fails most often
// because the database is unreachable, so it cannot write the fact to a
// table of ours; River writes the run's error to its job row when the run
// returns, and an AttemptError carries only the time, the attempt number,
// the text and a trace. The text is the one field a run controls there.
const noCallPrefix = "tollgate: no call made: "

// noCallError is an error a run met before any provider call.
type noCallError struct{ err error }

func (e *noCallError) Error() string { return noCallPrefix + e.err.Error() }
func (e *noCallError) Unwrap() error { return e.err }

// retryError is what a run returns to River, after recording its attempt,
// to have the job retried. It hides the call's cause on purpose: were it a
// context cancellation, River would take the run for one cut short by a
// shutdown, reuse its attempt number and leave no entry in river_job.errors,
// and the journal names runs by those entries.
type retryError struct{ pe *provider.Error }

func (e *retryError) Error() string { return e.pe.Error() }

// As lets errors.As find the provider error (spans and logs read its class).
func (e *retryError) As(target any) bool {
	if p, ok := target.(**provider.Error); ok {
		*p = e.pe
		return true
	}
	return false
}

// unrecordedRuns are the earlier runs of the job that ended without
// recording an attempt: killed and rescued, timed out, or failed while
// recording after the call. Each may have called the provider. A run that
// records an attempt and then fails the job (to retry it) names itself in
// the attempt's river_error_attempt; a run that failed before calling says
// so in its error's text.
func unrecordedRuns(errs []rivertype.AttemptError, recorded []int32) []rivertype.AttemptError {
	var out []rivertype.AttemptError
	for _, e := range errs {
		if strings.HasPrefix(e.Error, noCallPrefix) || slices.Contains(recorded, int32(e.Attempt)) {
			continue
		}
		out = append(out, e)
	}
	return out
}

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
