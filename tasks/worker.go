package tasks

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/tollgate/tollgate/budget"
	"github.com/tollgate/tollgate/catalog"
	"github.com/tollgate/tollgate/gate"
	"github.com/tollgate/tollgate/internal/pipetx"
	"github.com/tollgate/tollgate/provider"
	"github.com/tollgate/tollgate/redact"
	"github.com/tollgate/tollgate/replay"
	"github.com/tollgate/tollgate/tracing"
)

// TaskArgs is the River job that runs one task.
type TaskArgs struct {
	TaskID  string `json:"task_id"`
	TraceID string `json:"trace_id,omitempty"`
	// TraceParent is the W3C traceparent of the span that enqueued the job
	// (the request's, or the task's for a fallback), so the job's spans
	// join the request's trace on whichever instance runs it.
	TraceParent string `json:"traceparent,omitempty"`
}

// Kind names the job kind in river_job.
func (TaskArgs) Kind() string { return "tollgate_task" }

type worker struct {
	river.WorkerDefaults[TaskArgs]
	svc *Service
}

// Timeout bounds one run of the job: the provider call plus the short
// transactions around it.
func (w *worker) Timeout(*river.Job[TaskArgs]) time.Duration {
	return w.svc.cfg.jobTimeout()
}

// NextRetry is bounded exponential backoff with full jitter: a uniform
// wait between zero and base·2^(attempt-1), capped at RetryMax, so
// transient failures are retried soon and never in lock-step.
func (w *worker) NextRetry(job *river.Job[TaskArgs]) time.Time {
	return time.Now().Add(w.svc.backoff(job.Attempt))
}

// backoff is the wait before the retry that follows the attempt-th run.
func (s *Service) backoff(attempt int) time.Duration {
	d := s.cfg.RetryBase << min(max(attempt-1, 0), 20)
	if d <= 0 || d > s.cfg.RetryMax {
		d = s.cfg.RetryMax
	}
	return rand.N(d + 1)
}

// Work runs one attempt of the task. See the package doc for how it is
// journalled; errors returned here make River retry the job later, and a
// snooze (river.JobSnooze) makes it wait without using an attempt.
func (w *worker) Work(ctx context.Context, job *river.Job[TaskArgs]) (err error) {
	s := w.svc
	ctx, span := tracing.Tracer().Start(tracing.Extract(ctx, job.Args.TraceParent), "task",
		trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithAttributes(attribute.String("tollgate.task.id", job.Args.TaskID), attribute.Int("tollgate.job.attempt", job.Attempt)))
	defer func() { endTaskSpan(span, err) }()
	r := riverRun(job)
	// A slot of the provider key's calls in this process, shared with
	// runs on arrival, which give way to waiting River runs.
	release, err := s.slots.acquire(ctx, r.providerKey)
	if err != nil {
		return &noCallError{err}
	}
	defer release()
	begun, wait, err := s.beginAttempt(ctx, r)
	if err != nil {
		return err
	}
	if begun == nil {
		return wait // nothing to call now: finished (nil), or waiting (a snooze)
	}
	span.SetAttributes(attribute.Int("tollgate.task.attempt", begun.attempt))
	if begun.fromKept != nil {
		return s.recordKept(ctx, r, begun) // an earlier run's answer, kept: no call
	}
	return s.callAndRecord(ctx, r, begun)
}

// callAndRecord makes begun's provider call and records its outcome.
func (s *Service) callAndRecord(ctx context.Context, r *run, begun *begunAttempt) error {
	started := s.cfg.Now()
	callCtx, cancel := context.WithTimeout(ctx, s.callTimeout(begun.task))
	callCtx, call := begun.startCall(callCtx)
	resp, callErr := s.cfg.Clients[begun.model.Provider].Complete(callCtx, s.providerRequest(begun))
	endCall(call, resp, callErr)
	cancel()
	latency := s.cfg.Now().Sub(started)

	// Record the outcome even if the job's context was canceled (shutdown):
	// a canceled call is exactly the outcome the journal must keep.
	rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer rcancel()
	return s.recordRun(rctx, r, begun, resp, callErr, latency)
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
func (s *Service) recordRun(ctx context.Context, r *run, b *begunAttempt, resp *provider.Response, callErr error, latency time.Duration) error {
	if r.inline {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, s.cfg.RecordWithin)
		defer cancel()
	}
	wait := 100 * time.Millisecond
	for {
		err := s.recordOutcome(ctx, r, b, resp, callErr, latency)
		step := afterRecord(err, recordCase{answer: callErr == nil, kept: b.keptKey != 0, inline: r.inline})
		if step.forget {
			// Best effort: the task is finished; a copy left over is
			// dropped by the next run that finds it so.
			_, _ = s.pool.Exec(context.WithoutCancel(ctx), forgetKeptSQL, b.task.ID, b.keptKey)
		}
		if step.keep {
			b.keptKey = b.attempt // from now on, its recording drops the copy
			kctx, kcancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			kerr := s.keepAnswer(kctx, r, b, resp, latency)
			kcancel()
			if kerr != nil {
				s.cfg.Logger.LogAttrs(ctx, slog.LevelError, "ALERT outcome not recorded and answer not kept; the call counts as possibly charged",
					slog.String("task_id", b.task.ID), slog.Int("attempt", b.attempt), slog.String("error", kerr.Error()), slog.String("trace_id", r.traceID))
			} else {
				s.cfg.Logger.LogAttrs(ctx, slog.LevelWarn, "outcome not recorded; the answer is kept for the next run to record",
					slog.String("task_id", b.task.ID), slog.Int("attempt", b.attempt), slog.String("trace_id", r.traceID))
			}
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

type begunAttempt struct {
	task    Task
	attempt int
	startAt time.Time
	probe   bool // this call is the open breaker's probe
	model   catalog.Model
	prov    catalog.Provider
	raw     Request // the unsealed request, in memory only
	stream  *replay.StreamInfo
	sent    bool // journalled as "sent" before the call (inline runs)
	// keptKey is the attempt number of the answer's kept copy, 0 when
	// none may exist: recording the attempt deletes the copy.
	keptKey int
	// riverRun is the River run whose entry in river_job.errors this
	// attempt's record explains (an answer kept by a run that failed).
	riverRun *int32
	// fromKept is set when the attempt records an earlier run's kept
	// answer instead of calling.
	fromKept *keptCall
}

// providerKey is the Idempotency-Key the provider sees for this attempt.
func (b *begunAttempt) providerKey() string { return fmt.Sprintf("%s:%d", b.task.ID, b.attempt) }

// startCall starts the span of this attempt's provider call. It names the
// provider key, its kind and the model; never the prompt, the output or the
// key's secret.
func (b *begunAttempt) startCall(ctx context.Context) (context.Context, trace.Span) {
	return tracing.Tracer().Start(ctx, "provider.call", trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(
			attribute.String("tollgate.task.id", b.task.ID), attribute.Int("tollgate.task.attempt", b.attempt),
			attribute.String("tollgate.provider.key", b.prov.Key), attribute.String("tollgate.provider.kind", b.prov.Kind),
			attribute.String("tollgate.model", b.model.Name), semconv.GenAIRequestModel(b.model.ProviderModel),
			attribute.Bool("tollgate.probe", b.probe)))
}

// endCall ends a provider call's span with its outcome: the class
// ("success" or the error's class, as recordOutcome classifies it), the
// provider's HTTP status and code, and the reported usage. Never the error's
// text, which may quote the provider's answer.
func endCall(span trace.Span, resp *provider.Response, callErr error) {
	class, status := "success", 0
	if resp != nil {
		status = resp.Status
		if resp.Usage != nil {
			span.SetAttributes(semconv.GenAIUsageInputTokens(int(resp.Usage.InputTokens)), semconv.GenAIUsageOutputTokens(int(resp.Usage.OutputTokens)))
		}
	}
	if callErr != nil {
		class = string(provider.ClassAmbiguous)
		var pe *provider.Error
		if errors.As(callErr, &pe) {
			class, status = string(pe.Class), pe.Status
			span.SetAttributes(attribute.String("tollgate.provider.code", pe.Code))
		}
		span.SetStatus(codes.Error, "")
		span.SetAttributes(semconv.ErrorTypeKey.String(class))
	}
	span.SetAttributes(attribute.String("tollgate.outcome.class", class))
	if status != 0 {
		span.SetAttributes(semconv.HTTPResponseStatusCode(status))
	}
	span.End()
}

// endTaskSpan ends a task run's span. An error that makes River retry the
// job marks it failed, by type only; a snooze is waiting, not failing.
func endTaskSpan(span trace.Span, err error) {
	var snooze *river.JobSnoozeError
	if err != nil && !errors.As(err, &snooze) {
		span.SetStatus(codes.Error, "")
		var pe *provider.Error
		if errors.As(err, &pe) {
			span.SetAttributes(semconv.ErrorTypeKey.String(string(pe.Class)))
		} else {
			span.SetAttributes(semconv.ErrorType(err))
		}
	}
	span.End()
}

// journalCounts summarises a task's attempts. Throttled and exhausted
// attempts do not count against the attempt limit: the request was not at
// fault, the provider key was. The limit counts per model, so a fallback
// model gets its own attempts; ambiguous attempts count over the whole task,
// since each may have been charged.
type journalCounts struct {
	counted   int
	ambiguous int
	sent      int // entries still "sent": calls whose run ended without recording them
	lastClass provider.Class
	lastCode  string
}

// possiblyCharged is how many calls of the journal the provider may have
// run and billed without an answer recorded: ambiguous ones, and ones
// still "sent" (their run ended mid-call). A task that ends with any is
// settled as possibly charged, never released as if nothing was spent.
func (c journalCounts) possiblyCharged() int { return c.ambiguous + c.sent }

func countJournal(ctx context.Context, tx pgx.Tx, taskID, model string) (journalCounts, error) {
	var c journalCounts
	var class, code *string
	err := tx.QueryRow(ctx, `
		SELECT count(*) FILTER (WHERE state <> 'sent' AND model = $2 AND COALESCE(class, '') NOT IN ('throttled', 'exhausted')),
		       count(*) FILTER (WHERE state = 'ambiguous'),
		       count(*) FILTER (WHERE state = 'sent'),
		       (SELECT class FROM task_attempts WHERE task_id = $1 AND class IS NOT NULL ORDER BY attempt DESC LIMIT 1),
		       (SELECT error_code FROM task_attempts WHERE task_id = $1 AND class IS NOT NULL ORDER BY attempt DESC LIMIT 1)
		FROM task_attempts WHERE task_id = $1`, taskID, model).Scan(&c.counted, &c.ambiguous, &c.sent, &class, &code)
	if class != nil {
		c.lastClass = provider.Class(*class)
	}
	if code != nil {
		c.lastCode = *code
	}
	return c, err
}

// noCallPrefix starts the text of every error a run returns before calling
// the provider. River keeps that text in river_job.errors, which is how a
// later run tells an attempt that never reached the provider from one that
// may have (see unrecordedRuns).
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

// attemptState is what decides whether a run may call the provider: the
// task, its journal and its deadline.
type attemptState struct {
	task     Task
	left     time.Duration // until the task's deadline
	sent     int           // journal entries still "sent" (an inline run's, interrupted)
	last     int           // the highest attempt number journalled
	recorded []int32       // River runs named by their recorded attempts
	jc       journalCounts
}

// attemptStateSQL reads a task with its journal in one query; $1 is the
// task id. The task comes without its stored request (an empty one in its
// place): every reader works on the unsealed request instead, and decoding
// the stored one's JSON was 7.5 % of the server's CPU at 300 tasks/s.
var attemptStateSQL = `
	SELECT ` + strings.Replace(taskColumns, " request,", " '{}'::jsonb AS request,", 1) + `, GREATEST(tasks.deadline_at - now(), interval '0'),
	       j.sent, j.last, j.recorded, j.counted, j.ambiguous
	FROM tasks, LATERAL (
		SELECT count(*) FILTER (WHERE a.state = 'sent') AS sent,
		       COALESCE(max(a.attempt), 0) AS last,
		       COALESCE(array_agg(a.river_error_attempt) FILTER (WHERE a.river_error_attempt IS NOT NULL), '{}') AS recorded,
		       count(*) FILTER (WHERE a.state <> 'sent' AND a.model = tasks.model
		                        AND COALESCE(a.class, '') NOT IN ('throttled', 'exhausted')) AS counted,
		       count(*) FILTER (WHERE a.state = 'ambiguous') AS ambiguous
		FROM task_attempts a WHERE a.task_id = tasks.id) j
	WHERE tasks.id = $1`

// lockAttemptState is readAttemptState with the task's row locked for the
// transaction, as lockTask locks it.
func lockAttemptState(ctx context.Context, tx pgx.Tx, id string) (attemptState, error) {
	return queryAttemptState(ctx, tx, attemptStateSQL+lockAttemptSQL, id)
}

// lockAttemptSQL turns attemptStateSQL into the read that locks the task
// for the transaction.
const lockAttemptSQL = ` FOR NO KEY UPDATE OF tasks`

func readAttemptState(ctx context.Context, q querier, id string) (attemptState, error) {
	return queryAttemptState(ctx, q, attemptStateSQL, id)
}

func queryAttemptState(ctx context.Context, q querier, sql, id string) (attemptState, error) {
	rows, err := q.Query(ctx, sql, id)
	if err != nil {
		return attemptState{}, err
	}
	return collectAttemptState(rows)
}

// collectAttemptState reads attemptStateSQL's row; ErrNotFound for none.
func collectAttemptState(rows pgx.Rows) (attemptState, error) {
	st, err := pgx.CollectExactlyOneRow(rows, func(r pgx.CollectableRow) (attemptState, error) {
		var st attemptState
		t, err := scanTaskInto(r, &st.left, &st.sent, &st.last, &st.recorded, &st.jc.counted, &st.jc.ambiguous)
		st.task = t
		return st, err
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return attemptState{}, ErrNotFound
	}
	return st, err
}

// beginAttempt decides whether the task may call the provider now. It
// returns the begun attempt, or nil and what the job should do instead (nil
// when the task is finished, or a snooze). Errors are noCallErrors.
//
// A River run on the happy path writes nothing here: its attempt is
// journalled when its outcome is recorded, and River's job row (attempt
// counter and errors, committed by the fetch and by River when a run
// fails) is the evidence of a run that may have called and died. Anything
// else, an interrupted run to record, a failure, a cancel, a closed gate or
// a probe to claim, takes the transactional path. An inline run (a streamed
// task, which has no River run to read) always does, and commits its
// journal entry as "sent" before the call.
func (s *Service) beginAttempt(ctx context.Context, r *run) (begun *begunAttempt, after, err error) {
	if !r.inline {
		begun, err := s.beginQuick(ctx, r)
		if err != nil {
			return nil, nil, &noCallError{fmt.Errorf("tasks: begin attempt: %w", err)}
		}
		if begun != nil {
			return begun, nil, nil
		}
	}
	begun, after, err = s.beginTx(ctx, r)
	if err != nil {
		return nil, nil, &noCallError{err}
	}
	return begun, after, nil
}

// beginQuick is a River run's happy path: two reads in one round trip and
// no transaction. It returns nil when the transactional path must decide.
func (s *Service) beginQuick(ctx context.Context, r *run) (*begunAttempt, error) {
	// The gate read is the job's queue's provider key: the key the task
	// runs on, unless a fallback moved it, which the check below catches.
	var st attemptState
	var mode gate.Mode
	b := &pgx.Batch{}
	b.Queue(attemptStateSQL, r.taskID).Query(func(rows pgx.Rows) (err error) {
		st, err = collectAttemptState(rows)
		return err
	})
	gate.QueuePeek(b, r.providerKey, &mode)
	err := s.pool.SendBatch(ctx, b).Close()
	if errors.Is(err, ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	t := st.task
	if t.Status.Final() || t.CancelRequested || st.sent > 0 || st.left <= 0 ||
		len(unrecordedRuns(r.errors, st.recorded)) > 0 ||
		st.jc.ambiguous > max(s.cfg.AmbiguousRetries, 0) || st.jc.counted >= s.maxAttemptsOf(t) || r.attempt >= r.maxAttempts {
		return nil, nil
	}
	m, prov, err := s.modelOf(t)
	if err != nil {
		return nil, nil
	}
	raw, err := s.rawRequest(t)
	if err != nil {
		return nil, nil
	}
	if m.Provider != r.providerKey || mode != gate.Closed {
		return nil, nil
	}
	t.Request = raw
	return &begunAttempt{task: t, attempt: st.last + 1, startAt: s.cfg.Now(), model: m, prov: prov, raw: raw}, nil
}

// beginTx is beginAttempt's transactional path: with the task locked, it
// records interrupted runs, fails, cancels, snoozes or completes what must
// not call, and claims the breaker's probe. An inline run's journal entry is
// committed here as "sent" before its call.
func (s *Service) beginTx(ctx context.Context, r *run) (begun *begunAttempt, after error, err error) {
	var final *outcome
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		t, err := lockTask(ctx, tx, r.taskID)
		if errors.Is(err, ErrNotFound) || (err == nil && t.Status.Final()) {
			// Nothing to run; complete the job so it does not linger, and
			// drop a kept answer a recording that did commit left behind.
			if err == nil {
				if _, err := tx.Exec(ctx, forgetKeptSQL, t.ID, nil); err != nil {
					return err
				}
			}
			err = r.complete(ctx, tx)
			return err
		}
		if err != nil {
			return err
		}
		fail := func(f Failure, jc journalCounts) error {
			alerts, err := s.endJob(ctx, tx, r, t, f, jc)
			final = &outcome{taskID: t.ID, status: StatusFailed, code: f.Code, created: t.CreatedAt, alerts: alerts}
			return err
		}
		m, prov, err := s.modelOf(t)
		if err != nil {
			return fail(failureFor("internal", "", ""), journalCounts{})
		}
		raw, err := s.rawRequest(t)
		if err != nil {
			s.cfg.Logger.Error("task's sealed request cannot be opened (erased, or wrong TOLLGATE_DATA_KEY)", slog.String("task_id", t.ID))
			return fail(failureFor("internal", "", ""), journalCounts{})
		}
		t.Request = raw
		kept, err := s.readKept(ctx, tx, t.ID)
		if err != nil {
			return err
		}
		if err := s.markInterrupted(ctx, tx, t, m, prov, r, kept); err != nil {
			return err
		}
		if len(kept) > 0 {
			// An earlier run's answer is kept: it is recorded, whatever
			// the deadline, the attempt counts or the gate say, and
			// nothing is called.
			begun, err = s.keptAttempt(t, kept[0], raw)
			if err != nil {
				// Its model is gone from the catalog: the call was made
				// all the same, and is settled as possibly charged.
				return fail(failureFor("internal", "", ""), journalCounts{ambiguous: len(kept)})
			}
			return nil
		}
		st, err := readAttemptState(ctx, tx, t.ID)
		if err != nil {
			return err
		}
		jc, err := countJournal(ctx, tx, t.ID, m.Name)
		if err != nil {
			return err
		}
		left := st.left
		lastClass := jc.lastClass
		if lastClass == "" {
			lastClass = provider.ClassTransient
		}
		if t.CancelRequested {
			alerts, err := s.finishUnsucceeded(ctx, tx, t, StatusCanceled, nil, jc.ambiguous)
			final = &outcome{taskID: t.ID, status: StatusCanceled, created: t.CreatedAt, alerts: alerts}
			if err != nil {
				return err
			}
			err = r.complete(ctx, tx)
			return err
		}
		switch {
		case left <= 0:
			return fail(failureFor(lastClass, jc.lastCode, "deadline"), jc)
		case jc.ambiguous > max(s.cfg.AmbiguousRetries, 0):
			return fail(failureFor(provider.ClassAmbiguous, "", ""), jc)
		case jc.counted >= s.maxAttemptsOf(t) || (!r.inline && r.attempt >= r.maxAttempts):
			return fail(failureFor(lastClass, jc.lastCode, "attempts"), jc)
		}

		pass, err := gate.AdmitTx(ctx, tx, m.Provider, s.cfg.ProbeEvery)
		if err != nil {
			return err
		}
		if !pass.Call && r.stream {
			// A client waiting on a stream cannot wait out a pause.
			return fail(failureFor(provider.Class(pass.ReasonClass), pass.ReasonCode, ""), jc)
		}
		if !pass.Call {
			// The key is paused or its breaker is open: the task stays
			// queued, its error saying why it waits, and no attempt is used.
			why := failureFor(provider.Class(pass.ReasonClass), pass.ReasonCode, "")
			why.Message = "Waiting: " + why.Message
			if _, err := tx.Exec(ctx, `UPDATE tasks SET status = 'queued', error = $2, updated_at = now() WHERE id = $1`, t.ID, why); err != nil {
				return err
			}
			after = river.JobSnooze(s.snooze(pass.Wait, left))
			return nil
		}

		n := st.last + 1
		begun = &begunAttempt{task: t, attempt: n, startAt: s.cfg.Now(), probe: pass.Probe, model: m, prov: prov, raw: raw}
		if !r.inline {
			return nil // journalled with its outcome, like the quick path's
		}
		err = tx.QueryRow(ctx, `
			INSERT INTO task_attempts (task_id, attempt, provider_key, model, idempotency_key)
			VALUES ($1, $2, $3, $4, $5) RETURNING started_at`,
			t.ID, n, m.Provider, m.Name, fmt.Sprintf("%s:%d", t.ID, n)).Scan(&begun.startAt)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE tasks SET status = 'running', attempts = $2, updated_at = now() WHERE id = $1`, t.ID, n); err != nil {
			return err
		}
		begun.task.Attempts, begun.sent = n, true
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("tasks: begin attempt: %w", err)
	}
	s.observe(final)
	return begun, after, nil
}

// snooze bounds a wait: never past the task's deadline (so the deadline is
// enforced on time), never longer than MaxSnooze (so a job notices a closed
// gate reasonably soon), never zero.
func (s *Service) snooze(wait, left time.Duration) time.Duration {
	return max(min(wait, left, s.cfg.MaxSnooze), 10*time.Millisecond)
}

// endJob fails the task and completes its job in the caller's transaction.
func (s *Service) endJob(ctx context.Context, tx pgx.Tx, r *run, t Task, f Failure, jc journalCounts) ([]budget.Alert, error) {
	alerts, err := s.finishFailed(ctx, tx, t, f, jc.ambiguous)
	if err != nil {
		return nil, err
	}
	s.cfg.Logger.LogAttrs(ctx, slog.LevelInfo, "task finished",
		slog.String("task_id", t.ID), slog.String("owner_id", t.OwnerID), slog.String("final_status", string(StatusFailed)),
		slog.String("code", f.Code), slog.String("class", f.Class), slog.Int("attempt", t.Attempts),
		slog.String("trace_id", r.traceID))
	err = r.complete(ctx, tx)
	return alerts, err
}

// markInterrupted records the attempts of runs that died or were canceled
// mid-call as ambiguous, each with its replay record: journal entries an
// inline run left "sent", and River runs that ended without recording an
// attempt (unrecordedRuns). Either may have reached the provider. Those
// whose answers are kept are not interrupted: their answers are recorded.
func (s *Service) markInterrupted(ctx context.Context, tx pgx.Tx, t Task, m catalog.Model, prov catalog.Provider, r *run, kept []keptAnswer) error {
	rows, err := tx.Query(ctx, `
		UPDATE task_attempts SET state = 'ambiguous', class = 'ambiguous', error_code = 'interrupted', finished_at = now()
		WHERE task_id = $1 AND state = 'sent' AND attempt <> ALL($2::integer[])
		RETURNING attempt, started_at, finished_at`, t.ID, keptSentAttempts(kept))
	if err != nil {
		return err
	}
	type interrupted struct {
		attempt  int
		start    time.Time
		finished time.Time
	}
	scan := func(r pgx.CollectableRow) (interrupted, error) {
		var i interrupted
		return i, r.Scan(&i.attempt, &i.start, &i.finished)
	}
	list, err := pgx.CollectRows(rows, scan)
	if err != nil {
		return err
	}
	if len(r.errors) > 0 {
		st, err := readAttemptState(ctx, tx, t.ID)
		if err != nil {
			return err
		}
		for _, e := range unrecordedRuns(r.errors, append(st.recorded, keptRiverRuns(kept)...)) {
			// The run's own number for its call was the next one then, as
			// it is now: nothing was journalled after it.
			rows, err := tx.Query(ctx, `
				INSERT INTO task_attempts (task_id, attempt, state, class, error_code, provider_key, model, idempotency_key,
				                           started_at, finished_at, river_error_attempt)
				SELECT $1, n, 'ambiguous', 'ambiguous', 'interrupted', $2, $3, $1::text || ':' || n, $4, now(), $5
				FROM (SELECT COALESCE(max(attempt), 0) + 1 AS n FROM task_attempts WHERE task_id = $1) x
				RETURNING attempt, started_at, finished_at`, t.ID, m.Provider, m.Name, e.At, e.Attempt)
			if err != nil {
				return err
			}
			i, err := pgx.CollectExactlyOneRow(rows, scan)
			if err != nil {
				return err
			}
			list = append(list, i)
		}
		if _, err := tx.Exec(ctx, `UPDATE tasks SET attempts = GREATEST(attempts, (SELECT max(attempt) FROM task_attempts WHERE task_id = $1)) WHERE id = $1`, t.ID); err != nil {
			return err
		}
	}
	for _, i := range list {
		s.cfg.Logger.LogAttrs(ctx, slog.LevelWarn, "attempt interrupted; counted as ambiguous",
			slog.String("task_id", t.ID), slog.Int("attempt", i.attempt), slog.String("class", "ambiguous"))
		rec := s.record(t, m, prov, i.attempt, i.start, r.traceID)
		rec.State, rec.FinishedAt = "ambiguous", &i.finished
		rec.Error = &replay.Failure{Class: string(provider.ClassAmbiguous), Code: "interrupted"}
		if err := replay.InsertTx(ctx, tx, rec); err != nil {
			return err
		}
	}
	return nil
}

func (s *Service) record(t Task, m catalog.Model, prov catalog.Provider, attempt int, start time.Time, traceID string) replay.Attempt {
	return replay.Attempt{
		TaskID: t.ID, OwnerID: t.OwnerID, Attempt: attempt,
		Provider: prov.Kind + ":" + prov.Key, ProviderModel: m.ProviderModel,
		Parameters: s.parameters(t, m, prov),
		TimeoutMS:  int(s.cfg.RequestTimeout / time.Millisecond),
		StartedAt:  start, TraceID: traceID, BuildVersion: s.cfg.BuildVersion,
	}
}

// recordOutcome is the transaction after the call: journal, replay record, the
// provider key's gate, and, for a final outcome, the task's end, its
// settlement and the job's completion. The reaction depends on the class:
//
//	success    settle; close the key's gate if it was paused or open
//	throttled  pause the whole key until Retry-After; no attempt used
//	exhausted  open the key's breaker; the task waits queued; no attempt used
//	rejected   fail now: the identical payload is never repeated
//	transient  retry with bounded backoff up to MaxAttempts
//	ambiguous  retry only as often as AmbiguousRetries allows
func (s *Service) recordOutcome(ctx context.Context, r *run, b *begunAttempt,
	resp *provider.Response, callErr error, latency time.Duration) error {
	var pe *provider.Error
	if callErr != nil && !errors.As(callErr, &pe) {
		pe = &provider.Error{Class: provider.ClassAmbiguous, Code: "client_error"}
	}
	latencyMS := int(latency / time.Millisecond)
	log := s.cfg.Logger.With(slog.String("task_id", b.task.ID), slog.String("owner_id", b.task.OwnerID),
		slog.String("model", b.model.Name), slog.String("provider", b.prov.Kind),
		slog.String("provider_key", b.prov.Key), slog.Int("attempt", b.attempt),
		slog.Int("upstream_latency_ms", latencyMS), slog.Bool("probe", b.probe), slog.String("trace_id", r.traceID))

	var after error
	var final *outcome
	breakerOpened, blocked := false, false
	if pe == nil {
		// A success is recorded with the owner's other successes
		// waiting, when there are any; else on its own below.
		c := &succeededCall{r: r, b: b, resp: resp, latency: latency}
		if err := s.recordTogether(ctx, c); err == nil {
			final = c.res.logged(log)
			s.afterOutcome(log, b, nil, latency, false, false, final)
			return nil
		}
	}
	err := pipetx.Run(ctx, s.pool, func(tx *pipetx.Tx) error {
		st, err := lockAttemptState(ctx, tx, b.task.ID)
		if err != nil {
			return err
		}
		t := st.task
		t.Request = b.raw // estimates below see what the provider saw
		if !b.sent {
			// The next free number: the one the run expected, unless a
			// rescued duplicate of the job recorded first.
			b.attempt = st.last + 1
		}
		batch := &pgx.Batch{}
		if pe == nil {
			if t.Status.Final() {
				// Another run finished the task meanwhile (a rescued
				// duplicate); this attempt is history only.
				var wasClosed bool
				if err := s.queueAttempt(batch, t, r, b, nil, resp, latency, &wasClosed); err != nil {
					return err
				}
				if err := r.complete(ctx, tx); err != nil {
					return err
				}
				return tx.CommitWith(ctx, batch)
			}
			r.queueDone(batch)
			var res successResult
			var settle budget.Settlements
			if err := s.queueSuccess(batch, &settle, st, r, b, resp, latency, &res); err != nil {
				return err
			}
			settle.Queue(batch, s.cfg.AlertThresholds)
			if err := s.commitOnBudget(ctx, tx, t.OwnerID, batch); err != nil {
				return err
			}
			final = res.logged(log)
			return nil
		}
		var wasClosed bool
		if err := s.queueAttempt(batch, t, r, b, pe, resp, latency, &wasClosed); err != nil {
			return err
		}
		if err := tx.SendBatch(ctx, batch).Close(); err != nil {
			return err
		}
		jc, err := countJournal(ctx, tx, t.ID, b.model.Name)
		if err != nil {
			return err
		}
		if t.Status.Final() {
			err := r.complete(ctx, tx)
			return err
		}
		if t.CancelRequested {
			alerts, err := s.finishUnsucceeded(ctx, tx, t, StatusCanceled, nil, jc.ambiguous)
			if err != nil {
				return err
			}
			final = &outcome{taskID: t.ID, status: StatusCanceled, created: t.CreatedAt, alerts: alerts}
			err = r.complete(ctx, tx)
			return err
		}

		log = log.With(slog.String("class", string(pe.Class)), slog.Int("provider_status", pe.Status), slog.String("provider_code", pe.Code))
		var left time.Duration
		if err := tx.QueryRow(ctx, `SELECT GREATEST(deadline_at - now(), interval '0') FROM tasks WHERE id = $1`, t.ID).Scan(&left); err != nil {
			return err
		}
		requeue := func(waitReason *Failure) error {
			_, err := tx.Exec(ctx, `UPDATE tasks SET status = 'queued', error = $2, updated_at = now() WHERE id = $1`, t.ID, waitReason)
			// Synchronous callers stop waiting on a blocked task.
			blocked = waitReason != nil
			return err
		}
		// later makes the task's next run wait: a River run returns the
		// snooze or retry to River; an arrival run moves its safety net to
		// then, in this transaction.
		later := func(e error, wait time.Duration) error {
			after = e
			if r.inline {
				return s.reschedule(ctx, tx, r, wait)
			}
			return nil
		}
		switch {
		case pe.Class == provider.ClassThrottled:
			pause := pe.RetryAfter
			if pause <= 0 {
				pause = s.cfg.RetryBase
			}
			wait, err := gate.PauseTx(ctx, tx, b.model.Provider, min(pause, s.cfg.RetryMax), string(pe.Class), pe.Code)
			if err != nil {
				return err
			}
			f := failureFor(pe.Class, pe.Code, "")
			f.Message = "Waiting: " + f.Message
			log.Info("provider key throttled: pausing the key", slog.Int64("pause_ms", wait.Milliseconds()))
			if !r.stream {
				d := s.snooze(wait, left)
				if err := later(river.JobSnooze(d), d); err != nil {
					return err
				}
				return requeue(&f)
			}
		case pe.Class == provider.ClassExhausted:
			opened, err := gate.OpenTx(ctx, tx, b.model.Provider, s.cfg.ProbeEvery, string(pe.Class), pe.Code)
			if err != nil {
				return err
			}
			breakerOpened = opened
			if opened {
				log.Error("ALERT provider key exhausted: circuit breaker opened; tasks stay queued until a probe succeeds")
			}
			if !r.stream {
				// Another provider may serve the task meanwhile, if a fallback fits.
				if switched, err := s.fallback(ctx, tx, r, t, b.model, log); err != nil || switched {
					return err
				}
				f := failureFor(pe.Class, pe.Code, "")
				f.Message = "Waiting: " + f.Message
				d := s.snooze(s.cfg.ProbeEvery, left)
				if err := later(river.JobSnooze(d), d); err != nil {
					return err
				}
				return requeue(&f)
			}
		case r.stream:
			// A streamed task has one attempt: its client is waiting.
		case pe.Class == provider.ClassAmbiguous && jc.ambiguous <= max(s.cfg.AmbiguousRetries, 0) && jc.counted < s.maxAttemptsOf(t),
			pe.Class == provider.ClassTransient && jc.counted < s.maxAttemptsOf(t):
			if err := later(&retryError{pe}, s.backoff(b.attempt)); err != nil {
				return err
			}
			log.Info("attempt failed; will retry")
			if !r.inline {
				// This run fails the job to retry it; the entry River
				// keeps for that in river_job.errors is this attempt.
				if _, err := tx.Exec(ctx, `UPDATE task_attempts SET river_error_attempt = $3 WHERE task_id = $1 AND attempt = $2`,
					t.ID, b.attempt, r.attempt); err != nil {
					return err
				}
			}
			return requeue(nil)
		}
		why := ""
		if pe.Class == provider.ClassTransient && !r.stream {
			why = "attempts"
			if switched, err := s.fallback(ctx, tx, r, t, b.model, log); err != nil || switched {
				return err
			}
		}
		f := failureFor(pe.Class, pe.Code, why)
		alerts, err := s.finishFailed(ctx, tx, t, f, jc.ambiguous)
		if err != nil {
			return err
		}
		final = &outcome{taskID: t.ID, status: StatusFailed, code: f.Code, created: t.CreatedAt, alerts: alerts}
		log.Info("task finished", slog.String("final_status", string(StatusFailed)), slog.String("code", f.Code))
		err = r.complete(ctx, tx)
		return err
	})
	if err != nil {
		return fmt.Errorf("tasks: record outcome: %w", err)
	}
	s.afterOutcome(log, b, pe, latency, breakerOpened, blocked, final)
	return after
}

// afterOutcome is what follows a committed outcome: the provider call's
// metrics, the breaker's opening, and waiters told.
func (s *Service) afterOutcome(log *slog.Logger, b *begunAttempt, pe *provider.Error, latency time.Duration, breakerOpened, blocked bool, final *outcome) {
	class, status, unclassified := "success", 0, false
	if pe != nil {
		class, status, unclassified = string(pe.Class), pe.Status, pe.Unclassified()
		if unclassified {
			log.Warn("provider error matched no rule; classified by status alone", slog.String("class", class), slog.Int("provider_status", status))
		}
	}
	s.cfg.Metrics.ProviderCall(b.model.Provider, s.modelLabel(b.model.Name), class, unclassified, status, latency)
	if breakerOpened {
		s.cfg.Metrics.BreakerOpened(b.model.Provider)
	}
	if blocked {
		s.waiter.announce(b.task.ID, nil)
	}
	s.observe(final)
}

// queueAttempt queues the statements that record an attempt's outcome on
// t: its journal entry and replay record and, after a success, the gate's
// closing (wasClosed is set when the batch's results are read).
func (s *Service) queueAttempt(batch *pgx.Batch, t Task, r *run, b *begunAttempt, pe *provider.Error,
	resp *provider.Response, latency time.Duration, wasClosed *bool) error {
	state := "succeeded"
	if pe != nil {
		state = "failed"
		if pe.Class == provider.ClassAmbiguous {
			state = "ambiguous"
		}
	}
	queueJournal(batch, b, state, pe, latency)
	if err := replay.QueueInsert(batch, s.outcomeRecord(t, r, b, state, pe, resp, latency)); err != nil {
		return err
	}
	if b.keptKey != 0 {
		batch.Queue(forgetKeptSQL, t.ID, b.keptKey) // recorded: the copy goes with it
	}
	if pe == nil {
		gate.QueueClose(batch, b.model.Provider, wasClosed)
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

// queueSuccess queues the whole record of a succeeded call on an
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
func (s *Service) queueSuccess(batch *pgx.Batch, settle *budget.Settlements, st attemptState, r *run, b *begunAttempt,
	resp *provider.Response, latency time.Duration, res *successResult) error {
	t := st.task
	t.Request = b.raw
	res.task, res.status = t, StatusSucceeded
	if t.CancelRequested {
		res.status = StatusCanceled // settled for the call's cost, its answer not delivered
	}
	if err := s.queueAttempt(batch, t, r, b, nil, resp, latency, &res.wasClosed); err != nil {
		return err
	}
	res.implausible = ""
	if implausibleUsage(resp) {
		queueImplausibleUsage(batch, b, resp.Usage)
		res.implausible = b.model.Provider
	}
	res.finished = nil
	if s.waiter.waiting(t.ID) {
		res.finished = &Task{}
	}
	return s.queueSucceeded(batch, settle, t, b.model, resp, st.jc.ambiguous, res.status, &res.settled, res.finished)
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

// outcome is a task's end, recorded on metrics once its transaction has
// committed.
type outcome struct {
	taskID  string
	task    *Task // the finished task as stored, read back for this process's waiters; nil if none waited
	status  Status
	code    string
	created time.Time
	alerts  []budget.Alert
	// implausible: the provider key of a usage report beyond any sane
	// bound, counted once committed; "" for none.
	implausible string
}

// observe records a committed end: waiters are told, metrics counted, and
// budget alerts the settlement crossed fired.
func (s *Service) observe(o *outcome) {
	if o != nil {
		if o.task != nil {
			s.reveal(o.task)
		}
		s.waiter.announce(o.taskID, o.task)
		s.cfg.Metrics.TaskFinished(string(o.status), o.code, s.cfg.Now().Sub(o.created))
		if o.implausible != "" {
			s.cfg.Metrics.ImplausibleUsage(o.implausible)
		}
		s.cfg.Alerter.Fire(o.alerts)
	}
}

// modelLabel keeps metric labels to configured model names; pass-through
// names chosen by clients become "other".
func (s *Service) modelLabel(name string) string {
	if _, priced, err := s.cfg.Catalog.Resolve(name); err == nil && priced {
		return name
	}
	return "other"
}

// queueJournal queues the statement recording an attempt's outcome. An
// inline run's entry, committed "sent" before the call, is updated; a River
// run's is inserted, under the task's lock, with b.attempt, the next free
// number, and the task's attempt count follows it.
func queueJournal(batch *pgx.Batch, b *begunAttempt, state string, pe *provider.Error, latency time.Duration) {
	var class, code, param *string
	var status *int
	var retryAfter *time.Duration // NULL: the provider asked for no wait
	if pe != nil {
		c, k, st := string(pe.Class), pe.Code, pe.Status
		class, code, status = &c, &k, &st
		if pe.Param != "" {
			param = &pe.Param
		}
		if pe.RetryAfter > 0 {
			retryAfter = &pe.RetryAfter
		}
	}
	if b.sent {
		batch.Queue(`
			UPDATE task_attempts SET state = $3, class = $4, error_code = $5, provider_status = $6, error_param = $7,
			       error_retry_at = now() + $8::interval, finished_at = now()
			WHERE task_id = $1 AND attempt = $2 AND state = 'sent'`, b.task.ID, b.attempt, state, class, code, status, param, retryAfter)
		return
	}
	if b.riverRun != nil {
		// A kept answer: its River run's entry in river_job.errors is
		// this attempt, recorded.
		batch.Queue(`
			WITH a AS (
				INSERT INTO task_attempts (task_id, attempt, state, class, error_code, provider_status, provider_key, model,
				                           idempotency_key, started_at, finished_at, river_error_attempt, error_param, error_retry_at)
				VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $10::timestamptz + $11::interval, $12, $13, now() + $14::interval)
			)
			UPDATE tasks SET attempts = $2 WHERE id = $1`,
			b.task.ID, b.attempt, state, class, code, status, b.model.Provider, b.model.Name, b.providerKey(), b.startAt, latency, *b.riverRun, param, retryAfter)
		return
	}
	batch.Queue(`
		WITH a AS (
			INSERT INTO task_attempts (task_id, attempt, state, class, error_code, provider_status, provider_key, model,
			                           idempotency_key, started_at, finished_at, error_param, error_retry_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $10::timestamptz + $11::interval, $12, now() + $13::interval)
		)
		UPDATE tasks SET attempts = $2 WHERE id = $1`,
		b.task.ID, b.attempt, state, class, code, status, b.model.Provider, b.model.Name, b.providerKey(), b.startAt, latency, param, retryAfter)
}

// outcomeRecord is the replay record of an attempt's outcome, its answer
// or cut stream redacted as stored.
func (s *Service) outcomeRecord(t Task, r *run, b *begunAttempt, state string, pe *provider.Error,
	resp *provider.Response, latency time.Duration) replay.Attempt {
	latencyMS := int(latency / time.Millisecond)
	rec := s.record(t, b.model, b.prov, b.attempt, b.startAt, r.traceID)
	now := b.startAt.Add(latency)
	rec.FinishedAt, rec.LatencyMS = &now, &latencyMS
	if pe != nil {
		rec.Error = &replay.Failure{Class: string(pe.Class), Code: pe.Code, ProviderStatus: pe.Status}
	}
	rec.State = state
	rec.Stream = b.stream
	if pe == nil || resp != nil && len(choicesOf(resp)) > 0 && (resp.Text() != "" || richAnswer(choicesOf(resp))) {
		// An answer, or a cut stream's part that arrived: redacted like
		// any answer.
		rec.Response, rec.Redactions = s.storedAnswer(t, b.raw, resp)
		if pe != nil {
			rec.Response.Usage = nil
		}
	}
	return rec
}

// queueSucceeded queues the task's end and its settlement at the actual
// cost: the provider's reported usage, or an estimate labelled as such when
// it reported none. Each earlier ambiguous attempt may have been charged by
// the provider too; the documented rule is to add its worst case (the
// task's reservation) and label the whole settlement possibly_charged, so
// finance sees an upper bound rather than a silent undercount. settled is
// filled in when the batch's results are read, and so is finished, when
// not nil, with the task as its finish stored it.
func (s *Service) queueSucceeded(batch *pgx.Batch, settle *budget.Settlements, t Task, m catalog.Model, resp *provider.Response, ambiguous int, status Status,
	settled *budget.Settled, finished *Task) error {
	u, cost := s.usageOf(t, m, resp)
	implausible := implausibleUsage(resp)
	var possible int64 // the ambiguous attempts' worst case
	if ambiguous > 0 {
		u.Source = budget.SourcePossiblyCharged
		possible = budget.SaturatingMul(int64(ambiguous), t.ReservedMicros)
		cost = budget.SaturatingAdd(cost, possible)
	}
	var charge *int64 // the most charged; nil: up to the headroom
	if implausible {
		c := budget.SaturatingAdd(t.ReservedMicros, possible)
		charge = &c
	}
	if status == StatusCanceled {
		queueFinish(batch, t.ID, StatusCanceled, nil, nil, finished)
	} else {
		// The answer is stored sealed, for the owner to poll; the result
		// row itself holds no text.
		res := resultOf(resp, m.Name, u, cost)
		res.seal(s.cfg.Sealer, t.ID)
		queueFinish(batch, t.ID, StatusSucceeded, &res, nil, finished)
	}
	// Settlement last: it locks the owner's budget row, which every task of
	// the owner needs.
	return settle.Add(budget.Settlement{
		TaskID: t.ID, Workload: t.Workload, Model: m.Name, InputTokens: u.InputTokens, OutputTokens: u.OutputTokens,
		CachedInputTokens: u.CachedInputTokens, CacheWriteTokens: u.CacheWriteTokens, ReasoningTokens: u.ReasoningTokens,
		Source: u.Source, CostMicros: cost, ChargeCapMicros: charge,
	}, settled)
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

// queueImplausibleUsage flags b's journal entry, queued before it, as
// having reported usage beyond any sane bound, with the figures as
// reported.
func queueImplausibleUsage(batch *pgx.Batch, b *begunAttempt, u *provider.Usage) {
	batch.Queue(`
		UPDATE task_attempts SET usage_implausible = true, reported_input_tokens = $3, reported_output_tokens = $4
		WHERE task_id = $1 AND attempt = $2`, b.task.ID, b.attempt, u.InputTokens, u.OutputTokens)
}

// finishFailed ends a failed task. With no ambiguous attempt nothing was
// spent and the whole reservation is released. After ambiguous attempts the
// provider may have charged us: the rule is to settle the reservation (the
// worst case of one call) as possibly_charged.
func (s *Service) finishFailed(ctx context.Context, tx pgx.Tx, t Task, f Failure, ambiguous int) ([]budget.Alert, error) {
	return s.finishUnsucceeded(ctx, tx, t, StatusFailed, &f, ambiguous)
}

// finishUnsucceeded ends a task that produced no answer, failed or
// canceled: release, or settle as possibly charged after ambiguous attempts.
func (s *Service) finishUnsucceeded(ctx context.Context, tx pgx.Tx, t Task, status Status, f *Failure, ambiguous int) ([]budget.Alert, error) {
	alerts, err := s.closeMoney(ctx, tx, t, ambiguous)
	if err != nil {
		return nil, err
	}
	return alerts, finish(ctx, tx, t.ID, status, nil, f)
}

// closeMoney closes the reservation of a task that produced no answer:
// released in full, or after ambiguous attempts settled as possibly charged.
func (s *Service) closeMoney(ctx context.Context, tx pgx.Tx, t Task, ambiguous int) ([]budget.Alert, error) {
	var alerts []budget.Alert
	if ambiguous > 0 {
		// The figures of the reservation: the worst case of one call.
		in, out := int64(0), int64(0)
		if m, _, err := s.cfg.Catalog.Resolve(t.Model); err == nil {
			in, out = s.reservedTokens(m, t.Request)
		}
		settled, err := budget.SettleTx(ctx, tx, budget.Settlement{
			TaskID: t.ID, Workload: t.Workload, Model: t.Model, InputTokens: in,
			OutputTokens: out, Source: budget.SourcePossiblyCharged, CostMicros: t.ReservedMicros,
		}, s.cfg.AlertThresholds)
		if err != nil && !errors.Is(err, budget.ErrNotFound) {
			return nil, err
		}
		alerts = settled.Alerts
	} else if err := budget.ReleaseTx(ctx, tx, t.ID); err != nil && !errors.Is(err, budget.ErrNotFound) {
		return nil, err
	}
	return alerts, nil
}

// finish ends the task in one statement; a succeeded result's sealed output
// is stored with it. Its outcome, observed after commit, announces it to
// waiting pollers.
func finish(ctx context.Context, tx pgx.Tx, id string, status Status, res *Result, f *Failure) error {
	b := &pgx.Batch{}
	queueFinish(b, id, status, res, f, nil)
	return tx.SendBatch(ctx, b).Close()
}

// queueFinish queues finish's statement. With into set, the statement
// returns the finished task, read into it as Get would read it: this
// process's waiters then need not read it again.
func queueFinish(b *pgx.Batch, id string, status Status, res *Result, f *Failure, into *Task) {
	var sealed, answer []byte
	var stored *Result
	if res != nil {
		sealed, answer = res.sealedOutput, res.sealedAnswer
		r := res.stored()
		stored = &r
	}
	// A trigger sets ended_unsucceeded from status, NULL for a success, so
	// that its finish, changing no indexed column, can be HOT (000114).
	const finishSQL = `
		UPDATE tasks SET status = $2, result = $3, error = $4, output_sealed = COALESCE($5, output_sealed),
		       answer_sealed = COALESCE($6, answer_sealed), finished_at = now(), updated_at = now()
		WHERE id = $1`
	if into == nil {
		b.Queue(finishSQL, id, string(status), stored, f, sealed, answer)
		return
	}
	b.Queue(finishSQL+` RETURNING `+answerColumns, id, string(status), stored, f, sealed, answer).Query(func(rows pgx.Rows) (err error) {
		*into, err = pgx.CollectExactlyOneRow(rows, scanTask)
		return err
	})
}

// lockTask reads the task and locks its row for the transaction, so two runs
// of the same job serialise on it.
func lockTask(ctx context.Context, tx pgx.Tx, id string) (Task, error) {
	// NO KEY UPDATE: it excludes other runs and cancels (which take the
	// same lock) but not the KEY SHARE locks of foreign keys to the task.
	rows, err := tx.Query(ctx, `SELECT `+taskColumns+` FROM tasks WHERE id = $1 FOR NO KEY UPDATE`, id)
	if err != nil {
		return Task{}, err
	}
	t, err := pgx.CollectExactlyOneRow(rows, scanTask)
	if errors.Is(err, pgx.ErrNoRows) {
		return Task{}, ErrNotFound
	}
	return t, err
}

// modelOf resolves the model the task currently runs on.
func (s *Service) modelOf(t Task) (catalog.Model, catalog.Provider, error) {
	m, _, err := s.cfg.Catalog.Resolve(t.Model)
	if err != nil {
		return catalog.Model{}, catalog.Provider{}, err
	}
	prov, ok := s.cfg.Catalog.Provider(m.Provider)
	if !ok {
		return catalog.Model{}, catalog.Provider{}, fmt.Errorf("tasks: model %q names unknown provider key %q", m.Name, m.Provider)
	}
	return m, prov, nil
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

// maxAttemptsOf is the task's own attempt bound (a route's retry bound),
// else the service's.
func (s *Service) maxAttemptsOf(t Task) int {
	if t.maxAttempts != nil && *t.maxAttempts > 0 {
		return *t.maxAttempts
	}
	return s.cfg.MaxAttempts
}

// callTimeout is the task's own call deadline (a route's), else the
// service's request timeout; never longer than the latter, which the job
// timeout is sized for.
func (s *Service) callTimeout(t Task) time.Duration {
	if t.callTimeoutMS != nil && *t.callTimeoutMS > 0 {
		return min(time.Duration(*t.callTimeoutMS)*time.Millisecond, s.cfg.RequestTimeout)
	}
	return s.cfg.RequestTimeout
}

// storedAnswer is the provider's answer as the replay record may hold it:
// one redaction session over the request then the answer, so a value in
// both gets one placeholder (the request part reproduces what was stored
// at creation).
func (s *Service) storedAnswer(t Task, raw Request, resp *provider.Response) (*replay.Response, map[string]int) {
	p := s.privacyFor(redact.Policy(t.policy))
	_ = p.request(raw)
	return p.answer(resp), p.counts()
}

// parameters is what an attempt of t on m sends beyond the stored
// request, for its replay record (t.Request is the raw request): the
// output limit as sent, the tool list's digest, the response format and
// the images, described as the stored request describes them.
func (s *Service) parameters(t Task, m catalog.Model, prov catalog.Provider) replay.Parameters {
	sent := s.providerRequest(&begunAttempt{task: t, model: m, prov: prov, raw: t.Request})
	out := replay.Parameters{Model: m.Name, MaxTokens: sent.OutputLimit(), OutputLimitParam: "max_tokens"}
	if sent.MaxCompletionTokens > 0 {
		out.OutputLimitParam = "max_completion_tokens"
	}
	if sent.N > 1 {
		out.Choices = sent.N
	}
	if len(sent.Tools) > 0 {
		out.Tools, out.ToolsSHA256 = len(sent.Tools), ToolsSHA256(sent.Tools)
	}
	if f := sent.ResponseFormat; f != nil {
		out.ResponseFormat = f.Type
	}
	if !hasImages(t.Request.Messages) && (sent.ResponseFormat == nil || sent.ResponseFormat.JSONSchema == nil) {
		return out
	}
	// Described under the owner's policy, as in the stored request: the
	// same session, so the same placeholders.
	p := s.privacyFor(redact.Policy(t.policy))
	stored := p.request(t.Request)
	out.Images = p.images
	if f := stored.ResponseFormat; f != nil && f.JSONSchema != nil {
		out.SchemaName = f.JSONSchema.Name
	}
	return out
}

// ToolsSHA256 is the hex SHA-256 of the canonical JSON of a tool list (keys
// sorted, no insignificant space): equal lists, however their keys were
// ordered, have one digest, and any change to a name, description, schema
// or strict flag gives another.
func ToolsSHA256(tools []provider.Tool) string {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(tools); err != nil {
		panic("tasks: encode tools: " + err.Error()) // decoded tools always re-encode
	}
	canonical, err := provider.CanonicalJSON(buf.Bytes())
	if err != nil {
		panic("tasks: canonical tools: " + err.Error())
	}
	sum := sha256.Sum256(canonical)
	return hex.EncodeToString(sum[:])
}

func hasImages(msgs []provider.Message) bool {
	for _, m := range msgs {
		for _, part := range m.Content.Parts {
			if part.ImageURL != nil {
				return true
			}
		}
	}
	return false
}
