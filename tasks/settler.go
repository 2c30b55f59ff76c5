package tasks

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tollgate/tollgate/internal/pipetx"
	"github.com/tollgate/tollgate/provider"
)

// maxTogether bounds how many succeeded calls one transaction records.
const maxTogether = 64

// settler records the succeeded calls of one owner together, in one
// transaction and one commit: the owner's budget row, which each settlement
// updates, is then locked and handed over once per batch instead of once
// per task, and the batch shares its round trips and its WAL flush.
//
// Batching is natural: a call that finds no batch being recorded for its
// owner records its own at once (a batch of one, no added wait); calls
// that arrive meanwhile queue, and the first of them records them all once
// the current batch is done. A batch that fails as a whole leaves each of
// its calls to be recorded on its own, by the ordinary path.
type settler struct {
	mu     sync.Mutex
	owners map[string]*ownerCalls
}

type ownerCalls struct {
	queued []*succeededCall
	busy   bool // a batch of this owner is being recorded
}

// succeededCall is one River run's succeeded provider call waiting to be
// recorded.
type succeededCall struct {
	r       *run
	b       *begunAttempt
	resp    *provider.Response
	latency time.Duration
	res     successResult
	// done receives nil once the call is recorded, errLead when its
	// goroutine is to record the queue's next batch, or errAlone when it
	// must be recorded on its own.
	done chan error
}

var (
	errLead  = errors.New("tasks: record the next batch")
	errAlone = errors.New("tasks: record alone")
)

// recordTogether records c with the other succeeded calls of its owner
// that are waiting. It returns nil once c is committed (c.res is then
// filled in) and errAlone when c must be recorded on its own: its task was
// finished or canceled meanwhile, or its batch failed.
func (s *Service) recordTogether(ctx context.Context, c *succeededCall) error {
	owner := c.b.task.OwnerID
	c.done = make(chan error, 1)
	st := &s.settler
	st.mu.Lock()
	if st.owners == nil {
		st.owners = map[string]*ownerCalls{}
	}
	q := st.owners[owner]
	if q == nil {
		q = &ownerCalls{}
		st.owners[owner] = q
	}
	q.queued = append(q.queued, c)
	lead := !q.busy
	q.busy = true
	st.mu.Unlock()

	if !lead {
		// The goroutine recording the current batch hands over to this
		// one or records this call; it never leaves it waiting. The wait
		// is bounded by that batch's transaction.
		if err := <-c.done; !errors.Is(err, errLead) {
			return err
		}
	}
	batch := st.take(owner)
	err := s.recordBatch(ctx, owner, batch)
	for _, x := range batch {
		if x != c {
			x.done <- err
		}
	}
	st.handOver(owner)
	return err
}

// take removes up to maxTogether queued calls of owner, oldest first.
func (st *settler) take(owner string) []*succeededCall {
	st.mu.Lock()
	defer st.mu.Unlock()
	q := st.owners[owner]
	n := min(len(q.queued), maxTogether)
	batch := slices.Clone(q.queued[:n])
	q.queued = q.queued[n:]
	return batch
}

// handOver makes the oldest queued call of owner record the next batch, or
// marks the owner idle when none is queued.
func (st *settler) handOver(owner string) {
	st.mu.Lock()
	defer st.mu.Unlock()
	q := st.owners[owner]
	if len(q.queued) == 0 {
		delete(st.owners, owner)
		return
	}
	q.queued[0].done <- errLead
}

// recordBatch records calls, all of owner, in one transaction: their tasks
// locked and their journals read in one round trip (in task id order), then
// every record and settlement sent with COMMIT. It returns errAlone when
// the batch did not commit, or when a task is not plainly running (finished
// by a rescued duplicate, canceled): the ordinary path knows those cases.
func (s *Service) recordBatch(ctx context.Context, owner string, calls []*succeededCall) error {
	slices.SortFunc(calls, func(a, b *succeededCall) int {
		switch {
		case a.b.task.ID < b.b.task.ID:
			return -1
		case a.b.task.ID > b.b.task.ID:
			return 1
		}
		return 0
	})
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
		records := &pgx.Batch{}
		for i, c := range calls {
			st := states[i]
			if st.task.Status.Final() || st.task.CancelRequested {
				return errAlone
			}
			if !c.b.sent {
				c.b.attempt = st.last + 1
			}
			if err := s.queueSuccess(records, st, c.r, c.b, c.resp, c.latency, &c.res); err != nil {
				return err
			}
		}
		return s.commitOnBudget(ctx, tx, owner, records)
	})
	if err != nil {
		return errAlone
	}
	s.cfg.Metrics.RecordedTogether(len(calls))
	return nil
}
