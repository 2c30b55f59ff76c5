package tasks

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"github.com/tollgate/tollgate/budget"
	"github.com/tollgate/tollgate/catalog"
	"github.com/tollgate/tollgate/gate"
	"github.com/tollgate/tollgate/internal/pipetx"
	"github.com/tollgate/tollgate/tracing"
)

// applied is what applying a decision came to, for what follows its
// commit.
type applied struct {
	final         *outcome // the task's end, when it ended
	breakerOpened bool     // this call opened the key's breaker
	announce      bool     // the task waits blocked: synchronous callers stop waiting
	after         error    // what the job does next (recordOutcome)
}

// applying is a decision being carried out: its transaction, the call,
// the task as read under lock, c's records not sent yet (sent with the
// COMMIT) and what it has come to so far.
type applying struct {
	tx      *pipetx.Tx
	c       *finishedCall
	st      attemptState
	pending *pgx.Batch
	out     applied
}

// apply carries out d for c in tx, on the task as st read it under lock;
// pending holds c's records not sent yet, sent with the COMMIT. It
// switches on what d says happens, never on the call's failure class.
func (s *applier) apply(ctx context.Context, tx *pipetx.Tx, c *finishedCall, st attemptState, d decision, pending *pgx.Batch) (applied, error) {
	at := &applying{tx: tx, c: c, st: st, pending: pending}
	err := s.applyDecision(ctx, at, d)
	return at.out, err
}

// applyDecision is apply's work: the gate first, then a fallback when d
// asks for one, then the step d names.
func (s *applier) applyDecision(ctx context.Context, at *applying, d decision) error {
	tx, c, t := at.tx, at.c, at.st.task
	gateWait, err := s.moveGate(ctx, at, d.gate)
	if err != nil {
		return err
	}
	if d.fallback {
		if switched, err := s.fallback(ctx, tx, c.r, t, c.b.model, c.failureLog()); err != nil || switched {
			return err // moved to another model: the decision ends here
		}
	}
	switch d.next {
	case stepRecordOnly:
		if err := c.r.complete(ctx, tx); err != nil {
			return err
		}
		return tx.CommitWith(ctx, at.pending)
	case stepSucceed:
		return s.applySuccess(ctx, at, d)
	case stepCancel:
		return s.applyEnd(ctx, at, StatusCanceled, d)
	case stepFail:
		return s.applyEnd(ctx, at, StatusFailed, d)
	case stepWait:
		wait := s.cfg.snooze(gateWait, at.st.left)
		if err := s.later(ctx, at, river.JobSnooze(wait), wait); err != nil {
			return err
		}
		at.out.announce = true
		return requeue(ctx, tx, t.ID, d.failure)
	case stepRetry:
		return s.applyRetry(ctx, at, d)
	}
	return fmt.Errorf("tasks: no such step %d", d.next)
}

// moveGate makes the key's gate change g. A closing is queued on pending
// (whether it was closed is read with the batch); a pause or an opening is
// written now, and it returns how long the gate then stops calls.
func (s *applier) moveGate(ctx context.Context, at *applying, g gateChange) (time.Duration, error) {
	c := at.c
	key := c.b.model.Provider
	switch g.move {
	case gateClose:
		gate.QueueClose(at.pending, key, &c.res.wasClosed)
	case gatePause:
		wait, err := gate.PauseTx(ctx, at.tx, key, g.pause, g.class, g.code)
		if err != nil {
			return 0, err
		}
		c.failureLog().Info("provider key throttled: pausing the key", slog.Int64("pause_ms", wait.Milliseconds()))
		return wait, nil
	case gateOpen:
		opened, err := gate.OpenTx(ctx, at.tx, key, s.cfg.ProbeEvery, g.class, g.code)
		if err != nil {
			return 0, err
		}
		at.out.breakerOpened = opened
		// One ALERT per opening: a failed probe, or another task failing on
		// the same account, finds the breaker open and says so at info.
		if opened {
			c.failureLog().Error("ALERT provider key exhausted: circuit breaker opened; tasks stay queued until a probe succeeds")
		} else {
			c.failureLog().Info("provider key still exhausted: circuit breaker stays open")
		}
		return s.cfg.ProbeEvery, nil
	}
	return 0, nil
}

// applySuccess ends the task with the call's answer: its end and its
// settlement queued after the call's records and sent with COMMIT, under
// the owner's queue (budgetQueue.commit).
func (s *applier) applySuccess(ctx context.Context, at *applying, d decision) error {
	c, t := at.c, at.st.task
	c.r.queueDone(at.pending)
	var settle budget.Settlements
	if err := s.queueSuccessEnd(at.pending, &settle, t, c, d); err != nil {
		return err
	}
	settle.Queue(at.pending, s.cfg.AlertThresholds)
	if err := s.budgetRows.commit(ctx, at.tx, t.OwnerID, at.pending); err != nil {
		return err
	}
	at.out.final = c.res.logged(c.log)
	return nil
}

// applyEnd ends the task without an answer, as status (canceled or
// failed, for d.failure), closes its reservation as d.money says, and ends
// the run's job.
func (s *applier) applyEnd(ctx context.Context, at *applying, status Status, d decision) error {
	c, t := at.c, at.st.task
	money, err := s.outcomes.closeMoney(ctx, at.tx, t, d.money)
	if err != nil {
		return err
	}
	if err := finish(ctx, at.tx, t.ID, status, nil, d.failure); err != nil {
		return err
	}
	at.out.final = &outcome{taskID: t.ID, status: status, created: t.CreatedAt, money: money}
	if d.failure != nil {
		at.out.final.code = d.failure.Code
		c.failureLog().Info("task finished", slog.String("final_status", string(status)), slog.String("code", d.failure.Code))
	}
	return c.r.complete(ctx, at.tx)
}

// applyRetry queues the task again for the retry d decided: River's run
// fails its job with the call's error (retryError); an inline run's
// safety net is due after the backoff.
func (s *applier) applyRetry(ctx context.Context, at *applying, d decision) error {
	c := at.c
	if err := s.later(ctx, at, &retryError{d.cause}, d.retryAfter); err != nil {
		return err
	}
	c.failureLog().Info("attempt failed; will retry")
	return requeue(ctx, at.tx, c.b.task.ID, nil)
}

// later makes the task's next run wait: a River run returns next (a snooze
// or a retry) to River; an inline run moves its safety net to after wait,
// in the transaction.
func (s *applier) later(ctx context.Context, at *applying, next error, wait time.Duration) error {
	at.out.after = next
	if at.c.r.inline {
		return s.reschedule(ctx, at.tx, at.c.r, wait)
	}
	return nil
}

// requeueSQL puts a task back in the queue; $2 is why it waits (its
// provider key's gate), NULL for a plain retry.
const requeueSQL = `UPDATE tasks SET status = 'queued', error = $2, updated_at = now() WHERE id = $1`

// requeue puts task id back in the queue, waiting for why (nil: a retry).
func requeue(ctx context.Context, tx pgx.Tx, id string, why *Failure) error {
	_, err := tx.Exec(ctx, requeueSQL, id, why)
	return err
}

// fallback moves the task to the next model of its chain that can take
// the request (fits: its capabilities, context window and provider) and
// whose provider key's breaker is not open: the task is
// requeued on that model's provider queue (a new job in this transaction)
// and the current job completes. It reports whether it switched.
func (s *applier) fallback(ctx context.Context, tx pgx.Tx, r *run, t Task, current catalog.Model, log *slog.Logger) (bool, error) {
	requested, _, err := s.cfg.Catalog.Resolve(t.Request.Model)
	if err != nil {
		return false, nil
	}
	chain := s.cfg.Catalog.Chain(requested)
	at := slices.IndexFunc(chain, func(m catalog.Model) bool { return m.Name == current.Name })
	for _, next := range chain[at+1:] {
		if s.fitting.fits(next, t.Request) != nil {
			continue
		}
		mode, err := gate.ModeTx(ctx, tx, next.Provider)
		if err != nil {
			return false, err
		}
		if mode == gate.Open {
			continue
		}
		res, err := s.river.InsertTx(ctx, tx, TaskArgs{TaskID: t.ID, TraceID: r.traceID, TraceParent: tracing.TraceParent(ctx)}, &river.InsertOpts{Queue: queueFor(next.Provider)})
		if err != nil {
			return false, err
		}
		if _, err := tx.Exec(ctx, `UPDATE tasks SET model = $2, status = 'queued', error = NULL, job_id = $3, updated_at = now() WHERE id = $1`, t.ID, next.Name, res.Job.ID); err != nil {
			return false, err
		}
		if err := r.complete(ctx, tx); err != nil {
			return false, err
		}
		log.Warn("falling back to the next model of the chain", slog.String("fallback_model", next.Name), slog.String("fallback_provider_key", next.Provider))
		return true, nil
	}
	return false, nil
}
