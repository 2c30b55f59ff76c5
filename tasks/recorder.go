package tasks

import (
	"context"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/tollgate/tollgate/budget"
	"github.com/tollgate/tollgate/internal/pipetx"
)

// recorder records succeeded calls. Which one a Service uses is chosen
// where it is built (New): the run's code cannot tell them apart.
type recorder interface {
	// record records c, a succeeded call, and carries out what follows it
	// (decide, apply). It returns what the caller does once it committed.
	record(ctx context.Context, c *finishedCall) (applied, error)
}

// loneRecorder records each success in a transaction of its own.
type loneRecorder struct{ s *Service }

func (l loneRecorder) record(ctx context.Context, c *finishedCall) (applied, error) {
	return l.s.recordAlone(ctx, c)
}

// batchRecorder records a success with the other successes of its owner
// that are waiting (see ownerBatcher): the owner's budget row, which each
// settlement updates, is then locked once per batch instead of once per
// task. A success the batch cannot record (a task of the batch finished
// or canceled meanwhile, or the batch failed) is recorded alone.
type batchRecorder struct {
	s       *Service
	alone   loneRecorder
	batcher ownerBatcher[*finishedCall]
}

// newBatchRecorder is the batching recorder of s, which records alone what
// a batch cannot.
func newBatchRecorder(s *Service) *batchRecorder {
	return &batchRecorder{s: s, alone: loneRecorder{s}}
}

func (b *batchRecorder) record(ctx context.Context, c *finishedCall) (applied, error) {
	owner := c.b.task.OwnerID
	err := b.batcher.do(owner, c, func(batch []*finishedCall) error {
		return b.s.recordBatch(ctx, owner, batch)
	})
	if err != nil {
		c.res = successResult{} // what the batch read of it did not commit
		return b.alone.record(ctx, c)
	}
	return applied{final: c.res.logged(c.log)}, nil
}

// recordBatch records calls, all of owner, in one transaction: their tasks
// locked and their journals read (in task id order), every record, then
// the settlements sent with COMMIT. It returns errAlone when the batch did
// not commit, or when a task is not plainly running (finished by a rescued
// duplicate, canceled, or with an ambiguous attempt behind it): the
// ordinary path knows those cases.
//
// When every call's journal entry was committed "sent" before the call
// (runs on arrival, inline runs), the attempt numbers are known and each
// record depends only on what the task was admitted with, so the whole
// transaction is one round trip: the locking reads, the records, the
// settlements and COMMIT. They stand only if each task is as the records
// assumed it (not finished, no cancel asked, no ambiguous attempt), which
// a guard after the locking reads checks in SQL (recordableSQL): with the
// COMMIT in the same pipeline, only an error can stop it, and the batch
// then rolls back, the records with it.
func (s *Service) recordBatch(ctx context.Context, owner string, calls []*finishedCall) error {
	slices.SortFunc(calls, func(a, b *finishedCall) int { return strings.Compare(a.b.task.ID, b.b.task.ID) })
	early := !slices.ContainsFunc(calls, func(c *finishedCall) bool { return !c.b.sent })
	err := pipetx.Run(ctx, s.pool, func(tx *pipetx.Tx) error {
		states := make([]attemptState, len(calls))
		first, records, settles := &pgx.Batch{}, &pgx.Batch{}, &budget.Settlements{}
		for i, c := range calls {
			first.Queue(attemptStateSQL+lockAttemptSQL, c.b.task.ID).Query(func(rows pgx.Rows) (err error) {
				states[i], err = collectAttemptState(rows)
				return err
			})
		}
		if early {
			// One round trip: the locking reads, a guard per task that
			// aborts unless the read found it as the records assume, the
			// records, the settlements and COMMIT, under the owner's queue.
			for _, c := range calls {
				first.Queue(recordableSQL, c.b.task.ID)
			}
			for _, c := range calls {
				if err := s.queueRecords(first, settles, attemptState{task: c.b.task}, c); err != nil {
					return err
				}
			}
			settles.Queue(first, s.cfg.AlertThresholds)
			if err := s.commitOnBudget(ctx, tx, owner, first); err != nil {
				return err
			}
			for i, c := range calls {
				c.res.task = states[i].task
				c.res.task.Request = c.b.raw
			}
			return nil
		}
		if err := tx.SendBatch(ctx, first).Close(); err != nil {
			return err
		}
		for i, c := range calls {
			st := states[i]
			if st.task.Status.Final() || st.task.CancelRequested {
				return errAlone
			}
			if !c.b.sent {
				// The next free number: the one the run expected, unless
				// a rescued duplicate of the job recorded first.
				c.b.attempt = st.last + 1
			}
			if err := s.queueRecords(records, settles, st, c); err != nil {
				return err
			}
		}
		// The records first, then, under the owner's queue, only the
		// settlements (one statement, each balance row updated once with
		// the batch's totals) with COMMIT: the queue, which admissions
		// share, is held for the statement on the budget row alone. A
		// batch a balance row cannot charge in full rolls back, and each
		// member is recorded alone, where a shortfall is recorded.
		if err := tx.SendBatch(ctx, records).Close(); err != nil {
			return err
		}
		b := &pgx.Batch{}
		settles.Queue(b, s.cfg.AlertThresholds)
		return s.commitOnBudget(ctx, tx, owner, b)
	})
	if err != nil {
		return errAlone
	}
	s.cfg.Metrics.RecordedTogether(len(calls))
	return nil
}

// recordableSQL aborts the transaction (SQLSTATE TG409) unless task $1,
// locked by an earlier statement of it, is still as a run on arrival's
// records assume: not finished, no cancel asked, no ambiguous attempt in
// its journal. One row whatever the task's state, so a task that is gone
// aborts too. A scalar id, not a batch's array: a prepared `= ANY($1)`
// is planned anew on every call.
const recordableSQL = `
	SELECT CASE WHEN EXISTS (
		SELECT 1 FROM tasks t
		WHERE t.id = $1 AND t.status NOT IN ('succeeded', 'failed', 'canceled') AND NOT t.cancel_requested
		  AND NOT EXISTS (SELECT 1 FROM task_attempts a WHERE a.task_id = t.id AND a.state = 'ambiguous'))
	THEN 0 ELSE tollgate_abort('TG409', 'tasks: a task of the batch is not as its records assume') END`

// queueRecords queues c's records on records and its settlement on
// settles, for its task as st has it.
func (s *Service) queueRecords(records *pgx.Batch, settles *budget.Settlements, st attemptState, c *finishedCall) error {
	if err := s.queueSuccess(records, settles, st, c); err != nil {
		return err
	}
	c.r.queueDone(records)
	return nil
}
