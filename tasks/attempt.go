package tasks

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"github.com/tollgate/tollgate/catalog"
	"github.com/tollgate/tollgate/gate"
	"github.com/tollgate/tollgate/replay"
)

// begunAttempt is an attempt a run may make: the task, the model and
// provider key it calls, and its number in the journal, where its entry
// was committed "sent" before the call; or a kept answer recorded instead
// of a call, under the number of the entry its call left "sent".
type begunAttempt struct {
	task    Task
	attempt int
	startAt time.Time
	probe   bool // this call is the open breaker's probe
	model   catalog.Model
	prov    catalog.Provider
	raw     Request // the unsealed request, in memory only
	stream  *replay.StreamInfo
	// keptKey is the attempt number of the answer's kept copy, 0 when
	// none may exist: recording the attempt deletes the copy.
	keptKey int
	// fromKept is set when the attempt records an earlier run's kept
	// answer instead of calling.
	fromKept *keptCall
}

// providerKey is the Idempotency-Key the provider sees for this attempt.
func (b *begunAttempt) providerKey() string { return fmt.Sprintf("%s:%d", b.task.ID, b.attempt) }

// attemptState is what decides whether a run may call the provider: the
// task, its journal and its deadline.
type attemptState struct {
	task Task
	left time.Duration // until the task's deadline
	last int           // the highest attempt number journalled
	jc   journalCounts
}

// attemptStateSQL reads a task with its journal in one query; $1 is the
// task id. The task comes without its stored request (an empty one in its
// place): every reader works on the unsealed request instead, and decoding
// the stored one's JSON would take 7.5 % of the server's CPU at 300 tasks/s.
// Nor its cost: an unfinished task has no settlement to read.
var attemptStateSQL = `
	SELECT ` + strings.NewReplacer(" request,", " '{}'::jsonb AS request,", costColumn, "NULL::bigint").Replace(taskColumns) + `, GREATEST(tasks.deadline_at - now(), interval '0'),
	       j.last, j.counted, j.ambiguous
	FROM tasks, LATERAL (
		SELECT COALESCE(max(a.attempt), 0) AS last,
		       count(*) FILTER (WHERE ` + countsAgainstLimit + ` AND a.model = tasks.model) AS counted,
		       count(*) FILTER (WHERE a.state = 'ambiguous') AS ambiguous
		FROM task_attempts a WHERE a.task_id = tasks.id) j
	WHERE tasks.id = $1`

// lockAttemptState is readAttemptState with the task's row locked for the
// transaction, as lockTask locks it.
func lockAttemptState(ctx context.Context, tx pgx.Tx, id string) (attemptState, error) {
	return queryAttemptState(ctx, tx, attemptStateSQL+lockAttemptSQL, id)
}

// lockAttemptSQL turns attemptStateSQL into the read that locks the task
// for the transaction.
const lockAttemptSQL = ` FOR NO KEY UPDATE OF tasks`

func readAttemptState(ctx context.Context, q querier, id string) (attemptState, error) {
	return queryAttemptState(ctx, q, attemptStateSQL, id)
}

func queryAttemptState(ctx context.Context, q querier, sql, id string) (attemptState, error) {
	rows, err := q.Query(ctx, sql, id)
	if err != nil {
		return attemptState{}, err
	}
	return collectAttemptState(rows)
}

// collectAttemptState reads attemptStateSQL's row; ErrNotFound for none.
func collectAttemptState(rows pgx.Rows) (attemptState, error) {
	st, err := pgx.CollectExactlyOneRow(rows, func(r pgx.CollectableRow) (attemptState, error) {
		var st attemptState
		t, err := scanTaskInto(r, &st.left, &st.last, &st.jc.counted, &st.jc.ambiguous)
		st.task = t
		return st, err
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return attemptState{}, ErrNotFound
	}
	return st, err
}

// beginAttempt decides, in a transaction with the task locked, whether
// run r may call the provider now: it records interrupted calls, fails,
// cancels, snoozes or completes what must not call, claims the breaker's
// probe, and commits the attempt's journal entry as "sent" before the
// call. It returns the begun attempt, or nil and what the job should do
// instead (nil when the task is finished, or a snooze).
func (s *runner) beginAttempt(ctx context.Context, r *run) (begun *begunAttempt, after error, err error) {
	var got beginning
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) (err error) {
		got, err = s.beginLocked(ctx, tx, r)
		return err
	})
	if err != nil {
		return nil, nil, fmt.Errorf("tasks: begin attempt: %w", err)
	}
	s.outcomes.observe(got.final)
	return got.attempt, got.after, nil
}

// beginning is what beginAttempt's transaction came to.
type beginning struct {
	attempt *begunAttempt // the attempt to make; nil for none
	after   error         // what the job does instead of calling: nil (finished) or a snooze
	final   *outcome      // the task's end, when it ended here
}

// beginLocked is beginAttempt's transaction, tx.
func (s *runner) beginLocked(ctx context.Context, tx pgx.Tx, r *run) (beginning, error) {
	t, err := lockTask(ctx, tx, r.taskID)
	if errors.Is(err, ErrNotFound) {
		// Nothing to run; complete the job so it does not linger.
		return beginning{}, r.complete(ctx, tx)
	}
	if err != nil {
		return beginning{}, err
	}
	if t.Status.Final() {
		// Nothing to run either; a kept answer a recording that did
		// commit left behind goes.
		if _, err := tx.Exec(ctx, forgetKeptSQL, t.ID, nil); err != nil {
			return beginning{}, err
		}
		return beginning{}, r.complete(ctx, tx)
	}
	b, err := s.attemptOn(t)
	if err != nil {
		return s.applyStart(ctx, tx, r, t, internalFailure(0), 0)
	}
	kept, err := s.recording.readKept(ctx, tx, t.ID)
	if err != nil {
		return beginning{}, err
	}
	if err := s.recording.markInterrupted(ctx, tx, b, r.traceID, kept); err != nil {
		return beginning{}, err
	}
	if len(kept) > 0 {
		// An earlier run's answer is kept: it is recorded, whatever the
		// deadline, the attempt counts or the gate say, and nothing is
		// called.
		begun, err := s.recording.keptAttempt(t, kept[0], b.raw)
		if err != nil {
			// Its model is gone from the catalog: the call was made all
			// the same, and is settled as possibly charged.
			return s.applyStart(ctx, tx, r, b.task, internalFailure(len(kept)), 0)
		}
		return beginning{attempt: begun}, nil
	}
	return s.beginCall(ctx, tx, r, b)
}

// attemptOn is the attempt of t on the model it runs on, its request
// unsealed, before it is numbered. It fails when the model is gone from
// the catalog or the request cannot be opened.
func (s *runner) attemptOn(t Task) (*begunAttempt, error) {
	m, prov, err := s.cfg.modelOf(t)
	if err != nil {
		return nil, err
	}
	raw, err := s.guard.rawRequest(t)
	if err != nil {
		s.cfg.Logger.Error("task's sealed request cannot be opened (erased, or wrong TOLLGATE_DATA_KEY)", slog.String("task_id", t.ID))
		return nil, err
	}
	t.Request = raw
	return &begunAttempt{task: t, model: m, prov: prov, raw: raw}, nil
}

// beginCall decides, with b's task locked and its interrupted calls
// recorded, whether b calls now (decideStart, then the gate, then
// decideAdmitted), and if so numbers it and journals it "sent".
func (s *runner) beginCall(ctx context.Context, tx pgx.Tx, r *run, b *begunAttempt) (beginning, error) {
	t := b.task
	st, err := readAttemptState(ctx, tx, t.ID)
	if err != nil {
		return beginning{}, err
	}
	jc, err := countJournal(ctx, tx, t.ID, b.model.Name)
	if err != nil {
		return beginning{}, err
	}
	facts := startFacts{run: r.kind(), cancelRequested: t.CancelRequested, left: st.left,
		counted: jc.counted, ambiguous: jc.ambiguous, maxAttempts: s.cfg.maxAttemptsOf(t),
		runsLeft: r.inline || r.attempt < r.maxAttempts, lastClass: jc.lastClass, lastCode: jc.lastCode}
	if d := decideStart(facts, s.cfg.AmbiguousRetries); d.next != stepCall {
		return s.applyStart(ctx, tx, r, t, d, st.left)
	}
	pass, err := gate.AdmitTx(ctx, tx, b.model.Provider, s.cfg.ProbeEvery)
	if err != nil {
		return beginning{}, err
	}
	if d := decideAdmitted(facts, pass); d.next != stepCall {
		return s.applyStart(ctx, tx, r, t, d, st.left)
	}
	b.attempt, b.startAt, b.probe = st.last+1, s.cfg.Now(), pass.Probe
	return beginning{attempt: b}, s.journalSent(ctx, tx, b)
}

// journalSent writes b's journal entry as "sent", committed before its
// call, and stores its task running: a call may be in flight until the
// outcome's recording updates the entry, and a later run that finds it
// still "sent" counts the call as possibly made (markInterrupted).
func (s *runner) journalSent(ctx context.Context, tx pgx.Tx, b *begunAttempt) error {
	t, n, m := b.task, b.attempt, b.model
	err := tx.QueryRow(ctx, `
		INSERT INTO task_attempts (task_id, attempt, provider_key, model, idempotency_key)
		VALUES ($1, $2, $3, $4, $5) RETURNING started_at`,
		t.ID, n, m.Provider, m.Name, b.providerKey()).Scan(&b.startAt)
	if err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, `UPDATE tasks SET status = 'running', attempts = $2, updated_at = now() WHERE id = $1`, t.ID, n); err != nil {
		return err
	}
	b.task.Attempts = n
	return nil
}

// applyStart carries out d, a decision not to call, for run r of task t
// in tx: the task is canceled or failed and the run's job ends, or the
// task waits for its key's gate, the job snoozing for d.wait (at most
// left, the time to the task's deadline).
func (s *runner) applyStart(ctx context.Context, tx pgx.Tx, r *run, t Task, d decision, left time.Duration) (beginning, error) {
	switch d.next {
	case stepCancel:
		money, err := s.outcomes.closeMoney(ctx, tx, t, d.money)
		if err == nil {
			err = finish(ctx, tx, t.ID, StatusCanceled, nil, nil)
		}
		if err != nil {
			return beginning{}, err
		}
		return beginning{final: &outcome{taskID: t.ID, status: StatusCanceled, created: t.CreatedAt, money: money}}, r.complete(ctx, tx)
	case stepFail:
		money, err := s.endJob(ctx, tx, r, t, d)
		return beginning{final: &outcome{taskID: t.ID, status: StatusFailed, code: d.failure.Code, created: t.CreatedAt, money: money}}, err
	case stepWait:
		// The key is paused or its breaker is open: the task stays
		// queued, its error saying why it waits, and no attempt is used.
		return beginning{after: river.JobSnooze(s.cfg.snooze(d.wait, left))}, requeue(ctx, tx, t.ID, d.failure)
	}
	return beginning{}, fmt.Errorf("tasks: no such step %d before a call", d.next)
}

// snooze bounds a wait: never past the task's deadline (so the deadline is
// enforced on time), never longer than MaxSnooze (so a job notices a closed
// gate reasonably soon), never zero.
func (c *Config) snooze(wait, left time.Duration) time.Duration {
	return max(min(wait, left, c.MaxSnooze), 10*time.Millisecond)
}

// endJob fails the task as d says and completes its job in the caller's
// transaction.
func (s *runner) endJob(ctx context.Context, tx pgx.Tx, r *run, t Task, d decision) (closedMoney, error) {
	money, err := s.outcomes.closeMoney(ctx, tx, t, d.money)
	if err != nil {
		return closedMoney{}, err
	}
	if err := finish(ctx, tx, t.ID, StatusFailed, nil, d.failure); err != nil {
		return closedMoney{}, err
	}
	f := d.failure
	s.cfg.Logger.LogAttrs(ctx, slog.LevelInfo, "task finished",
		slog.String("task_id", t.ID), slog.String("owner_id", t.OwnerID), slog.String("final_status", string(StatusFailed)),
		slog.String("code", f.Code), slog.String("class", f.Class), slog.Int("attempt", t.Attempts),
		slog.String("trace_id", r.traceID))
	return money, r.complete(ctx, tx)
}

// modelOf resolves the model the task currently runs on.
func (c *Config) modelOf(t Task) (catalog.Model, catalog.Provider, error) {
	m, _, err := c.Catalog.Resolve(t.Model)
	if err != nil {
		return catalog.Model{}, catalog.Provider{}, err
	}
	prov, ok := c.Catalog.Provider(m.Provider)
	if !ok {
		return catalog.Model{}, catalog.Provider{}, fmt.Errorf("tasks: model %q names unknown provider key %q", m.Name, m.Provider)
	}
	return m, prov, nil
}

// maxAttemptsOf is the task's own attempt bound (a route's retry bound),
// else the service's.
func (c *Config) maxAttemptsOf(t Task) int {
	if t.maxAttempts != nil && *t.maxAttempts > 0 {
		return *t.maxAttempts
	}
	return c.MaxAttempts
}

// lockTask reads the task and locks its row for the transaction, so two runs
// of the same job serialise on it.
func lockTask(ctx context.Context, tx pgx.Tx, id string) (Task, error) {
	// NO KEY UPDATE: it excludes other runs and cancels (which take the
	// same lock) but not the KEY SHARE locks of foreign keys to the task.
	rows, err := tx.Query(ctx, `SELECT `+taskColumns+` FROM tasks WHERE id = $1 FOR NO KEY UPDATE`, id)
	if err != nil {
		return Task{}, err
	}
	t, err := pgx.CollectExactlyOneRow(rows, scanTask)
	if errors.Is(err, pgx.ErrNoRows) {
		return Task{}, ErrNotFound
	}
	return t, err
}
