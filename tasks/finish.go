package tasks

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tollgate/tollgate/budget"
	"github.com/tollgate/tollgate/catalog"
	"github.com/tollgate/tollgate/gate"
	"github.com/tollgate/tollgate/provider"
	"github.com/tollgate/tollgate/redact"
	"github.com/tollgate/tollgate/webhooks"
)

// finishUnsucceeded ends a task that produced no answer, failed or
// canceled: released, or settled as possibly charged after possiblyCharged
// calls that may have been billed.
func (s *outcomes) finishUnsucceeded(ctx context.Context, tx pgx.Tx, t Task, status Status, f *Failure, possiblyCharged int) (closedMoney, error) {
	m, err := s.closeMoney(ctx, tx, t, moneyAfter(possiblyCharged))
	if err != nil {
		return closedMoney{}, err
	}
	return m, finish(ctx, tx, t.ID, status, nil, f)
}

// closedMoney is how a task's reservation closed, for its outcome once
// committed: the budget alerts its settlement crossed and, when it was
// settled, what it spent (nil when released).
type closedMoney struct {
	alerts []budget.Alert
	spent  *spend
}

// spend is one settlement's cost, counted on metrics after commit.
type spend struct {
	owner, model string
	micros       int64
}

// spendOf is what a settlement of owner's task on model spent: its cost,
// the charge and the shortfall together, as its usage row records it.
func spendOf(owner, model string, s budget.Settled) *spend {
	return &spend{owner: owner, model: model, micros: budget.SaturatingAdd(s.ChargedMicros, s.ShortfallMicros)}
}

// closeMoney closes the reservation of a task that produced no answer as
// m says: released in full (moneyRelease), or settled as possibly charged
// (moneyPossiblyCharged) at the reservation, the worst case of one call.
// Any other m leaves it held.
func (s *outcomes) closeMoney(ctx context.Context, tx pgx.Tx, t Task, m money) (closedMoney, error) {
	switch m {
	case moneyRelease:
		if err := budget.ReleaseTx(ctx, tx, t.ID); err != nil && !errors.Is(err, budget.ErrNotFound) {
			return closedMoney{}, err
		}
	case moneyPossiblyCharged:
		// The figures of the reservation: the worst case of one call.
		in, out := int64(0), int64(0)
		if model, _, err := s.cfg.Catalog.Resolve(t.Model); err == nil {
			in, out = s.fitting.reservedTokens(model, t.Request)
		}
		settled, err := budget.SettleTx(ctx, tx, budget.Settlement{
			TaskID: t.ID, Workload: t.Workload, Model: t.Model, InputTokens: in,
			OutputTokens: out, Source: budget.SourcePossiblyCharged, CostMicros: t.ReservedMicros,
		}, s.cfg.AlertThresholds)
		if errors.Is(err, budget.ErrNotFound) {
			return closedMoney{}, nil // closed already: nothing settled now
		}
		if err != nil {
			return closedMoney{}, err
		}
		return closedMoney{alerts: settled.Alerts, spent: spendOf(t.OwnerID, t.Model, settled)}, nil
	}
	return closedMoney{}, nil
}

// finish ends the task in one statement; a succeeded result's sealed output
// is stored with it. Its outcome, observed after commit, announces it to
// waiting pollers.
func finish(ctx context.Context, tx pgx.Tx, id string, status Status, res *Result, f *Failure) error {
	b := &pgx.Batch{}
	queueFinish(b, id, status, res, f, nil)
	return tx.SendBatch(ctx, b).Close()
}

// queueFinish queues finish's statements: the task's end and, when its
// owner's webhook asks for it, the event announcing it with its delivery
// job (webhooks.QueueEvent), so that both commit with the end. With into
// set, the statement returns the finished task, read into it as Get would
// read it: this process's waiters then need not read it again.
func queueFinish(b *pgx.Batch, id string, status Status, res *Result, f *Failure, into *Task) {
	var sealed, answer []byte
	var stored *Result
	if res != nil {
		sealed, answer = res.sealedOutput, res.sealedAnswer
		r := res.stored()
		stored = &r
	}
	// A trigger sets ended_unsucceeded from status, NULL for a success, so
	// that its finish, changing no indexed column, can be HOT (the baseline migration).
	const finishSQL = `
		UPDATE tasks SET status = $2, result = $3, error = $4, output_sealed = COALESCE($5, output_sealed),
		       answer_sealed = COALESCE($6, answer_sealed), finished_at = now(), updated_at = now()
		WHERE id = $1`
	defer webhooks.QueueEvent(b, id, string(status))
	if into == nil {
		b.Queue(finishSQL, id, string(status), stored, f, sealed, answer)
		return
	}
	b.Queue(finishSQL+` RETURNING `+clientViewColumns, id, string(status), stored, f, sealed, answer).Query(func(rows pgx.Rows) (err error) {
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
	money   closedMoney
	// implausible: the provider key of a usage report the request rules
	// out or beyond any sane bound (usageBound), counted once committed;
	// "" for none.
	implausible string
}

// observe records a committed end: waiters are told, metrics counted, and
// budget alerts the settlement crossed fired.
func (s *outcomes) observe(o *outcome) {
	if o != nil {
		if o.task != nil {
			s.guard.reveal(o.task)
		}
		s.waiter.announce(o.taskID, o.task)
		s.cfg.Metrics.TaskFinished(string(o.status), o.code, s.cfg.Now().Sub(o.created))
		if o.implausible != "" {
			s.cfg.Metrics.ImplausibleUsage(o.implausible)
		}
		s.countSpend(o.money.spent)
		s.cfg.Alerter.Fire(o.money.alerts)
	}
}

// countSpend counts a committed settlement's cost on metrics, by owner and
// model label; nothing for a released reservation (nil).
func (s *outcomes) countSpend(sp *spend) {
	if sp != nil {
		s.cfg.Metrics.Spent(sp.owner, s.modelLabel(sp.model), sp.micros)
	}
}

// modelLabel keeps metric labels to configured model names; pass-through
// names chosen by clients become "other".
func (s *outcomes) modelLabel(name string) string {
	if _, priced, err := s.cfg.Catalog.Resolve(name); err == nil && priced {
		return name
	}
	return "other"
}

// successResult is what recording a succeeded call yields once its batch's
// results are read.
type successResult struct {
	task      Task
	finished  *Task // read back by the finishing statement when a request of this process waits for the task
	status    Status
	wasClosed bool
	settled   budget.Settled
	model     string // the model the settlement charges
	// implausible: the provider key whose usage report the request rules
	// out (usageBound), charged capped at the reservation; "" when
	// plausible.
	implausible string
}

// queueSuccess queues the whole record of c, a succeeded call, on an
// unfinished task whose row and journal st was read under lock: journal,
// replay record, gate, the task's end and, last, the settlement, which
// locks the owner's budget row. Sent with COMMIT (pipetx), the row is held
// only while PostgreSQL runs it and commits. A River run's job is completed
// by River once Work returns (its completions are batched across jobs); a
// job that runs again after a crash finds its task finished and makes no
// call.
//
// The settlement is added to settle, for the caller to queue after the
// records: a caller that records many successes sends their records first
// and only their settlements (one statement) with COMMIT, under the
// owner's queue.
func (s *recording) queueSuccess(batch *pgx.Batch, settle *budget.Settlements, st attemptState, c *finishedCall) error {
	t := st.task
	t.Request = c.b.raw
	if err := s.queueAttemptRecords(batch, t, c); err != nil {
		return err
	}
	gate.QueueClose(batch, c.b.model.Provider, &c.res.wasClosed)
	d := decideSuccess(lockedTask{cancelRequested: t.CancelRequested, ambiguous: st.jc.ambiguous})
	return s.applier.queueSuccessEnd(batch, settle, t, c, d)
}

// logged logs a committed success and returns the task's outcome.
func (res *successResult) logged(log *slog.Logger) *outcome {
	t := res.task
	if !res.wasClosed {
		log.Warn("provider key gate closed: calls flow again")
	}
	if res.implausible != "" {
		log.Warn("ALERT provider reported implausible usage: charge capped at the reservation, shortfall recorded, attempt flagged",
			slog.Int64("charged_micros", res.settled.ChargedMicros), slog.Int64("shortfall_micros", res.settled.ShortfallMicros))
	}
	log.Info("task finished", slog.String("final_status", string(res.status)))
	sp := spendOf(t.OwnerID, res.model, res.settled)
	if res.finished != nil {
		// Read back by the finishing statement, which ran before the
		// settlement: its cost is the settlement's.
		res.finished.CostMicros = &sp.micros
	}
	return &outcome{taskID: t.ID, task: res.finished, status: res.status, created: t.CreatedAt,
		money: closedMoney{alerts: res.settled.Alerts, spent: sp}, implausible: res.implausible}
}

// queueSuccessEnd queues the end of task t with c's answer, as d (a
// stepSucceed) says, and adds its settlement at the actual cost to settle:
// the provider's reported usage, or an estimate labelled as such when it
// reported none. Each earlier ambiguous attempt may have been charged by
// the provider too; the documented rule is to add its worst case (the
// task's reservation) and label the whole settlement possibly_charged, so
// finance sees an upper bound rather than a silent undercount. c.res is
// filled in when the batch's results are read: the settlement and, when a
// request of this process waits for the task, the task as its finish
// stored it.
func (s *applier) queueSuccessEnd(batch *pgx.Batch, settle *budget.Settlements, t Task, c *finishedCall, d decision) error {
	res, m, resp := &c.res, c.b.model, c.resp
	res.task, res.status, res.implausible, res.finished, res.model = t, d.status, "", nil, m.Name
	implausible := !s.fitting.usageBoundOf(c.b).admits(resp.Usage)
	if implausible {
		queueImplausibleUsage(batch, c.b, resp.Usage)
		res.implausible = m.Provider
	}
	if s.waiter.waiting(t.ID) {
		res.finished = &Task{}
	}
	u, cost := s.usageOf(t, m, resp)
	var possible int64 // the ambiguous attempts' worst case
	if d.possiblyCharged > 0 {
		u.Source = budget.SourcePossiblyCharged
		possible = budget.SaturatingMul(int64(d.possiblyCharged), t.ReservedMicros)
		cost = budget.SaturatingAdd(cost, possible)
	}
	var charge *int64 // the most charged; nil: up to the headroom
	if implausible {
		c := budget.SaturatingAdd(t.ReservedMicros, possible)
		charge = &c
	}
	if d.status == StatusCanceled {
		queueFinish(batch, t.ID, StatusCanceled, nil, nil, res.finished)
	} else {
		// The answer is stored sealed, for the owner to poll; the result
		// row itself holds no text.
		out := resultOf(resp, m.Name, u, cost)
		// The provider's names are stored and shown as plain
		// identifiers only; other text follows the owner's policy.
		s.guard.privacyFor(redact.Policy(t.policy)).identifiers(&out)
		out.seal(s.cfg.Sealer, t.ID)
		queueFinish(batch, t.ID, StatusSucceeded, &out, nil, res.finished)
	}
	// Settlement last: it locks the owner's budget row, which every task of
	// the owner needs.
	return settle.Add(budget.Settlement{
		TaskID: t.ID, Workload: t.Workload, Model: m.Name, InputTokens: u.InputTokens, OutputTokens: u.OutputTokens,
		CachedInputTokens: u.CachedInputTokens, CacheWriteTokens: u.CacheWriteTokens, ReasoningTokens: u.ReasoningTokens,
		Source: u.Source, CostMicros: cost, ChargeCapMicros: charge,
	}, &res.settled)
}

// usageOf is what resp's call used and cost on m: the provider's report
// by class, or an estimate labelled as such when it reported none (t's
// request is the one the provider saw). A report beyond any sane bound is
// recorded at the bound (budget.MaxUsageTokens; the journal keeps the
// figures as reported), and classes beyond their totals, a provider's
// error too, as the whole total, never as more tokens than it
// (budget.Tokens.Normalized).
func (s *applier) usageOf(t Task, m catalog.Model, resp *provider.Response) (Usage, int64) {
	u := Usage{Source: budget.SourceReported}
	if r := resp.Usage; r != nil {
		tok := budget.Tokens{Input: min(r.InputTokens, budget.MaxUsageTokens), Output: min(r.OutputTokens, budget.MaxUsageTokens),
			CachedInput: r.CachedInputTokens, CacheWrite: r.CacheWriteTokens, Reasoning: r.ReasoningTokens}
		u.setTokens(tok.Normalized())
	} else {
		u.Source = budget.SourceEstimated
		u.InputTokens, u.OutputTokens = s.fitting.inputTokensOf(m, t.Request), estimateOutput(resp)
	}
	return u, m.Price().CostOf(u.tokens())
}

// tokens returns u's figures by class.
func (u Usage) tokens() budget.Tokens {
	return budget.Tokens{Input: u.InputTokens, Output: u.OutputTokens, CachedInput: u.CachedInputTokens,
		CacheWrite: u.CacheWriteTokens, Reasoning: u.ReasoningTokens}
}

// setTokens sets u's figures from t.
func (u *Usage) setTokens(t budget.Tokens) {
	u.InputTokens, u.OutputTokens, u.CachedInputTokens, u.CacheWriteTokens, u.ReasoningTokens =
		t.Input, t.Output, t.CachedInput, t.CacheWrite, t.Reasoning
}
