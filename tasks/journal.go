package tasks

import (
	"context"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tollgate/tollgate/provider"
	"github.com/tollgate/tollgate/replay"
)

// journalCounts summarises a task's attempts. Throttled and exhausted
// attempts do not count against the attempt limit: the request was not at
// fault, the provider key was. The limit counts per model, so a fallback
// model gets its own attempts; ambiguous attempts count over the whole task,
// since each may have been charged.
type journalCounts struct {
	counted   int
	ambiguous int
	sent      int // entries still "sent": calls whose run ended without recording them
	lastClass provider.Class
	lastCode  string
}

// possiblyCharged is how many calls of the journal the provider may have
// run and billed without an answer recorded: ambiguous ones, and ones
// still "sent" (their run ended mid-call). A task that ends with any is
// settled as possibly charged, never released as if nothing was spent.
func (c journalCounts) possiblyCharged() int { return c.ambiguous + c.sent }

// countsAgainstLimit is the journal's test (on task_attempts a) of an
// attempt that counts against the attempt limit, on its model: it ended,
// and not on the key's account (throttled or exhausted).
const countsAgainstLimit = `a.state <> 'sent' AND COALESCE(a.class, '') NOT IN ('throttled', 'exhausted')`

// countJournal counts the journal of task taskID, the attempts on model
// for the attempt limit.
func countJournal(ctx context.Context, tx pgx.Tx, taskID, model string) (journalCounts, error) {
	var c journalCounts
	var class, code *string
	err := tx.QueryRow(ctx, `
		SELECT count(*) FILTER (WHERE `+countsAgainstLimit+` AND a.model = $2),
		       count(*) FILTER (WHERE a.state = 'ambiguous'),
		       count(*) FILTER (WHERE a.state = 'sent'),
		       (SELECT class FROM task_attempts WHERE task_id = $1 AND class IS NOT NULL ORDER BY attempt DESC LIMIT 1),
		       (SELECT error_code FROM task_attempts WHERE task_id = $1 AND class IS NOT NULL ORDER BY attempt DESC LIMIT 1)
		FROM task_attempts a WHERE a.task_id = $1`, taskID, model).Scan(&c.counted, &c.ambiguous, &c.sent, &class, &code)
	if class != nil {
		c.lastClass = provider.Class(*class)
	}
	if code != nil {
		c.lastCode = *code
	}
	return c, err
}

// markInterrupted records as ambiguous, each with its replay record, the
// attempts whose journal entries are still "sent": their runs died, were
// canceled or failed to record mid-call, and may have reached the
// provider. Those whose answers are kept are not interrupted: their
// answers are recorded. on names the task and the model its interrupted
// calls were made on; their replay records carry traceID.
func (s *recording) markInterrupted(ctx context.Context, tx pgx.Tx, on *begunAttempt, traceID string, kept []keptAnswer) error {
	t, m, prov := on.task, on.model, on.prov
	rows, err := tx.Query(ctx, `
		UPDATE task_attempts SET state = 'ambiguous', class = 'ambiguous', error_code = 'interrupted', finished_at = now()
		WHERE task_id = $1 AND state = 'sent' AND attempt <> ALL($2::integer[])
		RETURNING attempt, started_at, finished_at`, t.ID, keptAttempts(kept))
	if err != nil {
		return err
	}
	type interrupted struct {
		attempt  int
		start    time.Time
		finished time.Time
	}
	list, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (interrupted, error) {
		var i interrupted
		return i, r.Scan(&i.attempt, &i.start, &i.finished)
	})
	if err != nil {
		return err
	}
	for _, i := range list {
		s.cfg.Logger.LogAttrs(ctx, slog.LevelWarn, "attempt interrupted; counted as ambiguous",
			slog.String("task_id", t.ID), slog.Int("attempt", i.attempt), slog.String("class", "ambiguous"))
		rec := s.replayAttempt(t, m, prov, i.attempt, i.start, traceID)
		rec.State, rec.FinishedAt = "ambiguous", &i.finished
		rec.Error = &replay.Failure{Class: string(provider.ClassAmbiguous), Code: "interrupted"}
		if err := replay.InsertTx(ctx, tx, rec); err != nil {
			return err
		}
	}
	return nil
}

// queueJournal queues the statement recording an attempt's outcome: its
// entry, committed "sent" before the call (journalSent, or a run on
// arrival's admission), takes the outcome's state. An entry a later run
// has meanwhile found "sent" and marked interrupted is left as it is: the
// attempt's replay record, queued after it, then finds its key taken.
func queueJournal(batch *pgx.Batch, b *begunAttempt, state string, pe *provider.Error) {
	var class, code, param *string
	var status *int
	var retryAfter *time.Duration // NULL: the provider asked for no wait
	var window, tokens *int       // NULL: no context-length figure given
	if pe != nil {
		c, k, st := string(pe.Class), pe.Code, pe.Status
		class, code, status = &c, &k, &st
		if pe.Param != "" {
			param = &pe.Param
		}
		if pe.RetryAfter > 0 {
			retryAfter = &pe.RetryAfter
		}
		if pe.ContextWindow > 0 {
			window = &pe.ContextWindow
		}
		if pe.ContextTokens > 0 {
			tokens = &pe.ContextTokens
		}
	}
	batch.Queue(`
		UPDATE task_attempts SET state = $3, class = $4, error_code = $5, provider_status = $6, error_param = $7,
		       error_retry_at = now() + $8::interval, context_window = $9, context_tokens = $10, finished_at = now()
		WHERE task_id = $1 AND attempt = $2 AND state = 'sent'`, b.task.ID, b.attempt, state, class, code, status, param, retryAfter, window, tokens)
}

// queueImplausibleUsage flags b's journal entry, queued before it, as
// having reported usage its request rules out (usageBound), with the
// figures as reported.
func queueImplausibleUsage(batch *pgx.Batch, b *begunAttempt, u *provider.Usage) {
	batch.Queue(`
		UPDATE task_attempts SET usage_implausible = true, reported_input_tokens = $3, reported_output_tokens = $4
		WHERE task_id = $1 AND attempt = $2`, b.task.ID, b.attempt, u.InputTokens, u.OutputTokens)
}
