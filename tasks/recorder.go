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
type loneRecorder struct{ s *recording }

func (l loneRecorder) record(ctx context.Context, c *finishedCall) (applied, error) {
	return l.s.recordAlone(ctx, c)
}

// batchRecorder records a success with the other successes of its owner
// that are waiting (see ownerBatcher): the owner's budget row, which each
// settlement updates, is then locked once per batch instead of once per
// task. A success the batch cannot record (a task of the batch finished
// or canceled meanwhile, or the batch failed) is recorded alone.
type batchRecorder struct {
	s       *recording
	alone   loneRecorder
	batcher ownerBatcher[*finishedCall]
}

// newBatchRecorder is the batching recorder of s, which records alone what
// a batch cannot.
func newBatchRecorder(s *recording) *batchRecorder {
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

// recordBatch records calls, all of owner, in one transaction sent in one
// round trip: the reads that lock their tasks (in task id order), a guard
// per task, every record, the settlements and COMMIT, under the owner's
// queue (budgetQueue.commit). Each call's journal entry was committed "sent"
// before the call, so its attempt number is known and its record depends
// only on its task as its run began it. The records stand only if each
// task is still as they assume (not finished, no cancel asked, no
// ambiguous attempt), which the guard after the locking reads checks in
// SQL (recordableSQL): with the COMMIT in the same pipeline, only an error
// can stop it, and the batch then rolls back, the records with it. It
// returns errAlone when the batch did not commit: recorded alone, each
// call meets the ordinary path, which knows those cases and records the
// shortfall of a balance row that cannot charge it in full.
func (s *recording) recordBatch(ctx context.Context, owner string, calls []*finishedCall) error {
	slices.SortFunc(calls, func(a, b *finishedCall) int { return strings.Compare(a.b.task.ID, b.b.task.ID) })
	err := pipetx.Run(ctx, s.pool, func(tx *pipetx.Tx) error {
		states := make([]attemptState, len(calls))
		batch, settles := &pgx.Batch{}, &budget.Settlements{}
		for i, c := range calls {
			batch.Queue(attemptStateSQL+lockAttemptSQL, c.b.task.ID).Query(func(rows pgx.Rows) (err error) {
				states[i], err = collectAttemptState(rows)
				return err
			})
		}
		for _, c := range calls {
			batch.Queue(recordableSQL, c.b.task.ID)
		}
		for _, c := range calls {
			if err := s.queueRecords(batch, settles, attemptState{task: c.b.task}, c); err != nil {
				return err
			}
		}
		settles.Queue(batch, s.cfg.AlertThresholds)
		if err := s.budgetRows.commit(ctx, tx, owner, batch); err != nil {
			return err
		}
		for i, c := range calls {
			c.res.task = states[i].task
			c.res.task.Request = c.b.raw
		}
		return nil
	})
	if err != nil {
		return errAlone
	}
	s.cfg.Metrics.RecordedTogether(len(calls))
	return nil
}

// recordableSQL aborts the transaction (SQLSTATE TG409) unless task $1,
// locked by an earlier statement of it, is still as a batch's records
// assume: not finished, no cancel asked, no ambiguous attempt in
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
func (s *recording) queueRecords(records *pgx.Batch, settles *budget.Settlements, st attemptState, c *finishedCall) error {
	if err := s.queueSuccess(records, settles, st, c); err != nil {
		return err
	}
	c.r.queueDone(records)
	return nil
}
