package tasks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"github.com/tollgate/tollgate/budget"
	"github.com/tollgate/tollgate/limits"
	"github.com/tollgate/tollgate/tracing"
)

// admission is one new task, redacted and sealed, ready to be written:
// its row, its job and its reservation.
type admission struct {
	id, owner, key, model string
	hash, stored, sealed  []byte
	policy                string
	amount                int64
	estimated             bool
	deadline              time.Duration
	sub                   Submission
	args                  TaskArgs
	opts                  *river.InsertOpts
	providerKey           string
	// onArrival: this process runs the first attempt right after the
	// commit (runOnArrival); the task is written running, with the
	// attempt's journal entry "sent", and no job: its safety net is
	// written only if the run needs one (a retry or a wait, see
	// applier.reschedule) or dies (Service.WriteSafetyNetsOnce).
	onArrival bool

	tokens int64 // the reservation's token estimate, counted by rate limits

	// Filled in by queueInsert once the batch's results are read.
	task  Task
	taken bool // the key was taken by a concurrent request
	jobID int64
	// The rate limits' decision (nil when no limit applies), and the
	// time it was made at.
	rate   *limits.Decision
	rateAt time.Time
}

// needsJob says whether a is written with a River job: every task but a
// run on arrival, whose net is written only when needed.
func (a *admission) needsJob() bool { return !a.onArrival }

// queueInsert queues a's task row, under the idempotency constraint, with
// its job's id (0 for none). A key taken by a concurrent request (ON
// CONFLICT waits for it to commit or roll back) sets a.taken, or, when
// strict, fails the statement with a unique violation, aborting the
// transaction: a batch's rows are sent with its COMMIT, so only an error
// can stop that commit, and an error costs nothing to plan, where a count
// of the batch's rows after them (its id = ANY($1) never given a generic
// plan) would be planned anew for every batch: 0.13 ms of PostgreSQL's
// time per task at 200 tasks/s.
func (a *admission) queueInsert(b *pgx.Batch, jobID int64, strict bool) {
	a.jobID = jobID
	var job any
	if jobID != 0 {
		job = jobID
	}
	sub := a.sub
	onConflict := `ON CONFLICT (owner_id, idempotency_key) DO NOTHING`
	if strict {
		onConflict = ``
	}
	b.Queue(`
		INSERT INTO tasks (id, owner_id, idempotency_key, request_hash, request, model, reserved_micros, deadline_at,
		                   workload, payload, redaction_policy, rerun_of, route, prompt_version, max_attempts, call_timeout_ms,
		                   job_id, status, attempts)
		VALUES ($1, $2, $3, $4, $5, $6, $7, now() + $8::interval, $9, $10, $11, NULLIF($12, '')::uuid,
		        NULLIF($13, ''), NULLIF($14, ''), NULLIF($15, 0), NULLIF($16, 0), $17,
		        CASE WHEN $18 THEN 'running' ELSE 'queued' END, CASE WHEN $18 THEN 1 ELSE 0 END)
		`+onConflict+`
		RETURNING created_at, updated_at, deadline_at, request->'metadata'`, a.id, a.owner, a.key, a.hash, a.stored, a.model, a.amount, a.deadline, sub.Workload,
		a.sealed, a.policy, sub.RerunOf, sub.Route, sub.PromptVersion,
		sub.MaxAttempts, int(sub.CallTimeout/time.Millisecond), job, a.onArrival).Query(func(rows pgx.Rows) error {
		var found bool
		var metadata []byte
		var t Task
		for rows.Next() {
			found = true
			if err := rows.Scan(&t.CreatedAt, &t.UpdatedAt, &t.DeadlineAt, &metadata); err != nil {
				return err
			}
		}
		if err := rows.Err(); err != nil {
			return err
		}
		if !found {
			// The key is taken: by a concurrent request that has just
			// committed (ON CONFLICT waited for it).
			a.taken = true
			return nil
		}
		return a.admitted(t, metadata)
	})
	if a.onArrival {
		// Only if the row above was written (the key was free).
		b.Queue(`
			INSERT INTO task_attempts (task_id, attempt, provider_key, model, idempotency_key)
			SELECT $1, 1, $2, $3, $4 WHERE EXISTS (SELECT 1 FROM tasks WHERE id = $1)`,
			a.id, a.providerKey, a.model, a.id+":1")
	}
}

// admitted fills in a.task from what the admission wrote, as a read of
// the row (clientViewColumns) would give it: the statement returns only what
// PostgreSQL decided (the timestamps) and the stored metadata, decoded as
// a read decodes it, since that is what later reads will answer with. The
// rest, this process holds already: reading the whole row back would cost
// a JSON decode of the request, inside the owner's admission lane, at
// every admission (TestAdmittedTaskIsTheRowAsRead holds the two equal).
func (a *admission) admitted(t Task, metadata []byte) error {
	sub := a.sub
	t.ID, t.OwnerID, t.IdempotencyKey, t.Model, t.ReservedMicros = a.id, a.owner, a.key, a.model, a.amount
	t.Workload, t.payload, t.policy = sub.Workload, a.sealed, a.policy
	t.Status = StatusQueued
	if a.onArrival {
		t.Status, t.Attempts = StatusRunning, 1
	}
	if metadata != nil {
		if err := json.Unmarshal(metadata, &t.Request.Metadata); err != nil {
			return fmt.Errorf("tasks: admitted metadata: %w", err)
		}
	}
	t.Metadata = t.Request.Metadata
	if sub.Route != "" {
		t.Route = &sub.Route
	}
	if sub.PromptVersion != "" {
		t.PromptVersion = &sub.PromptVersion
	}
	if sub.MaxAttempts != 0 {
		t.maxAttempts = &sub.MaxAttempts
	}
	if ms := int(sub.CallTimeout / time.Millisecond); ms != 0 {
		t.callTimeoutMS = &ms
	}
	if job := a.jobID; job != 0 {
		t.jobID = &job
	}
	a.task = t
	return nil
}

func (a *admission) reservation(at time.Time) budget.Reservation {
	return budget.Reservation{TaskID: a.id, OwnerID: a.owner, Workload: a.sub.Workload, Amount: a.amount, Estimated: a.estimated, At: at}
}

// errKeyTaken rolls back a creation whose idempotency key a concurrent
// request took first.
var errKeyTaken = errors.New("tasks: idempotency key taken")

// enqueueing returns the job args and options of a new task: a stream's
// (inline) job is its safety net, due after the call's deadline. A run on
// arrival uses them only if it writes its net (applier.reschedule).
func (s *intake) enqueueing(ctx context.Context, id, traceID, providerKey string, inline bool) (TaskArgs, *river.InsertOpts) {
	opts := &river.InsertOpts{Queue: queueFor(providerKey)}
	if inline {
		opts.ScheduledAt = time.Now().Add(s.cfg.jobTimeout() + safetyNetGrace)
	}
	return TaskArgs{TaskID: id, TraceID: traceID, TraceParent: tracing.TraceParent(ctx)}, opts
}
