package tasks

import (
	"context"
	"fmt"
)

// RerunParams names the finished task to repeat and who asks for it.
type RerunParams struct {
	// Owner is the caller's owner; "" lets an admin rerun any owner's task.
	Owner string
	// Workload is the caller's workload ("" for none): the rerun is the
	// caller's spending, charged to it and held to its cap like any task
	// the caller submits, whichever workload ran the original. An admin's
	// rerun (Owner "") is charged to the original's workload instead.
	Workload string
	TaskID   string
	Key      string // the caller's Idempotency-Key
	TraceID  string
}

// Rerun creates a NEW task that repeats a finished one's request: a new
// idempotency key derived from the old task, the workload charged and the
// caller's key (RerunKey), charged
// to the owner's budget and the caller's workload like any task (see
// RerunParams), linked by rerun_of. The original task and its record are
// never touched. It returns ErrNotFound, ErrNotFinished, ErrErased when
// the request body is gone, or what Create returns (a budget refusal
// among them).
func (s *Service) Rerun(ctx context.Context, p RerunParams) (Created, error) {
	owner, id, key, traceID := p.Owner, p.TaskID, p.Key, p.TraceID
	var t Task
	var err error
	workload := p.Workload
	if owner == "" {
		t, err = s.reader.getAny(ctx, id)
		workload = t.Workload
	} else {
		t, err = s.reader.get(ctx, owner, id)
	}
	if err != nil {
		return Created{}, err
	}
	if !t.Status.Final() {
		return Created{}, ErrNotFinished
	}
	if t.BodiesErasedAt != nil {
		return Created{}, ErrErased
	}
	raw, err := s.guard.rawRequest(t)
	if err != nil {
		return Created{}, fmt.Errorf("tasks: rerun: %w", err)
	}
	derived := RerunKey(t.ID, workload, key)
	if !ValidIdempotencyKey(key) || !ValidIdempotencyKey(derived) {
		return Created{}, &ValidationError{Fields: []FieldError{{"Idempotency-Key",
			fmt.Sprintf("must be 1-%d printable ASCII characters for a rerun", MaxKeyLength-len(derived)+len(key))}}}
	}
	return s.intake.create(ctx, Submission{OwnerID: t.OwnerID, Workload: workload, IdempotencyKey: derived,
		TraceID: traceID, Request: raw, RerunOf: t.ID})
}

// RerunKey is the idempotency key of a rerun of task id under the
// caller's key, charged to workload: `rerun/<id>/<key>` without a
// workload, `rerun@<workload>/<id>/<key>` with one. Two reruns share a
// task only when they would be charged to the same workload, so a
// workload's rerun is never answered with, and charged as, another's.
// Workload names hold no '/' and the no-workload form has none before the
// id, so no two (workload, key) pairs give one derived key.
func RerunKey(id, workload, key string) string {
	if workload == "" {
		return "rerun/" + id + "/" + key
	}
	return "rerun@" + workload + "/" + id + "/" + key
}
