package tasks

import (
	"context"
	"errors"
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
	"github.com/tollgate/tollgate/provider"
	"github.com/tollgate/tollgate/replay"
	"github.com/tollgate/tollgate/tracing"
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
func (s *Service) newFinishedCall(r *run, b *begunAttempt, resp *provider.Response, callErr error, latency time.Duration) *finishedCall {
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
// (or, if even keeping it failed, the attempt unrecorded and possibly
// charged). An inline run has no River run behind it, and its safety net
// would take over only later: it tries again while ctx lasts (at most
// RecordWithin), since the usual cause is a database restarting. Trying
// again is safe: a transaction that did not commit left nothing, and one
// that committed without its answer reaching us refuses the repeat (the
// replay record's key is taken).
func (s *Service) recordRun(ctx context.Context, c *finishedCall) error {
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
func (s *Service) keepUnrecorded(ctx context.Context, c *finishedCall) {
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

// recordOutcome records c and carries out what follows it (decide), then
// tells metrics and waiters. A success goes through the recorder, which
// may record it with the owner's other successes; a failure is recorded
// in a transaction of its own. It returns what the job does next: nil, a
// snooze (river.JobSnooze) or a retry (retryError).
func (s *Service) recordOutcome(ctx context.Context, c *finishedCall) error {
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
func (s *Service) recordAlone(ctx context.Context, c *finishedCall) (applied, error) {
	var a applied
	err := pipetx.Run(ctx, s.pool, func(tx *pipetx.Tx) error {
		st, err := lockAttemptState(ctx, tx, c.b.task.ID)
		if err != nil {
			return err
		}
		st.task.Request = c.b.raw // estimates below see what the provider saw
		c.numberAfter(st)
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
		a, err = s.apply(ctx, tx, c, st, d, pending)
		return err
	})
	return a, err
}

// numberAfter gives c's attempt the next free number of the journal st
// read, unless its entry was committed "sent" before the call: the number
// the run expected, unless a rescued duplicate of the job recorded first.
func (c *finishedCall) numberAfter(st attemptState) {
	if !c.b.sent {
		c.b.attempt = st.last + 1
	}
}

// lockedTask is what decide needs of st, read under lock for run r.
func (s *Service) lockedTask(r *run, st attemptState) lockedTask {
	return lockedTask{run: r.kind(), final: st.task.Status.Final(), cancelRequested: st.task.CancelRequested,
		counted: st.jc.counted, ambiguous: st.jc.ambiguous, maxAttempts: s.maxAttemptsOf(st.task)}
}

// outcomeLimits are the limits decide applies to the attempt-th call.
func (s *Service) outcomeLimits(attempt int) outcomeLimits {
	return outcomeLimits{ambiguousRetries: s.cfg.AmbiguousRetries, retryBase: s.cfg.RetryBase, retryMax: s.cfg.RetryMax,
		backoff: s.backoff(attempt)}
}

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
func (s *Service) apply(ctx context.Context, tx *pipetx.Tx, c *finishedCall, st attemptState, d decision, pending *pgx.Batch) (applied, error) {
	at := &applying{tx: tx, c: c, st: st, pending: pending}
	err := s.applyDecision(ctx, at, d)
	return at.out, err
}

func (s *Service) applyDecision(ctx context.Context, at *applying, d decision) error {
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
		wait := s.snooze(gateWait, at.st.left)
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
func (s *Service) moveGate(ctx context.Context, at *applying, g gateChange) (time.Duration, error) {
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
		if opened {
			c.failureLog().Error("ALERT provider key exhausted: circuit breaker opened; tasks stay queued until a probe succeeds")
		}
		return s.cfg.ProbeEvery, nil
	}
	return 0, nil
}

// applySuccess ends the task with the call's answer: its end and its
// settlement queued after the call's records and sent with COMMIT, under
// the owner's queue (commitOnBudget).
func (s *Service) applySuccess(ctx context.Context, at *applying, d decision) error {
	c, t := at.c, at.st.task
	c.r.queueDone(at.pending)
	var settle budget.Settlements
	if err := s.queueSuccessEnd(at.pending, &settle, t, c, d); err != nil {
		return err
	}
	settle.Queue(at.pending, s.cfg.AlertThresholds)
	if err := s.commitOnBudget(ctx, at.tx, t.OwnerID, at.pending); err != nil {
		return err
	}
	at.out.final = c.res.logged(c.log)
	return nil
}

// applyEnd ends the task without an answer, as status (canceled or
// failed, for d.failure), closes its reservation as d.money says, and ends
// the run's job.
func (s *Service) applyEnd(ctx context.Context, at *applying, status Status, d decision) error {
	c, t := at.c, at.st.task
	alerts, err := s.closeMoney(ctx, at.tx, t, d.money)
	if err != nil {
		return err
	}
	if err := finish(ctx, at.tx, t.ID, status, nil, d.failure); err != nil {
		return err
	}
	at.out.final = &outcome{taskID: t.ID, status: status, created: t.CreatedAt, alerts: alerts}
	if d.failure != nil {
		at.out.final.code = d.failure.Code
		c.failureLog().Info("task finished", slog.String("final_status", string(status)), slog.String("code", d.failure.Code))
	}
	return c.r.complete(ctx, at.tx)
}

// applyRetry queues the task again for the retry d decided: River's run
// fails its job with the call's error, naming itself on the attempt; an
// inline run's safety net is due after the backoff.
func (s *Service) applyRetry(ctx context.Context, at *applying, d decision) error {
	c := at.c
	if err := s.later(ctx, at, &retryError{d.cause}, d.retryAfter); err != nil {
		return err
	}
	c.failureLog().Info("attempt failed; will retry")
	if !c.r.inline {
		// This run fails the job to retry it; the entry River keeps for
		// that in river_job.errors is this attempt.
		if _, err := at.tx.Exec(ctx, `UPDATE task_attempts SET river_error_attempt = $3 WHERE task_id = $1 AND attempt = $2`,
			c.b.task.ID, c.b.attempt, c.r.attempt); err != nil {
			return err
		}
	}
	return requeue(ctx, at.tx, c.b.task.ID, nil)
}

// later makes the task's next run wait: a River run returns next (a snooze
// or a retry) to River; an inline run moves its safety net to after wait,
// in the transaction.
func (s *Service) later(ctx context.Context, at *applying, next error, wait time.Duration) error {
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

// afterOutcome is what follows a committed outcome: the provider call's
// metrics, the breaker's opening, and waiters told.
func (s *Service) afterOutcome(c *finishedCall, a applied) {
	b, pe := c.b, c.err
	class, status, unclassified := "success", 0, false
	if pe != nil {
		class, status, unclassified = string(pe.Class), pe.Status, pe.Unclassified()
		if unclassified {
			c.log.Warn("provider error matched no rule; classified by status alone", slog.String("class", class), slog.Int("provider_status", status))
		}
	}
	s.cfg.Metrics.ProviderCall(b.model.Provider, s.modelLabel(b.model.Name), class, unclassified, status, c.latency)
	if a.breakerOpened {
		s.cfg.Metrics.BreakerOpened(b.model.Provider)
	}
	if a.announce {
		s.waiter.announce(b.task.ID, nil)
	}
	s.observe(a.final)
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
func (s *Service) queueAttemptRecords(batch *pgx.Batch, t Task, c *finishedCall) error {
	state := c.journalState()
	queueJournal(batch, c.b, state, c.err, c.latency)
	if err := replay.QueueInsert(batch, s.outcomeRecord(t, c, state)); err != nil {
		return err
	}
	if c.b.keptKey != 0 {
		batch.Queue(forgetKeptSQL, t.ID, c.b.keptKey) // recorded: the copy goes with it
	}
	return nil
}

// successResult is what recording a succeeded call yields once its batch's
// results are read.
type successResult struct {
	task      Task
	finished  *Task // read back by the finishing statement when a request of this process waits for the task
	status    Status
	wasClosed bool
	settled   budget.Settled
	// implausible: the provider key whose usage report was beyond any
	// sane bound, charged capped at the reservation; "" when plausible.
	implausible string
}

// queueSuccess queues the whole record of c, a succeeded call, on an
// unfinished task whose row and journal st was read under lock: journal,
// replay record, gate, the task's end and, last, the settlement, which
// locks the owner's budget row. Sent with COMMIT (pipetx), the row is held
// only while PostgreSQL runs it and commits. A River run's job is completed
// by River once Work returns (its completions are batched across jobs); a
// job that runs again after a crash finds its task finished and makes no
// call.
//
// The settlement is added to settle, for the caller to queue after the
// records: a caller that records many successes sends their records first
// and only their settlements (one statement) with COMMIT, under the
// owner's queue.
func (s *Service) queueSuccess(batch *pgx.Batch, settle *budget.Settlements, st attemptState, c *finishedCall) error {
	t := st.task
	t.Request = c.b.raw
	if err := s.queueAttemptRecords(batch, t, c); err != nil {
		return err
	}
	gate.QueueClose(batch, c.b.model.Provider, &c.res.wasClosed)
	d := decideSuccess(lockedTask{cancelRequested: t.CancelRequested, ambiguous: st.jc.ambiguous})
	return s.queueSuccessEnd(batch, settle, t, c, d)
}

// logged logs a committed success and returns the task's outcome.
func (res *successResult) logged(log *slog.Logger) *outcome {
	t := res.task
	if !res.wasClosed {
		log.Warn("provider key gate closed: calls flow again")
	}
	if res.implausible != "" {
		log.Warn("ALERT provider reported implausible usage: charge capped at the reservation, shortfall recorded, attempt flagged",
			slog.Int64("charged_micros", res.settled.ChargedMicros), slog.Int64("shortfall_micros", res.settled.ShortfallMicros))
	}
	log.Info("task finished", slog.String("final_status", string(res.status)))
	return &outcome{taskID: t.ID, task: res.finished, status: res.status, created: t.CreatedAt, alerts: res.settled.Alerts,
		implausible: res.implausible}
}

// queueSuccessEnd queues the end of task t with c's answer, as d (a
// stepSucceed) says, and adds its settlement at the actual cost to settle:
// the provider's reported usage, or an estimate labelled as such when it
// reported none. Each earlier ambiguous attempt may have been charged by
// the provider too; the documented rule is to add its worst case (the
// task's reservation) and label the whole settlement possibly_charged, so
// finance sees an upper bound rather than a silent undercount. c.res is
// filled in when the batch's results are read: the settlement and, when a
// request of this process waits for the task, the task as its finish
// stored it.
func (s *Service) queueSuccessEnd(batch *pgx.Batch, settle *budget.Settlements, t Task, c *finishedCall, d decision) error {
	res, m, resp := &c.res, c.b.model, c.resp
	res.task, res.status, res.implausible, res.finished = t, d.status, "", nil
	implausible := implausibleUsage(resp)
	if implausible {
		queueImplausibleUsage(batch, c.b, resp.Usage)
		res.implausible = m.Provider
	}
	if s.waiter.waiting(t.ID) {
		res.finished = &Task{}
	}
	u, cost := s.usageOf(t, m, resp)
	var possible int64 // the ambiguous attempts' worst case
	if d.possiblyCharged > 0 {
		u.Source = budget.SourcePossiblyCharged
		possible = budget.SaturatingMul(int64(d.possiblyCharged), t.ReservedMicros)
		cost = budget.SaturatingAdd(cost, possible)
	}
	var charge *int64 // the most charged; nil: up to the headroom
	if implausible {
		c := budget.SaturatingAdd(t.ReservedMicros, possible)
		charge = &c
	}
	if d.status == StatusCanceled {
		queueFinish(batch, t.ID, StatusCanceled, nil, nil, res.finished)
	} else {
		// The answer is stored sealed, for the owner to poll; the result
		// row itself holds no text.
		out := resultOf(resp, m.Name, u, cost)
		out.seal(s.cfg.Sealer, t.ID)
		queueFinish(batch, t.ID, StatusSucceeded, &out, nil, res.finished)
	}
	// Settlement last: it locks the owner's budget row, which every task of
	// the owner needs.
	return settle.Add(budget.Settlement{
		TaskID: t.ID, Workload: t.Workload, Model: m.Name, InputTokens: u.InputTokens, OutputTokens: u.OutputTokens,
		CachedInputTokens: u.CachedInputTokens, CacheWriteTokens: u.CacheWriteTokens, ReasoningTokens: u.ReasoningTokens,
		Source: u.Source, CostMicros: cost, ChargeCapMicros: charge,
	}, &res.settled)
}

// usageOf is what resp's call used and cost on m: the provider's report
// by class, or an estimate labelled as such when it reported none (t's
// request is the one the provider saw). A report beyond any sane bound is
// recorded at the bound (budget.MaxUsageTokens; the journal keeps the
// figures as reported), and classes beyond their totals, a provider's
// error too, as the whole total, never as more tokens than it
// (budget.Tokens.Normalized).
func (s *Service) usageOf(t Task, m catalog.Model, resp *provider.Response) (Usage, int64) {
	u := Usage{Source: budget.SourceReported}
	if r := resp.Usage; r != nil {
		tok := budget.Tokens{Input: min(r.InputTokens, budget.MaxUsageTokens), Output: min(r.OutputTokens, budget.MaxUsageTokens),
			CachedInput: r.CachedInputTokens, CacheWrite: r.CacheWriteTokens, Reasoning: r.ReasoningTokens}
		u.setTokens(tok.Normalized())
	} else {
		u.Source = budget.SourceEstimated
		u.InputTokens, u.OutputTokens = s.inputTokens(m, t.Request.Chat), estimateOutput(resp)
	}
	return u, m.Price().CostOf(u.tokens())
}

// implausibleUsage reports whether resp's usage is beyond any sane bound
// (budget.PlausibleUsage).
func implausibleUsage(resp *provider.Response) bool {
	return resp.Usage != nil && !budget.PlausibleUsage(resp.Usage.InputTokens, resp.Usage.OutputTokens)
}

// fallback moves the task to the next model of its chain that can take
// the request (fits: its capabilities, context window and provider) and
// whose provider key's breaker is not open: the task is
// requeued on that model's provider queue (a new job in this transaction)
// and the current job completes. It reports whether it switched.
func (s *Service) fallback(ctx context.Context, tx pgx.Tx, r *run, t Task, current catalog.Model, log *slog.Logger) (bool, error) {
	requested, _, err := s.cfg.Catalog.Resolve(t.Request.Model)
	if err != nil {
		return false, nil
	}
	chain := s.cfg.Catalog.Chain(requested)
	at := slices.IndexFunc(chain, func(m catalog.Model) bool { return m.Name == current.Name })
	for _, next := range chain[at+1:] {
		if s.fits(next, t.Request) != nil {
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

// tokens returns u's figures by class.
func (u Usage) tokens() budget.Tokens {
	return budget.Tokens{Input: u.InputTokens, Output: u.OutputTokens, CachedInput: u.CachedInputTokens,
		CacheWrite: u.CacheWriteTokens, Reasoning: u.ReasoningTokens}
}

// setTokens sets u's figures from t.
func (u *Usage) setTokens(t budget.Tokens) {
	u.InputTokens, u.OutputTokens, u.CachedInputTokens, u.CacheWriteTokens, u.ReasoningTokens =
		t.Input, t.Output, t.CachedInput, t.CacheWrite, t.Reasoning
}
