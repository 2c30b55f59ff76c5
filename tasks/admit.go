package tasks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/riverqueue/river"

	"github.com/tollgate/tollgate/budget"
	"github.com/tollgate/tollgate/internal/pipetx"
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
	// Service.reschedule) or dies (Service.WriteSafetyNetsOnce).
	onArrival bool

	// Filled in by queueInsert once the batch's results are read.
	task  Task
	taken bool // the key was taken by a concurrent request
	jobID int64
}

// needsJob says whether a is written with a River job: every task but a
// run on arrival, whose net is written only when needed.
func (a *admission) needsJob() bool { return !a.onArrival }

// queueInsert queues a's task row, under the idempotency constraint, with
// its job's id (0 for none). A key taken by a concurrent request (ON CONFLICT waits for
// it to commit or roll back) sets a.taken, or, when strict, fails the
// statement with a unique violation, aborting the transaction: a batch's
// rows are sent with its COMMIT, so only an error can stop that commit,
// and an error costs nothing to plan (a count of the batch's rows after
// them, its id = ANY($1) never given a generic plan, was planned anew for
// every batch: 0.13 ms of PostgreSQL's time per task at 200 tasks/s).
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
// the row (answerColumns) would give it: the statement returns only what
// PostgreSQL decided (the timestamps) and the stored metadata, decoded as
// a read decodes it, since that is what later reads will answer with. The
// rest, this process holds already: reading the whole row back cost a
// JSON decode of the request, inside the owner's admission lane, at every
// admission (TestAdmissionAnswersAsAReadWould holds the two equal).
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

// admitAlone writes a in its own transaction: the job first (if it needs
// one), so the task row is written once, with its job id (in the balance
// rows' round trip);
// the reservation last, sent with COMMIT under the owner's queue
// (commitOnBudget), so the owner's budget row is held only while
// PostgreSQL runs it and commits. It returns
// errKeyTaken when a concurrent request holds the key, and
// budget.ErrInsufficient when the budget cannot cover the reservation.
func (s *Service) admitAlone(ctx context.Context, a *admission) error {
	return pipetx.Run(ctx, s.pool, func(tx *pipetx.Tx) error {
		var jobID int64
		if a.needsJob() {
			res, err := s.river.InsertTx(ctx, tx, a.args, a.opts)
			if err != nil {
				return fmt.Errorf("enqueue: %w", err)
			}
			jobID = res.Job.ID
		}
		// The row and the balance rows' read in one round trip.
		at := s.cfg.Now()
		rows, balance := &pgx.Batch{}, &budget.BalanceRows{}
		a.queueInsert(rows, jobID, false)
		budget.QueueBalanceRows(rows, a.owner, a.sub.Workload, at, balance)
		if err := tx.SendBatch(ctx, rows).Close(); err != nil {
			return err
		}
		if a.taken {
			return errKeyTaken // rolled back, the job with it
		}
		ids, err := balance.Resolve(ctx, tx)
		if err != nil {
			return err
		}
		b := &pgx.Batch{}
		budget.QueueReserveOn(b, a.reservation(at), ids)
		return s.commitOnBudget(ctx, tx, a.owner, b)
	})
}

// admitTogether writes a with the other admissions of its owner that are
// waiting (see ownerBatcher), in one transaction: their jobs in one statement,
// then their rows, their reservations and COMMIT in one round trip. It
// returns nil once the batch committed: a is then admitted, or a.taken
// says another submission (of the batch, or a concurrent request) holds
// its key. It returns errAlone when the batch did not commit (a budget
// that cannot cover every reservation, keys taken again on the one retry
// of admitBatch, a period not opened yet, an error): each admission then
// takes admitAlone, which tells those cases apart.
func (s *Service) admitTogether(ctx context.Context, a *admission) error {
	return s.admissions.do(a.owner, a, func(batch []*admission) error {
		// The batch is its members' work, not only this request's: it
		// survives this client going away.
		bctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if err := s.admitBatch(bctx, batch); err != nil {
			return errAlone
		}
		admitted := 0
		for _, a := range batch {
			if !a.taken {
				admitted++
			}
		}
		if admitted > 0 {
			s.cfg.Metrics.AdmittedTogether(admitted)
		}
		return nil
	})
}

// admitBatch writes the batch all in one transaction. A key of the batch
// that a concurrent request (another instance, or a submission that fell
// back to admitAlone) took aborts that transaction; the keys taken are then
// read, their submissions answered from the task that holds them (a.taken),
// and the rest written together once more. Falling back whole instead sent
// every member to admitAlone at once, to race the owner's next batch on
// its budget row and, with a key sent twice among them, to abort that
// batch too: under load, a storm of retries could leave no batch standing.
func (s *Service) admitBatch(ctx context.Context, all []*admission) error {
	// A key sent twice at once is written once: the later submissions
	// answer from the first's task (Create's errKeyTaken), as they would
	// had the first committed before them.
	batch := make([]*admission, 0, len(all))
	seen := make(map[string]bool, len(all))
	for _, a := range all {
		a.taken = seen[a.key]
		seen[a.key] = true
		if !a.taken {
			batch = append(batch, a)
		}
	}
	err := s.writeBatch(ctx, batch)
	if !isKeyTakenError(err) {
		return err
	}
	// The insert that failed waited for the concurrent request to end, so
	// a key it took is committed and visible now. One more try at most:
	// a second failure sends the batch to admitAlone (errAlone).
	taken, rerr := s.takenKeys(ctx, batch)
	if rerr != nil || len(taken) == 0 {
		return err // the taker rolled back: admitAlone tells the cases apart
	}
	rest := batch[:0:0]
	for _, a := range all {
		if taken[a.key] {
			a.taken = true
		} else if !a.taken {
			rest = append(rest, a)
		}
	}
	if len(rest) == 0 {
		return nil
	}
	return s.writeBatch(ctx, rest)
}

// isKeyTakenError says whether err is the unique violation of a task's
// idempotency key.
func isKeyTakenError(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == pgerrcode.UniqueViolation && pe.ConstraintName == "tasks_owner_idempotency_key"
}

// takenKeys returns which of the batch's keys a task of their owner
// holds. A batch is one owner's.
func (s *Service) takenKeys(ctx context.Context, batch []*admission) (map[string]bool, error) {
	keys := make([]string, len(batch))
	for i, a := range batch {
		keys[i] = a.key
	}
	rows, err := s.pool.Query(ctx, `SELECT idempotency_key FROM tasks WHERE owner_id = $1 AND idempotency_key = ANY($2)`,
		batch[0].owner, keys)
	if err != nil {
		return nil, err
	}
	list, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, err
	}
	taken := make(map[string]bool, len(list))
	for _, k := range list {
		taken[k] = true
	}
	return taken, nil
}

// writeBatch writes batch, whose keys are distinct, in one transaction: its
// jobs in one statement, then its rows, its reservations and COMMIT in one
// round trip.
func (s *Service) writeBatch(ctx context.Context, batch []*admission) error {
	// Rows in key order: two batches of the owner running at once
	// (admissionLanes), each holding a key the other sends too, wait for
	// one another in one direction, never in a cycle that PostgreSQL would
	// break only after deadlock_timeout.
	slices.SortFunc(batch, func(a, b *admission) int { return strings.Compare(a.key, b.key) })
	return pipetx.Run(ctx, s.pool, func(tx *pipetx.Tx) error {
		// The jobs of those that need one (runs on arrival do not).
		jobIDs := make([]int64, len(batch))
		var jobs []river.InsertManyParams
		for _, a := range batch {
			if a.needsJob() {
				jobs = append(jobs, river.InsertManyParams{Args: a.args, InsertOpts: a.opts})
			}
		}
		if len(jobs) > 0 {
			res, err := s.river.InsertManyTx(ctx, tx, jobs)
			if err != nil {
				return fmt.Errorf("enqueue: %w", err)
			}
			if len(res) != len(jobs) {
				return fmt.Errorf("enqueue: %d jobs inserted for %d tasks", len(res), len(jobs))
			}
			j := 0
			for i, a := range batch {
				if a.needsJob() {
					jobIDs[i] = res[j].Job.ID
					j++
				}
			}
		}
		// The rows (each failing if its key was taken), the reservations
		// (one statement: each balance row updated once, with their sum)
		// and COMMIT: one round trip. A key a concurrent request took, a
		// budget short for one task or a period not opened yet aborts the
		// batch, and each admission then takes admitAlone, which tells
		// those cases apart.
		at := s.cfg.Now()
		b := &pgx.Batch{}
		for i, a := range batch {
			a.queueInsert(b, jobIDs[i], true)
		}
		rs := make([]budget.Reservation, len(batch))
		for i, a := range batch {
			rs[i] = a.reservation(at)
		}
		budget.QueueReserveMany(b, rs)
		// Not under the owner's queue (commitOnBudget): the rows inserted
		// before the reservation may wait for a concurrent request's
		// uncommitted row with the same key, which may itself be waiting
		// for that queue. At most admissionLanes batches per owner at a
		// time already keep the budget row's waiters few.
		return tx.CommitWith(ctx, b)
	})
}

// errKeyTaken rolls back a creation whose idempotency key a concurrent
// request took first.
var errKeyTaken = errors.New("tasks: idempotency key taken")

// enqueueing returns the job args and options of a new task: a stream's
// (inline) job is its safety net, due after the call's deadline. A run on
// arrival uses them only if it writes its net (Service.reschedule).
func (s *Service) enqueueing(ctx context.Context, id, traceID, providerKey string, inline bool) (TaskArgs, *river.InsertOpts) {
	opts := &river.InsertOpts{Queue: queueFor(providerKey)}
	if inline {
		opts.ScheduledAt = time.Now().Add(s.cfg.jobTimeout() + safetyNetGrace)
	}
	return TaskArgs{TaskID: id, TraceID: traceID, TraceParent: tracing.TraceParent(ctx)}, opts
}
