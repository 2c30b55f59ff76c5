package tasks

import (
	"context"
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
	"github.com/tollgate/tollgate/limits"
	"github.com/tollgate/tollgate/metrics"
)

// batchAdmitter writes an owner's admissions that are waiting at the same
// moment in one transaction: every admission of an owner ends on the
// owner's budget row, and a batch shares one hand-over of the row's lock
// and one commit (ownerBatcher). A batch that cannot commit falls back to one
// transaction per admission (loneAdmitter), which tells its members'
// refusals apart.
type batchAdmitter struct {
	lone *loneAdmitter
	// batches groups the admissions of each owner that wait while the
	// owner's batches run.
	batches ownerBatcher[*admission]
	metrics *metrics.Metrics // counts the tasks admitted in batches
}

// admissionLanes is how many admission batches of one owner run at once.
//
// With one lane, an admission that arrives while its owner's batch runs
// waits for that batch and then for its own: one batch slowed down (its
// backend descheduled on a busy machine, a wait on the budget row) holds
// back every admission of the owner that comes meanwhile. With two, the
// next batch writes its rows while the one before commits; they meet only
// on the owner's budget row, for the reservation and COMMIT, where
// PostgreSQL orders them, and two batches still cap the row's waiters from
// one process (see writeOnce). At 200 tasks/s with a 1 s model, the
// median admission p99 of seven alternating pairs is 23 ms with two lanes
// against 34 ms with one; four lanes do no better.
const admissionLanes = 2

// newBatchAdmitter returns a batchAdmitter that writes what it cannot
// batch with lone.
func newBatchAdmitter(lone *loneAdmitter, m *metrics.Metrics) *batchAdmitter {
	b := &batchAdmitter{lone: lone, metrics: m}
	b.batches.lanes = admissionLanes
	return b
}

// admit writes a with the other admissions of its owner that are waiting
// (writeTogether), or alone when a is streamed (Inline) or its batch did
// not commit.
func (b *batchAdmitter) admit(ctx context.Context, a *admission) error {
	if a.sub.Inline {
		return b.lone.admit(ctx, a)
	}
	err := b.writeTogether(ctx, a)
	switch {
	case errors.Is(err, errAlone):
		a.taken = false
		return b.lone.admit(ctx, a)
	case err == nil && a.taken:
		return errKeyTaken
	}
	return err
}

// writeTogether writes a with the other admissions of its owner that are
// waiting (see ownerBatcher), in one transaction: their jobs in one statement,
// then their rows, their reservations and COMMIT in one round trip. It
// returns nil once the batch committed: a is then admitted, or a.taken
// says another submission (of the batch, or a concurrent request) holds
// its key. It returns errAlone when the batch did not commit (a budget
// that cannot cover every reservation, keys taken again on the one retry
// of writeBatch, a period not opened yet, an error): each admission then
// takes the lone admitter, which tells those cases apart.
func (b *batchAdmitter) writeTogether(ctx context.Context, a *admission) error {
	return b.batches.do(a.owner, a, func(batch []*admission) error {
		// The batch is its members' work, not only this request's: it
		// survives this client going away.
		bctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if err := b.writeBatch(bctx, batch); err != nil {
			return errAlone
		}
		admitted := 0
		for _, a := range batch {
			if !a.taken {
				admitted++
			}
		}
		if admitted > 0 {
			b.metrics.AdmittedTogether(admitted)
		}
		return nil
	})
}

// writeBatch writes the batch all in one transaction. A key of the batch
// that a concurrent request (another instance, or a submission written
// alone) took aborts that transaction; the keys taken are then read, their
// submissions answered from the task that holds them (a.taken), and the
// rest written together once more. Falling back whole would send every
// member to the lone admitter at once, to race the owner's next batch on
// its budget row and, with a key sent twice among them, to abort that
// batch too: under load, a storm of retries could leave no batch standing.
func (b *batchAdmitter) writeBatch(ctx context.Context, all []*admission) error {
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
	err := b.writeOnce(ctx, batch)
	if !isKeyTakenError(err) {
		return err
	}
	// The insert that failed waited for the concurrent request to end, so
	// a key it took is committed and visible now. One more try at most:
	// a second failure sends the batch to the lone admitter (errAlone).
	taken, rerr := b.takenKeys(ctx, batch)
	if rerr != nil || len(taken) == 0 {
		return err // the taker rolled back: the lone admitter tells the cases apart
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
	return b.writeOnce(ctx, rest)
}

// isKeyTakenError says whether err is the unique violation of a task's
// idempotency key.
func isKeyTakenError(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == pgerrcode.UniqueViolation && pe.ConstraintName == "tasks_owner_idempotency_key"
}

// takenKeys returns which of the batch's keys a task of their owner
// holds. A batch is one owner's.
func (b *batchAdmitter) takenKeys(ctx context.Context, batch []*admission) (map[string]bool, error) {
	keys := make([]string, len(batch))
	for i, a := range batch {
		keys[i] = a.key
	}
	rows, err := b.lone.pool.Query(ctx, `SELECT idempotency_key FROM tasks WHERE owner_id = $1 AND idempotency_key = ANY($2)`,
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

// writeOnce writes batch, whose keys are distinct, in one transaction: its
// jobs in one statement, then its rows, its reservations and COMMIT in one
// round trip.
func (b *batchAdmitter) writeOnce(ctx context.Context, batch []*admission) error {
	// Rows in key order: two batches of the owner running at once
	// (admissionLanes), each holding a key the other sends too, wait for
	// one another in one direction, never in a cycle that PostgreSQL would
	// break only after deadlock_timeout.
	slices.SortFunc(batch, func(x, y *admission) int { return strings.Compare(x.key, y.key) })
	return pipetx.Run(ctx, b.lone.pool, func(tx *pipetx.Tx) error {
		jobIDs, err := b.insertJobs(ctx, tx, batch)
		if err != nil {
			return err
		}
		// The rows (each failing if its key was taken), the reservations
		// (one statement: each balance row updated once, with their sum)
		// and COMMIT: one round trip. A key a concurrent request took, a
		// budget short for one task or a period not opened yet aborts the
		// batch, and each admission is then written alone, which tells
		// those cases apart.
		at := b.lone.now()
		stmts := &pgx.Batch{}
		for i, a := range batch {
			a.queueInsert(stmts, jobIDs[i], true)
		}
		rs := make([]budget.Reservation, len(batch))
		for i, a := range batch {
			rs[i] = a.reservation(at)
		}
		// The rate windows counted for the whole batch, aborting it if a
		// limit has no room for all of it (the lone admitter then decides
		// for each), before the balance rows: the lock order of every
		// admission.
		charges := make([]limits.Charge, len(batch))
		for i, a := range batch {
			charges[i], a.rateAt = a.rateCharge(), at
		}
		windows := &limits.Windows{}
		limits.QueueAdmit(stmts, batch[0].owner, at, charges, true, windows)
		budget.QueueReserve(stmts, rs...)
		// Not under the owner's queue (budgetQueue.commit): the rows inserted
		// before the reservation may wait for a concurrent request's
		// uncommitted row with the same key, which may itself be waiting
		// for that queue. At most admissionLanes batches per owner at a
		// time already keep the budget row's waiters few.
		if err := tx.CommitWith(ctx, stmts); err != nil {
			return err
		}
		// Committed, so every count fitted (strict): each admission's
		// decision is an admission, with the batch's remaining figures.
		for _, a := range batch {
			_ = a.rateDecided(windows)
		}
		return nil
	})
}

// insertJobs inserts the jobs of the batch's admissions that need one
// (runs on arrival do not) in one statement, and returns each admission's
// job id, 0 for none, in the batch's order.
func (b *batchAdmitter) insertJobs(ctx context.Context, tx pgx.Tx, batch []*admission) ([]int64, error) {
	jobIDs := make([]int64, len(batch))
	var jobs []river.InsertManyParams
	for _, a := range batch {
		if a.needsJob() {
			jobs = append(jobs, river.InsertManyParams{Args: a.args, InsertOpts: a.opts})
		}
	}
	if len(jobs) == 0 {
		return jobIDs, nil
	}
	res, err := b.lone.river.InsertManyTx(ctx, tx, jobs)
	if err != nil {
		return nil, fmt.Errorf("enqueue: %w", err)
	}
	if len(res) != len(jobs) {
		return nil, fmt.Errorf("enqueue: %d jobs inserted for %d tasks", len(res), len(jobs))
	}
	j := 0
	for i, a := range batch {
		if a.needsJob() {
			jobIDs[i] = res[j].Job.ID
			j++
		}
	}
	return jobIDs, nil
}
