package tasks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/tollgate/tollgate/budget"
	"github.com/tollgate/tollgate/provider"
	"github.com/tollgate/tollgate/replay"
)

// A provider's answer is never lost to a failed recording. When the
// transaction that records a succeeded call fails (a constraint, an
// overflow, a lost connection), the run keeps the answer, sealed, in
// task_kept_answers by a write of its own before anything else, and every
// later run of the task (River's retry of the job, an inline run's safety
// net, a rescued job) records that answer instead of calling the provider
// again. Should even that write fail, what the run leaves behind (its
// journal entry committed "sent" before the call, or its entry in
// river_job.errors) makes later runs count the call as possibly charged
// (ambiguous), and the reaper settles such a task as possibly charged,
// never releases it uncharged.
//
// The success path is unchanged: nothing is written or read for a kept
// answer until a recording has failed (beginQuick sends a task with an
// unrecorded run to beginTx, which reads kept answers).

// keptAnswer is a provider's answer whose recording failed, as kept.
type keptAnswer struct {
	attempt      int    // the number the run called with
	riverAttempt *int32 // the River run that called; nil for an inline run
	sent         bool   // journalled "sent" before the call
	model        string
	startedAt    time.Time
	latency      time.Duration
	body         keptBody
}

// keptBody is the part of a kept answer that is sealed: the whole answer,
// so that recording it later makes the same result, tool calls, refusal
// and every choice included.
type keptBody struct {
	Content      string             `json:"content"`
	Model        string             `json:"model,omitempty"`
	FinishReason string             `json:"finish_reason,omitempty"`
	Usage        *keptUsage         `json:"usage,omitempty"`
	Status       int                `json:"status,omitempty"`
	Stream       *replay.StreamInfo `json:"stream,omitempty"`
	// Choices is every choice, when the answer is more than its first
	// choice's text (richAnswer); Content is then the first one's text.
	Choices           []Choice `json:"choices,omitempty"`
	SystemFingerprint string   `json:"system_fingerprint,omitempty"`
}

type keptUsage struct {
	InputTokens       int64 `json:"input_tokens"`
	OutputTokens      int64 `json:"output_tokens"`
	CachedInputTokens int64 `json:"cached_input_tokens,omitempty"`
	CacheWriteTokens  int64 `json:"cache_write_tokens,omitempty"`
	ReasoningTokens   int64 `json:"reasoning_tokens,omitempty"`
}

func keptBodyOf(resp *provider.Response, stream *replay.StreamInfo) keptBody {
	b := keptBody{Content: resp.Text(), Model: resp.Model, FinishReason: resp.FinishReason(), Status: resp.Status, Stream: stream,
		SystemFingerprint: resp.SystemFingerprint}
	if choices := choicesOf(resp); richAnswer(choices) || len(choices) == 1 && choices[0].Index != 0 {
		b.Choices = choices
	}
	if u := resp.Usage; u != nil {
		b.Usage = &keptUsage{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens, CachedInputTokens: u.CachedInputTokens,
			CacheWriteTokens: u.CacheWriteTokens, ReasoningTokens: u.ReasoningTokens}
	}
	return b
}

// response is the provider's answer as the run received it.
func (b keptBody) response() *provider.Response {
	r := provider.TextResponse(b.Content, b.FinishReason)
	if b.Choices != nil {
		r.Choices = make([]provider.Choice, len(b.Choices))
		for i, c := range b.Choices {
			r.Choices[i] = provider.Choice{Index: c.Index, Message: c.Message, FinishReason: c.FinishReason, Logprobs: c.Logprobs,
				StopReason: c.StopReason, StopSequence: c.StopSequence}
		}
	}
	r.Model, r.Status, r.SystemFingerprint = b.Model, b.Status, b.SystemFingerprint
	if u := b.Usage; u != nil {
		r.Usage = &provider.Usage{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens, CachedInputTokens: u.CachedInputTokens,
			CacheWriteTokens: u.CacheWriteTokens, ReasoningTokens: u.ReasoningTokens}
	}
	return r
}

// keepSQL writes a kept answer. A retried write of the same answer (its
// first commit's acknowledgement lost) changes nothing.
const keepSQL = `
	INSERT INTO task_kept_answers (task_id, attempt, river_attempt, sent, model, started_at, latency, answer_sealed)
	VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
	ON CONFLICT (task_id, attempt) DO NOTHING`

// keepTries bounds the tries of the keeping write; keepWait is the first
// wait between two, doubled after each.
const (
	keepTries = 4
	keepWait  = 50 * time.Millisecond
)

// keepAnswer keeps c's answer, sealed and bound to the task, in one
// statement of its own, tried again with bounded backoff while ctx lasts.
// It returns the last error when every try failed.
func (s *Service) keepAnswer(ctx context.Context, c *finishedCall) error {
	r, b := c.r, c.b
	plain, err := json.Marshal(keptBodyOf(c.resp, b.stream))
	if err != nil {
		return err
	}
	sealed := s.cfg.Sealer.Seal(plain, []byte(b.task.ID))
	var riverAttempt *int32
	if !r.inline {
		n := int32(r.attempt)
		riverAttempt = &n
	}
	wait := keepWait
	for try := 1; ; try++ {
		_, err = s.pool.Exec(ctx, keepSQL, b.task.ID, b.attempt, riverAttempt, b.sent, b.model.Name, b.startAt, c.latency, sealed)
		if err == nil || try == keepTries {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(wait):
		}
		wait *= 2
	}
}

// readKept reads the task's kept answers, oldest call first, opening each;
// one that cannot be opened (wrong data key, erased) is skipped and logged.
func (s *Service) readKept(ctx context.Context, tx pgx.Tx, taskID string) ([]keptAnswer, error) {
	rows, err := tx.Query(ctx, `
		SELECT attempt, river_attempt, sent, model, started_at, latency, answer_sealed
		FROM task_kept_answers WHERE task_id = $1 ORDER BY attempt`, taskID)
	if err != nil {
		return nil, err
	}
	type row struct {
		k      keptAnswer
		sealed []byte
	}
	list, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (row, error) {
		var x row
		return x, r.Scan(&x.k.attempt, &x.k.riverAttempt, &x.k.sent, &x.k.model, &x.k.startedAt, &x.k.latency, &x.sealed)
	})
	if err != nil {
		return nil, err
	}
	var out []keptAnswer
	for _, x := range list {
		plain, err := s.cfg.Sealer.Open(x.sealed, []byte(taskID))
		if err == nil {
			err = json.Unmarshal(plain, &x.k.body)
		}
		if err != nil {
			s.cfg.Logger.Error("kept answer cannot be opened (wrong TOLLGATE_DATA_KEY?); its call counts as possibly charged",
				slog.String("task_id", taskID), slog.Int("attempt", x.k.attempt))
			continue
		}
		out = append(out, x.k)
	}
	return out, nil
}

// forgetKeptSQL deletes a task's kept answers ($1), all of them or, with
// $2 set, the one of that attempt: its answer is recorded, or its task
// finished.
const forgetKeptSQL = `DELETE FROM task_kept_answers WHERE task_id = $1 AND ($2::integer IS NULL OR attempt = $2)`

// keptRiverRuns are the River runs whose calls' answers are kept: their
// entries in river_job.errors are those answers, not interrupted calls.
func keptRiverRuns(kept []keptAnswer) []int32 {
	var out []int32
	for _, k := range kept {
		if k.riverAttempt != nil {
			out = append(out, *k.riverAttempt)
		}
	}
	return out
}

// keptSentAttempts are the journal entries left "sent" whose answers are
// kept: not interrupted calls either.
func keptSentAttempts(kept []keptAnswer) []int32 {
	out := []int32{} // never nil: NULL would make "<> ALL" match nothing
	for _, k := range kept {
		if k.sent {
			out = append(out, int32(k.attempt))
		}
	}
	return out
}

// keptAttempt is the attempt that records k on task t, whose unsealed
// request is raw, without a call.
func (s *Service) keptAttempt(t Task, k keptAnswer, raw Request) (*begunAttempt, error) {
	t.Request = raw
	if k.model != "" && k.model != t.Model {
		t.Model = k.model // the model that answered
	}
	m, prov, err := s.modelOf(t)
	if err != nil {
		return nil, err
	}
	b := &begunAttempt{task: t, attempt: k.attempt, startAt: k.startedAt, model: m, prov: prov, raw: raw,
		stream: k.body.Stream, sent: k.sent, keptKey: k.attempt, riverRun: k.riverAttempt}
	resp := k.body.response()
	b.fromKept = &keptCall{resp: resp, latency: k.latency}
	return b, nil
}

// keptCall is a call whose answer a run records from its kept copy.
type keptCall struct {
	resp    *provider.Response
	latency time.Duration
}

// recordKept records a kept answer in place of a call. Its errors are
// noCallErrors: this run called no one, and River's entry of its failure
// must not be taken for a call.
func (s *Service) recordKept(ctx context.Context, r *run, b *begunAttempt) error {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	s.cfg.Logger.LogAttrs(ctx, slog.LevelWarn, "recording a kept answer instead of calling again",
		slog.String("task_id", b.task.ID), slog.Int("attempt", b.attempt), slog.String("trace_id", r.traceID))
	if err := s.recordRun(rctx, s.newFinishedCall(r, b, b.fromKept.resp, nil, b.fromKept.latency)); err != nil {
		return &noCallError{err}
	}
	return nil
}

// recordStep is what a run does after trying to record its outcome.
type recordStep struct {
	done   bool // return the error as it is (nil: recorded)
	keep   bool // keep the answer first (keepAnswer)
	again  bool // try recording again, after a wait
	forget bool // the attempt was recorded before: drop its kept copy
}

// recordCase is what decides a recordStep besides the error.
type recordCase struct {
	answer bool // a succeeded call's answer is in hand
	kept   bool // it has been kept already, or was read from its kept copy
	inline bool // no River run behind it to retry
}

// afterRecord decides what follows a try at recording an outcome. A
// recorded outcome, or a decision to retry or snooze the job, is done. A
// replay record's key already taken means an earlier try committed without
// its acknowledgement reaching us: done too. Any other failure first keeps
// a succeeded call's answer, then an inline run tries again while its
// context lasts; a River run hands the retry to River (bounded backoff,
// NextRetry), whose next run finds the answer kept.
func afterRecord(err error, c recordCase) recordStep {
	var retry *retryError
	var snooze *river.JobSnoozeError
	var pe *pgconn.PgError
	switch {
	case err == nil, errors.As(err, &retry), errors.As(err, &snooze):
		return recordStep{done: true}
	case errors.As(err, &pe) && pe.Code == pgerrcode.UniqueViolation:
		return recordStep{done: true, forget: c.kept}
	}
	return recordStep{keep: c.answer && !c.kept, again: c.inline}
}

// callEvidence is what may show that calls of an unfinished task reached
// the provider without their outcome being recorded.
type callEvidence struct {
	ambiguous   int                      // journal entries counted ambiguous
	sent        int                      // journal entries still "sent"
	kept        int                      // kept answers
	riverErrors []rivertype.AttemptError // the job's failed runs
	recorded    []int32                  // River runs named by recorded attempts
	keptRiver   []int32                  // River runs whose answers are kept
	jobRunning  bool                     // the job is running, or died without a rescue yet
	traceID     string                   // the job's, for the records of a reaped task
}

// possibleCalls counts the calls that may have been charged: ambiguous
// attempts, "sent" entries, kept answers, River runs that ended without
// recording (those whose answers are kept counted once), and a run in
// flight or dead. The reaper settles a task with any as possibly charged.
func possibleCalls(e callEvidence) int {
	n := e.ambiguous + e.sent + e.kept
	for _, u := range unrecordedRuns(e.riverErrors, e.recorded) {
		if !slices.Contains(e.keptRiver, int32(u.Attempt)) {
			n++
		}
	}
	if e.jobRunning {
		n++
	}
	return n
}

// readEvidence reads t's callEvidence under tx: the journal's and the
// kept answers' from our tables, the job's failed runs and state from
// River (JobGetTx).
func (s *Service) readEvidence(ctx context.Context, tx pgx.Tx, t Task, ambiguous int) (callEvidence, error) {
	e := callEvidence{ambiguous: ambiguous}
	err := tx.QueryRow(ctx, `
		SELECT (SELECT count(*) FROM task_attempts WHERE task_id = $1 AND state = 'sent'),
		       (SELECT count(*) FROM task_kept_answers WHERE task_id = $1),
		       (SELECT COALESCE(array_agg(river_error_attempt) FILTER (WHERE river_error_attempt IS NOT NULL), '{}')
		          FROM task_attempts WHERE task_id = $1),
		       (SELECT COALESCE(array_agg(river_attempt) FILTER (WHERE river_attempt IS NOT NULL), '{}')
		          FROM task_kept_answers WHERE task_id = $1)`,
		t.ID).Scan(&e.sent, &e.kept, &e.recorded, &e.keptRiver)
	if err != nil || t.jobID == nil {
		return e, err
	}
	job, err := s.river.JobGetTx(ctx, tx, *t.jobID)
	if errors.Is(err, river.ErrNotFound) {
		return e, nil
	}
	if err != nil {
		return e, err
	}
	e.riverErrors = job.Errors
	e.jobRunning = job.State == rivertype.JobStateRunning
	var args TaskArgs
	if err := json.Unmarshal(job.EncodedArgs, &args); err != nil {
		return e, fmt.Errorf("river job args: %w", err)
	}
	e.traceID = args.TraceID
	return e, nil
}

// reapKept records, in the reaper's transaction tx, the kept answer of t,
// an unfinished task whose job is lost, as its success: the path a run of
// the task takes (beginTx, then the success's recording), without a call.
// Runs that ended unrecorded are journalled ambiguous first, as a run
// would; the settlement counts them, any other kept answer and a job still
// running as possibly charged calls. It returns nil and records nothing
// when no kept answer can be recorded (none, or none that opens; the
// task's request or model is gone): the reaper then settles the task as
// possibly charged.
func (s *Service) reapKept(ctx context.Context, tx pgx.Tx, t Task, ev callEvidence) (*outcome, error) {
	if ev.kept == 0 {
		return nil, nil
	}
	kept, err := s.readKept(ctx, tx, t.ID)
	if err != nil || len(kept) == 0 {
		return nil, err
	}
	raw, err := s.rawRequest(t)
	if err != nil {
		return nil, nil
	}
	m, prov, err := s.modelOf(t)
	if err != nil {
		return nil, nil
	}
	b, err := s.keptAttempt(t, kept[0], raw)
	if err != nil {
		return nil, nil
	}
	t.Request = raw
	r := &run{taskID: t.ID, traceID: ev.traceID, errors: ev.riverErrors}
	on := &begunAttempt{task: t, model: m, prov: prov, raw: raw}
	if err := s.markInterrupted(ctx, tx, on, r, kept); err != nil {
		return nil, err
	}
	st, err := lockAttemptState(ctx, tx, t.ID)
	if err != nil {
		return nil, err
	}
	st.jc.ambiguous += len(kept) - 1
	if ev.jobRunning {
		st.jc.ambiguous++
	}
	if !b.sent {
		b.attempt = st.last + 1 // the next free number, as recordOutcome takes it
	}
	s.cfg.Logger.LogAttrs(ctx, slog.LevelWarn, "reaper recording a kept answer as the task's success",
		slog.String("task_id", t.ID), slog.Int("attempt", b.attempt), slog.String("trace_id", ev.traceID))
	c := s.newFinishedCall(r, b, b.fromKept.resp, nil, b.fromKept.latency)
	batch := &pgx.Batch{}
	var settle budget.Settlements
	if err := s.queueSuccess(batch, &settle, st, c); err != nil {
		return nil, err
	}
	settle.Queue(batch, s.cfg.AlertThresholds)
	batch.Queue(forgetKeptSQL, t.ID, nil) // the other copies go with the task's end
	if err := tx.SendBatch(ctx, batch).Close(); err != nil {
		return nil, err
	}
	log := s.cfg.Logger.With(slog.String("task_id", t.ID), slog.String("owner_id", t.OwnerID),
		slog.String("model", b.model.Name), slog.Int("attempt", b.attempt), slog.String("trace_id", ev.traceID))
	return c.res.logged(log), nil
}
