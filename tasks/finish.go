package tasks

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tollgate/tollgate/budget"
)

// finishUnsucceeded ends a task that produced no answer, failed or
// canceled: released, or settled as possibly charged after possiblyCharged
// calls that may have been billed.
func (s *Service) finishUnsucceeded(ctx context.Context, tx pgx.Tx, t Task, status Status, f *Failure, possiblyCharged int) ([]budget.Alert, error) {
	alerts, err := s.closeMoney(ctx, tx, t, moneyAfter(possiblyCharged))
	if err != nil {
		return nil, err
	}
	return alerts, finish(ctx, tx, t.ID, status, nil, f)
}

// closeMoney closes the reservation of a task that produced no answer as
// m says: released in full (moneyRelease), or settled as possibly charged
// (moneyPossiblyCharged) at the reservation, the worst case of one call.
// Any other m leaves it held.
func (s *Service) closeMoney(ctx context.Context, tx pgx.Tx, t Task, m money) ([]budget.Alert, error) {
	switch m {
	case moneyRelease:
		if err := budget.ReleaseTx(ctx, tx, t.ID); err != nil && !errors.Is(err, budget.ErrNotFound) {
			return nil, err
		}
	case moneyPossiblyCharged:
		// The figures of the reservation: the worst case of one call.
		in, out := int64(0), int64(0)
		if model, _, err := s.cfg.Catalog.Resolve(t.Model); err == nil {
			in, out = s.reservedTokens(model, t.Request)
		}
		settled, err := budget.SettleTx(ctx, tx, budget.Settlement{
			TaskID: t.ID, Workload: t.Workload, Model: t.Model, InputTokens: in,
			OutputTokens: out, Source: budget.SourcePossiblyCharged, CostMicros: t.ReservedMicros,
		}, s.cfg.AlertThresholds)
		if err != nil && !errors.Is(err, budget.ErrNotFound) {
			return nil, err
		}
		return settled.Alerts, nil
	}
	return nil, nil
}

// finish ends the task in one statement; a succeeded result's sealed output
// is stored with it. Its outcome, observed after commit, announces it to
// waiting pollers.
func finish(ctx context.Context, tx pgx.Tx, id string, status Status, res *Result, f *Failure) error {
	b := &pgx.Batch{}
	queueFinish(b, id, status, res, f, nil)
	return tx.SendBatch(ctx, b).Close()
}

// queueFinish queues finish's statement. With into set, the statement
// returns the finished task, read into it as Get would read it: this
// process's waiters then need not read it again.
func queueFinish(b *pgx.Batch, id string, status Status, res *Result, f *Failure, into *Task) {
	var sealed, answer []byte
	var stored *Result
	if res != nil {
		sealed, answer = res.sealedOutput, res.sealedAnswer
		r := res.stored()
		stored = &r
	}
	// A trigger sets ended_unsucceeded from status, NULL for a success, so
	// that its finish, changing no indexed column, can be HOT (000114).
	const finishSQL = `
		UPDATE tasks SET status = $2, result = $3, error = $4, output_sealed = COALESCE($5, output_sealed),
		       answer_sealed = COALESCE($6, answer_sealed), finished_at = now(), updated_at = now()
		WHERE id = $1`
	if into == nil {
		b.Queue(finishSQL, id, string(status), stored, f, sealed, answer)
		return
	}
	b.Queue(finishSQL+` RETURNING `+answerColumns, id, string(status), stored, f, sealed, answer).Query(func(rows pgx.Rows) (err error) {
		*into, err = pgx.CollectExactlyOneRow(rows, scanTask)
		return err
	})
}

// outcome is a task's end, recorded on metrics once its transaction has
// committed.
type outcome struct {
	taskID  string
	task    *Task // the finished task as stored, read back for this process's waiters; nil if none waited
	status  Status
	code    string
	created time.Time
	alerts  []budget.Alert
	// implausible: the provider key of a usage report beyond any sane
	// bound, counted once committed; "" for none.
	implausible string
}

// observe records a committed end: waiters are told, metrics counted, and
// budget alerts the settlement crossed fired.
func (s *Service) observe(o *outcome) {
	if o != nil {
		if o.task != nil {
			s.reveal(o.task)
		}
		s.waiter.announce(o.taskID, o.task)
		s.cfg.Metrics.TaskFinished(string(o.status), o.code, s.cfg.Now().Sub(o.created))
		if o.implausible != "" {
			s.cfg.Metrics.ImplausibleUsage(o.implausible)
		}
		s.cfg.Alerter.Fire(o.alerts)
	}
}

// modelLabel keeps metric labels to configured model names; pass-through
// names chosen by clients become "other".
func (s *Service) modelLabel(name string) string {
	if _, priced, err := s.cfg.Catalog.Resolve(name); err == nil && priced {
		return name
	}
	return "other"
}
