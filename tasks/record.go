package tasks

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tollgate/tollgate/internal/pipetx"
	"github.com/tollgate/tollgate/provider"
	"github.com/tollgate/tollgate/replay"
)

// finishedCall is one provider call that has ended, on its way to be
// recorded: the run and attempt that made it and what came back.
type finishedCall struct {
	r       *run
	b       *begunAttempt
	resp    *provider.Response
	err     *provider.Error // nil: the call answered
	latency time.Duration
	log     *slog.Logger // with the task, the attempt and the call
	res     successResult
}

// newFinishedCall is the call b of run r made, which returned resp and
// callErr after latency. An error that is not the provider's counts as
// ambiguous: the provider may have run the request.
func (s *recording) newFinishedCall(r *run, b *begunAttempt, resp *provider.Response, callErr error, latency time.Duration) *finishedCall {
	var pe *provider.Error
	if callErr != nil && !errors.As(callErr, &pe) {
		pe = &provider.Error{Class: provider.ClassAmbiguous, Code: "client_error"}
	}
	log := s.cfg.Logger.With(slog.String("task_id", b.task.ID), slog.String("owner_id", b.task.OwnerID),
		slog.String("model", b.model.Name), slog.String("provider", b.prov.Kind),
		slog.String("provider_key", b.prov.Key), slog.Int("attempt", b.attempt),
		slog.Int("upstream_latency_ms", int(latency/time.Millisecond)), slog.Bool("probe", b.probe), slog.String("trace_id", r.traceID))
	return &finishedCall{r: r, b: b, resp: resp, err: pe, latency: latency, log: log}
}

// failureLog is c's logger with the failure's class and provider status
// and code.
func (c *finishedCall) failureLog() *slog.Logger {
	if c.err == nil {
		return c.log
	}
	return c.log.With(slog.String("class", string(c.err.Class)), slog.Int("provider_status", c.err.Status), slog.String("provider_code", c.err.Code))
}

// recordRun records an attempt's outcome; afterRecord decides what follows
// a failure. A succeeded call's answer is kept (kept.go) before anything
// else, so that no later run calls again for it. A River run that cannot
// record is then retried by River, whose next run finds the answer kept
// (or, if even keeping it failed, the attempt's entry still "sent", which
// it counts as possibly charged). An inline run has no River run behind
// it, and its safety net would take over only later: it tries again while
// ctx lasts (at most RecordWithin), since the usual cause is a database
// restarting. Trying again is safe: a transaction that did not commit left
// nothing, and one that committed without its answer reaching us refuses
// the repeat (the replay record's key is taken).
func (s *recording) recordRun(ctx context.Context, c *finishedCall) error {
	r, b := c.r, c.b
	if r.inline {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, s.cfg.RecordWithin)
		defer cancel()
	}
	wait := 100 * time.Millisecond
	for {
		err := s.recordOutcome(ctx, c)
		step := afterRecord(err, recordCase{answer: c.err == nil, kept: b.keptKey != 0, inline: r.inline})
		if step.forget {
			// Best effort: the task is finished; a copy left over is
			// dropped by the next run that finds it so.
			_, _ = s.pool.Exec(context.WithoutCancel(ctx), forgetKeptSQL, b.task.ID, b.keptKey)
		}
		if step.keep {
			s.keepUnrecorded(ctx, c)
		}
		if !step.again {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(wait):
		}
		wait = min(2*wait, 2*time.Second)
	}
}

// keepUnrecorded keeps the answer of c, whose recording failed, for the
// task's next run to record (keepAnswer), and says so in the log.
func (s *recording) keepUnrecorded(ctx context.Context, c *finishedCall) {
	b := c.b
	b.keptKey = b.attempt // from now on, its recording drops the copy
	kctx, kcancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	kerr := s.keepAnswer(kctx, c)
	kcancel()
	if kerr != nil {
		s.cfg.Logger.LogAttrs(ctx, slog.LevelError, "ALERT outcome not recorded and answer not kept; the call counts as possibly charged",
			slog.String("task_id", b.task.ID), slog.Int("attempt", b.attempt), slog.String("error", kerr.Error()), slog.String("trace_id", c.r.traceID))
		return
	}
	s.cfg.Logger.LogAttrs(ctx, slog.LevelWarn, "outcome not recorded; the answer is kept for the next run to record",
		slog.String("task_id", b.task.ID), slog.Int("attempt", b.attempt), slog.String("trace_id", c.r.traceID))
}

// retryError is what a run returns to River, once its attempt is
// recorded, to have the job retried; its type tells the run's caller
// (afterRecord, runOnArrival) that the outcome was recorded and a retry
// decided, not that recording failed. It hides the call's cause from
// River on purpose: were it a context cancellation (a call cut short by a
// shutdown), River would make the job available again at once, without
// the backoff the decision asked for.
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

// recordOutcome records c and carries out what follows it (decide), then
// tells metrics and waiters. A success goes through the recorder, which
// may record it with the owner's other successes; a failure is recorded
// in a transaction of its own. It returns what the job does next: nil, a
// snooze (river.JobSnooze) or a retry (retryError).
func (s *recording) recordOutcome(ctx context.Context, c *finishedCall) error {
	c.res = successResult{}
	var a applied
	var err error
	if c.err == nil {
		a, err = s.recorder.record(ctx, c)
	} else {
		a, err = s.recordAlone(ctx, c)
	}
	if err != nil {
		return fmt.Errorf("tasks: record outcome: %w", err)
	}
	s.afterOutcome(c, a)
	return a.after
}

// recordAlone records c in a transaction of its own: the task locked with
// its journal, the attempt's records, then what decide makes of it,
// applied. A failure's records are written before deciding, for the
// journal's counts to include it; a success's go with the COMMIT.
func (s *recording) recordAlone(ctx context.Context, c *finishedCall) (applied, error) {
	var a applied
	err := pipetx.Run(ctx, s.pool, func(tx *pipetx.Tx) error {
		st, err := lockAttemptState(ctx, tx, c.b.task.ID)
		if err != nil {
			return err
		}
		st.task.Request = c.b.raw // estimates below see what the provider saw
		pending := &pgx.Batch{}
		if err := s.queueAttemptRecords(pending, st.task, c); err != nil {
			return err
		}
		if c.err != nil {
			if err := tx.SendBatch(ctx, pending).Close(); err != nil {
				return err
			}
			pending = &pgx.Batch{}
			if st.jc, err = countJournal(ctx, tx, st.task.ID, c.b.model.Name); err != nil {
				return err
			}
		}
		d := decide(s.lockedTask(c.r, st), c.err, s.outcomeLimits(c.b.attempt))
		a, err = s.applier.apply(ctx, tx, c, st, d, pending)
		return err
	})
	return a, err
}

// lockedTask is what decide needs of st, read under lock for run r.
func (s *recording) lockedTask(r *run, st attemptState) lockedTask {
	return lockedTask{run: r.kind(), final: st.task.Status.Final(), cancelRequested: st.task.CancelRequested,
		counted: st.jc.counted, ambiguous: st.jc.ambiguous, maxAttempts: s.cfg.maxAttemptsOf(st.task)}
}

// outcomeLimits are the limits decide applies to the attempt-th call.
func (s *recording) outcomeLimits(attempt int) outcomeLimits {
	return outcomeLimits{ambiguousRetries: s.cfg.AmbiguousRetries, retryBase: s.cfg.RetryBase, retryMax: s.cfg.RetryMax,
		backoff: s.cfg.backoff(attempt)}
}

// afterOutcome is what follows a committed outcome: the provider call's
// metrics, the breaker's opening, and waiters told.
func (s *recording) afterOutcome(c *finishedCall, a applied) {
	b, pe := c.b, c.err
	class, status, unclassified := "success", 0, false
	if pe != nil {
		class, status, unclassified = string(pe.Class), pe.Status, pe.Unclassified()
		if unclassified {
			c.log.Warn("provider error matched no rule; classified by status alone", slog.String("class", class), slog.Int("provider_status", status))
		}
	}
	s.cfg.Metrics.ProviderCall(b.model.Provider, s.outcomes.modelLabel(b.model.Name), class, unclassified, status, c.latency)
	if a.breakerOpened {
		s.cfg.Metrics.BreakerOpened(b.model.Provider)
	}
	if a.announce {
		s.waiter.announce(b.task.ID, nil)
	}
	s.outcomes.observe(a.final)
}

// attemptState is the journal state c's attempt ends in: succeeded,
// failed, or ambiguous (the provider may have run it).
func (c *finishedCall) journalState() string {
	switch {
	case c.err == nil:
		return "succeeded"
	case c.err.Class == provider.ClassAmbiguous:
		return "ambiguous"
	}
	return "failed"
}

// queueAttemptRecords queues the statements that record c's attempt on t:
// its journal entry and replay record, and the drop of its kept copy.
func (s *recording) queueAttemptRecords(batch *pgx.Batch, t Task, c *finishedCall) error {
	state := c.journalState()
	queueJournal(batch, c.b, state, c.err)
	if err := replay.QueueInsert(batch, s.outcomeRecord(t, c, state)); err != nil {
		return err
	}
	if c.b.keptKey != 0 {
		batch.Queue(forgetKeptSQL, t.ID, c.b.keptKey) // recorded: the copy goes with it
	}
	return nil
}
