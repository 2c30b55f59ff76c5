package tasks

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/riverqueue/river"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

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
	run *runner
}

// Timeout bounds one run of the job: the provider call plus the short
// transactions around it.
func (w *worker) Timeout(*river.Job[TaskArgs]) time.Duration {
	return w.run.cfg.jobTimeout()
}

// NextRetry is bounded exponential backoff with full jitter: a uniform
// wait between zero and base·2^(attempt-1), capped at RetryMax, so
// transient failures are retried soon and never in lock-step.
func (w *worker) NextRetry(job *river.Job[TaskArgs]) time.Time {
	return time.Now().Add(w.run.cfg.backoff(job.Attempt))
}

// backoff is the wait before the retry that follows the attempt-th run.
func (c *Config) backoff(attempt int) time.Duration {
	d := c.RetryBase << min(max(attempt-1, 0), 20)
	if d <= 0 || d > c.RetryMax {
		d = c.RetryMax
	}
	return rand.N(d + 1)
}

// Work runs one attempt of the task. See the package doc for how it is
// journalled; errors returned here make River retry the job later, and a
// snooze (river.JobSnooze) makes it wait without using an attempt.
func (w *worker) Work(ctx context.Context, job *river.Job[TaskArgs]) (err error) {
	s := w.run
	ctx, span := tracing.Tracer().Start(tracing.Extract(ctx, job.Args.TraceParent), "task",
		trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithAttributes(attribute.String("tollgate.task.id", job.Args.TaskID), attribute.Int("tollgate.job.attempt", job.Attempt)))
	defer func() { endTaskSpan(span, err) }()
	r := queuedRun(job)
	// A slot of the provider key's calls in this process, shared with
	// runs on arrival, which give way to waiting River runs.
	release, err := s.slots.acquire(ctx, r.providerKey)
	if err != nil {
		return err
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
		return s.recording.recordKept(ctx, r, begun) // an earlier run's answer, kept: no call
	}
	return s.callAndRecord(ctx, r, begun)
}
