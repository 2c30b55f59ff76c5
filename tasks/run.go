package tasks

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/tollgate/tollgate/provider"
	"github.com/tollgate/tollgate/replay"
	"github.com/tollgate/tollgate/tracing"
)

// run is one execution of a task: by its River job, or inline, by the
// process that admitted it. Inline runs are a task's first attempt on
// arrival (runOnArrival), and streamed tasks, run in the request handler
// that relays the answer. Every run's journal entry is committed "sent"
// before its call. An inline run's safety net is a River job scheduled
// for after the call's deadline, which finishes the task should this
// process die mid-call: the net finds the entry "sent" and counts the
// call as possibly made. A stream's net is written with the task and goes
// when the task ends. A run on arrival's is written only when needed: by
// its run, for a later attempt or a wait (applier.reschedule), or, once
// the run has outlived its deadline (its process died or stalled), by the
// sweep of any worker instance (Service.WriteSafetyNetsOnce): most tasks
// end without one.
//
// A stream makes one attempt and ends the task either way (its client is
// waiting). An arrival run's failure that calls for another attempt, or a
// wait, makes the net the task's next run instead: River runs the later
// attempts.
type run struct {
	taskID, traceID      string
	providerKey          string // of the job's queue; "" for inline runs
	attempt, maxAttempts int    // River's counters for the job
	inline               bool
	stream               bool  // inline, with its client waiting on this one attempt
	jobID                int64 // an inline run's safety net; 0 for none
	// netArgs and netQueue are what a run on arrival's net is written
	// with, should it need one (reschedule).
	netArgs  TaskArgs
	netQueue string
	complete func(ctx context.Context, tx pgx.Tx) error
}

func queuedRun(job *river.Job[TaskArgs]) *run {
	return &run{
		taskID: job.Args.TaskID, traceID: job.Args.TraceID, attempt: job.Attempt, maxAttempts: job.MaxAttempts,
		providerKey: strings.TrimPrefix(job.Queue, queueFor("")),
		complete: func(ctx context.Context, tx pgx.Tx) error {
			_, err := river.JobCompleteTx[*riverpgxv5.Driver](ctx, tx, job)
			return err
		},
	}
}

func inlineRun(taskID, traceID string, jobID int64, stream bool) *run {
	r := &run{taskID: taskID, traceID: traceID, inline: true, stream: stream, jobID: jobID}
	r.complete = func(ctx context.Context, tx pgx.Tx) error {
		if jobID == 0 {
			return nil
		}
		_, err := tx.Exec(ctx, dropNetSQL, jobID)
		return err
	}
	return r
}

// queueDone queues, on a batch that ends r's task, what ends r's job: an
// inline run's safety net is dropped; a River run's job is completed by
// River once Work returns.
func (r *run) queueDone(b *pgx.Batch) {
	if r.inline && r.jobID != 0 {
		b.Queue(dropNetSQL, r.jobID)
	}
}

// reschedule makes an inline run's safety net the task's next run, due
// after wait: River runs it then, as it would a retried or snoozed job
// (rescheduleJob). A run on arrival that has no net yet writes it here, in tx, unless the
// sweep wrote one meanwhile (the task's row, locked here, says).
func (s *applier) reschedule(ctx context.Context, tx pgx.Tx, r *run, wait time.Duration) error {
	if r.jobID == 0 && r.netQueue != "" {
		var job *int64
		if err := tx.QueryRow(ctx, `SELECT job_id FROM tasks WHERE id = $1 FOR NO KEY UPDATE`, r.taskID).Scan(&job); err != nil {
			return err
		}
		if job != nil {
			r.jobID = *job
		} else {
			res, err := s.river.InsertTx(ctx, tx, r.netArgs, &river.InsertOpts{Queue: r.netQueue, ScheduledAt: time.Now().Add(wait)})
			if err != nil {
				return fmt.Errorf("tasks: write the net: %w", err)
			}
			if _, err := tx.Exec(ctx, setJobSQL, r.taskID, res.Job.ID); err != nil {
				return err
			}
			r.jobID = res.Job.ID
		}
	}
	if r.jobID == 0 {
		return nil
	}
	return rescheduleJob(ctx, tx, r.jobID, wait)
}

// Stream is what a streamed run reports about its client.
type Stream struct {
	// Deliver is called with each piece of content as the provider sends
	// it; it returns false once the client is gone (the call goes on and is
	// settled all the same).
	Deliver func(delta provider.Delta) bool
}

// RunInline makes the one attempt of a task created with Submission.Inline
// in the caller's goroutine, streaming content through st as it arrives.
// The provider call does not depend on the caller's context: a client that
// disconnects does not cut the upstream call, which completes and is
// settled; the replay record notes how many chunks reached the client and
// when it left. It returns the task as it ended.
func (s *Service) RunInline(ctx context.Context, c Created, traceID string, st Stream) (_ Task, err error) {
	return s.runner.runInline(ctx, c, traceID, st)
}

// runInline carries out Service.RunInline.
func (s *runner) runInline(ctx context.Context, c Created, traceID string, st Stream) (_ Task, err error) {
	ctx, span := tracing.Tracer().Start(ctx, "task",
		trace.WithAttributes(attribute.String("tollgate.task.id", c.Task.ID), attribute.Bool("tollgate.task.inline", true)))
	defer func() { endTaskSpan(span, err) }()
	r := inlineRun(c.Task.ID, traceID, c.jobID, true)
	begun, _, err := s.beginAttempt(ctx, r)
	if err != nil {
		return Task{}, err
	}
	if begun != nil && begun.fromKept != nil {
		// An earlier run's answer is kept: recorded, not called again.
		if err := s.recording.recordKept(ctx, r, begun); err != nil {
			return Task{}, err
		}
		begun = nil
	}
	if begun != nil {
		span.SetAttributes(attribute.Int("tollgate.task.attempt", begun.attempt))
		info := &replay.StreamInfo{}
		delivering := true
		deliver := func(d provider.Delta) {
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
		callCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.callTimeout(begun.task))
		req := s.fitting.providerRequest(begun)
		client := s.cfg.Clients[begun.model.Provider]
		var resp *provider.Response
		var callErr error
		callCtx, call := begun.startCall(callCtx)
		if sc, ok := client.(provider.Streamer); ok {
			resp, callErr = sc.Stream(callCtx, req, deliver)
		} else {
			resp, callErr = client.Complete(callCtx, req)
			if callErr == nil {
				for _, d := range answerDeltas(resp) {
					deliver(d)
				}
			}
		}
		endCall(call, resp, callErr)
		cancel()
		begun.stream = info
		rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		err = s.recording.recordRun(rctx, s.recording.newFinishedCall(r, begun, resp, callErr, s.cfg.Now().Sub(started)))
		rcancel()
		if err != nil {
			return Task{}, err
		}
	}
	return s.reader.getAny(context.WithoutCancel(ctx), c.Task.ID)
}

// answerDeltas is a whole answer as the deltas a stream of it would have
// carried, choice by choice: its text, its refusal, then each tool call in
// one fragment (id, name and the whole arguments). A provider that cannot
// stream is relayed so, and the client's accumulated answer is the same.
func answerDeltas(resp *provider.Response) []provider.Delta {
	var out []provider.Delta
	for i, c := range resp.Choices {
		idx := c.Index
		if idx == 0 {
			idx = i
		}
		if text := c.Message.Content.String(); text != "" {
			out = append(out, provider.Delta{Choice: idx, Content: text})
		}
		if c.Message.Refusal != "" {
			out = append(out, provider.Delta{Choice: idx, Refusal: c.Message.Refusal})
		}
		for j, tc := range c.Message.ToolCalls {
			out = append(out, provider.Delta{Choice: idx, ToolCall: &provider.ToolCallDelta{
				Index: j, ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments}})
		}
	}
	return out
}
