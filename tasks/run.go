package tasks

import (
	"context"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertype"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/tollgate/tollgate/provider"
	"github.com/tollgate/tollgate/replay"
	"github.com/tollgate/tollgate/tracing"
)

// run is one execution of a task: by its River job (the normal path), or
// inline in a request handler that streams the answer to its client. An
// inline run makes one attempt and ends the task either way; the task's
// River job, scheduled for after the call's deadline, stays as a safety
// net that finishes the task should this process die mid-call.
type run struct {
	taskID, traceID      string
	providerKey          string // of the job's queue; "" for inline runs
	attempt, maxAttempts int    // River's counters for the job
	inline               bool
	// errors are the job's earlier runs that failed, as River recorded
	// them (see unrecordedRuns).
	errors   []rivertype.AttemptError
	complete func(ctx context.Context, tx pgx.Tx) error
}

func riverRun(job *river.Job[TaskArgs]) *run {
	return &run{
		taskID: job.Args.TaskID, traceID: job.Args.TraceID, attempt: job.Attempt, maxAttempts: job.MaxAttempts, errors: job.Errors,
		providerKey: strings.TrimPrefix(job.Queue, queueFor("")),
		complete: func(ctx context.Context, tx pgx.Tx) error {
			_, err := river.JobCompleteTx[*riverpgxv5.Driver](ctx, tx, job)
			return err
		},
	}
}

func (s *Service) inlineRun(taskID, traceID string, jobID int64) *run {
	return &run{
		taskID: taskID, traceID: traceID, inline: true,
		complete: func(ctx context.Context, tx pgx.Tx) error {
			if jobID == 0 {
				return nil
			}
			// The safety net is not needed any more.
			_, err := s.river.JobCancelTx(ctx, tx, jobID)
			return err
		},
	}
}

// Stream is what a streamed run reports about its client.
type Stream struct {
	// Deliver is called with each piece of content as the provider sends
	// it; it returns false once the client is gone (the call goes on and is
	// settled all the same).
	Deliver func(delta string) bool
}

// RunInline makes the one attempt of a task created with Submission.Inline
// in the caller's goroutine, streaming content through st as it arrives.
// The provider call does not depend on the caller's context: a client that
// disconnects does not cut the upstream call, which completes and is
// settled; the replay record notes how many chunks reached the client and
// when it left. It returns the task as it ended.
func (s *Service) RunInline(ctx context.Context, c Created, traceID string, st Stream) (_ Task, err error) {
	ctx, span := tracing.Tracer().Start(ctx, "task",
		trace.WithAttributes(attribute.String("tollgate.task.id", c.Task.ID), attribute.Bool("tollgate.task.inline", true)))
	defer func() { endTaskSpan(span, err) }()
	r := s.inlineRun(c.Task.ID, traceID, c.jobID)
	begun, _, err := s.beginAttempt(ctx, r)
	if err != nil {
		return Task{}, err
	}
	if begun != nil {
		span.SetAttributes(attribute.Int("tollgate.task.attempt", begun.attempt))
		info := &replay.StreamInfo{}
		delivering := true
		deliver := func(d string) {
			if delivering && st.Deliver != nil {
				if st.Deliver(d) {
					info.ChunksSent++
				} else {
					delivering = false
					now := s.cfg.Now()
					info.ClientDisconnectedAt = &now
				}
			}
		}
		started := s.cfg.Now()
		callCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.callTimeout(begun.task))
		req := provider.Request{Model: begun.model.ProviderModel, Messages: begun.raw.Messages,
			MaxTokens: s.maxTokens(begun.raw), IdempotencyKey: begun.providerKey(), JSONMode: begun.raw.JSONMode}
		client := s.cfg.Clients[begun.model.Provider]
		var resp *provider.Response
		var callErr error
		callCtx, call := begun.startCall(callCtx)
		if sc, ok := client.(provider.Streamer); ok {
			resp, callErr = sc.Stream(callCtx, req, deliver)
		} else {
			resp, callErr = client.Complete(callCtx, req)
			if callErr == nil {
				deliver(resp.Content)
			}
		}
		endCall(call, resp, callErr)
		cancel()
		begun.stream = info
		rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		err = s.recordOutcome(rctx, r, begun, resp, callErr, s.cfg.Now().Sub(started))
		rcancel()
		if err != nil {
			return Task{}, err
		}
	}
	return s.GetAny(context.WithoutCancel(ctx), c.Task.ID)
}
