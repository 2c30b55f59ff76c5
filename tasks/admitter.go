package tasks

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"

	"github.com/tollgate/tollgate/budget"
	"github.com/tollgate/tollgate/internal/pipetx"
	"github.com/tollgate/tollgate/limits"
)

// admitter writes admissions. Create prepares each new task as an
// admission and hands it over; how it is written (on its own, or in one
// transaction with the owner's other admissions of the moment) is the
// admitter's choice, made when the service is built, and invisible to
// Create, as River's job executor cannot tell which completer it calls.
type admitter interface {
	// admit writes a's task row, its job (unless it runs on arrival) and
	// its reservation, committed together or not at all. It returns nil
	// once they committed (a.task and a.jobID are then set), errKeyTaken
	// when a concurrent request holds a's key (nothing is written),
	// budget.ErrInsufficient when a budget cannot cover the reservation,
	// a *RateLimitedError when a rate limit has no room for it (nothing is
	// written), or the error that stopped the transaction.
	admit(ctx context.Context, a *admission) error
}

// newAdmitter is the admitter a Service uses: an owner's admissions that
// arrive together are written together (batchAdmitter), since they all end
// on the owner's budget row; one that cannot be, or a streamed one, is
// written on its own (loneAdmitter).
func newAdmitter(lone *loneAdmitter, cfg Config) admitter {
	return newBatchAdmitter(lone, cfg.Metrics)
}

// loneAdmitter writes every admission in a transaction of its own.
type loneAdmitter struct {
	pool  *pgxpool.Pool
	river *river.Client[pgx.Tx]
	now   func() time.Time // the reservation's time
	// commitOnBudget sends the reservation with COMMIT after this
	// process's other commits on the owner's budget rows
	// (budgetQueue.commit).
	commitOnBudget func(ctx context.Context, tx *pipetx.Tx, owner string, b *pgx.Batch) error
}

// admit writes a in its own transaction: the job first (if it needs one),
// so the task row is written once, with its job id (in the balance rows'
// round trip); the reservation last, sent with COMMIT under the owner's
// queue (budgetQueue.commit), so the owner's budget row is held only while
// PostgreSQL runs it and commits. It returns errKeyTaken when a
// concurrent request holds the key, and budget.ErrInsufficient when the
// budget cannot cover the reservation.
func (l *loneAdmitter) admit(ctx context.Context, a *admission) error {
	return pipetx.Run(ctx, l.pool, func(tx *pipetx.Tx) error {
		var jobID int64
		if a.needsJob() {
			res, err := l.river.InsertTx(ctx, tx, a.args, a.opts)
			if err != nil {
				return fmt.Errorf("enqueue: %w", err)
			}
			jobID = res.Job.ID
		}
		// The row, the rate windows' counts and the balance rows' read
		// in one round trip, in the lock order every admission keeps:
		// task row, rate windows, balance rows.
		at := l.now()
		a.rateAt = at
		rows, balance, windows := &pgx.Batch{}, &budget.BalanceRows{}, &limits.Windows{}
		a.queueInsert(rows, jobID, false)
		limits.QueueAdmit(rows, a.owner, at, []limits.Charge{a.rateCharge()}, false, windows)
		budget.QueueBalanceRows(rows, a.owner, a.sub.Workload, at, balance)
		if err := tx.SendBatch(ctx, rows).Close(); err != nil {
			return err
		}
		if a.taken {
			return errKeyTaken // rolled back, the job with it
		}
		if err := a.rateDecided(windows); err != nil {
			return err // rolled back: the count, the row and the job
		}
		if err := balance.Open(ctx, tx); err != nil {
			return err
		}
		b := &pgx.Batch{}
		budget.QueueReserve(b, a.reservation(at))
		return l.commitOnBudget(ctx, tx, a.owner, b)
	})
}
