package tasks

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tollgate/tollgate/internal/pipetx"
	"github.com/tollgate/tollgate/provider"
)

// succeededCall is one run's succeeded provider call waiting to be
// recorded with others of its owner (recordTogether).
type succeededCall struct {
	r       *run
	b       *begunAttempt
	resp    *provider.Response
	latency time.Duration
	res     successResult // filled in once recorded
}

// errAlone: the batch did not commit; each of its members takes its
// ordinary path on its own.
var errAlone = errors.New("tasks: run alone")

// recordTogether records c with the other succeeded calls of its owner
// that are waiting (see together): the owner's budget row, which each
// settlement updates, is then locked once per batch instead of once per
// task. It returns nil once c is committed (c.res is then filled in) and
// errAlone when c must be recorded on its own: a task of the batch was
// finished or canceled meanwhile, or the batch failed.
func (s *Service) recordTogether(ctx context.Context, c *succeededCall) error {
	owner := c.b.task.OwnerID
	return s.successes.do(owner, c, func(batch []*succeededCall) error {
		return s.recordBatch(ctx, owner, batch)
	})
}

// recordBatch records calls, all of owner, in one transaction: their tasks
// locked and their journals read in one round trip (in task id order), then
// every record and settlement sent with COMMIT. It returns errAlone when
// the batch did not commit, or when a task is not plainly running (finished
// by a rescued duplicate, canceled): the ordinary path knows those cases.
func (s *Service) recordBatch(ctx context.Context, owner string, calls []*succeededCall) error {
	slices.SortFunc(calls, func(a, b *succeededCall) int { return strings.Compare(a.b.task.ID, b.b.task.ID) })
	err := pipetx.Run(ctx, s.pool, func(tx *pipetx.Tx) error {
		states := make([]attemptState, len(calls))
		locks := &pgx.Batch{}
		for i, c := range calls {
			locks.Queue(attemptStateSQL+lockAttemptSQL, c.b.task.ID).Query(func(rows pgx.Rows) (err error) {
				states[i], err = collectAttemptState(rows)
				return err
			})
		}
		if err := tx.SendBatch(ctx, locks).Close(); err != nil {
			return err
		}
		// The records first, then, under the owner's queue, only the
		// settlements with COMMIT: the queue, which admissions share, is
		// held for the statements on the budget row alone.
		records, settles := &pgx.Batch{}, &pgx.Batch{}
		for i, c := range calls {
			st := states[i]
			if st.task.Status.Final() || st.task.CancelRequested {
				return errAlone
			}
			if !c.b.sent {
				c.b.attempt = st.last + 1
			}
			if err := s.queueSuccess(records, settles, st, c.r, c.b, c.resp, c.latency, &c.res); err != nil {
				return err
			}
			c.r.queueDone(records)
		}
		if err := tx.SendBatch(ctx, records).Close(); err != nil {
			return err
		}
		return s.commitOnBudget(ctx, tx, owner, settles)
	})
	if err != nil {
		return errAlone
	}
	s.cfg.Metrics.RecordedTogether(len(calls))
	return nil
}
