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
// again. Should even that write fail, the call's journal entry, committed
// "sent" before the call, makes later runs count it as possibly charged
// (ambiguous), and the reaper settles such a task as possibly charged,
// never releases it uncharged.
//
// A kept answer is bound to its call by the attempt number: recording it
// completes the entry that call left "sent". Nothing is written for a
// kept answer until a recording has failed; each run's begin reads them
// (readKept) in the transaction that locks the task.

// keptAnswer is a provider's answer whose recording failed, as kept.
type keptAnswer struct {
	attempt   int // the number the run called with, its entry still "sent"
	model     string
	startedAt time.Time
	latency   time.Duration
	body      keptBody
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
	// Embeddings is an embeddings answer's vectors; such an answer has no
	// choices.
	Embeddings [][]float32 `json:"embeddings,omitempty"`
	// Native is the provider's answer as it sent it (native.go).
	Native *provider.NativeAnswer `json:"native,omitempty"`
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
		SystemFingerprint: resp.SystemFingerprint, Embeddings: resp.Embeddings, Native: resp.Native}
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
	if b.Embeddings != nil {
		return &provider.Response{Embeddings: b.Embeddings, Model: b.Model, Usage: b.usage(), Status: b.Status}
	}
	r := provider.TextResponse(b.Content, b.FinishReason)
	if b.Choices != nil {
		r.Choices = make([]provider.Choice, len(b.Choices))
		for i, c := range b.Choices {
			r.Choices[i] = provider.Choice{Index: c.Index, Message: c.Message, FinishReason: c.FinishReason, Logprobs: c.Logprobs,
				StopReason: c.StopReason, StopSequence: c.StopSequence}
		}
	}
	r.Model, r.Status, r.SystemFingerprint, r.Usage = b.Model, b.Status, b.SystemFingerprint, b.usage()
	r.Native = b.Native
	return r
}

func (b keptBody) usage() *provider.Usage {
	u := b.Usage
	if u == nil {
		return nil
	}
	return &provider.Usage{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens, CachedInputTokens: u.CachedInputTokens,
		CacheWriteTokens: u.CacheWriteTokens, ReasoningTokens: u.ReasoningTokens}
}

// keepSQL writes a kept answer. A retried write of the same answer (its
// first commit's acknowledgement lost) changes nothing.
const keepSQL = `
	INSERT INTO task_kept_answers (task_id, attempt, model, started_at, latency, answer_sealed)
	VALUES ($1, $2, $3, $4, $5, $6)
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
func (s *recording) keepAnswer(ctx context.Context, c *finishedCall) error {
	b := c.b
	plain, err := json.Marshal(keptBodyOf(c.resp, b.stream))
	if err != nil {
		return err
	}
	sealed := s.cfg.Sealer.Seal(plain, []byte(b.task.ID))
	wait := keepWait
	for try := 1; ; try++ {
		_, err = s.pool.Exec(ctx, keepSQL, b.task.ID, b.attempt, b.model.Name, b.startAt, c.latency, sealed)
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
func (s *recording) readKept(ctx context.Context, tx pgx.Tx, taskID string) ([]keptAnswer, error) {
	rows, err := tx.Query(ctx, `
		SELECT attempt, model, started_at, latency, answer_sealed
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
		return x, r.Scan(&x.k.attempt, &x.k.model, &x.k.startedAt, &x.k.latency, &x.sealed)
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

// keptAttempts are the attempts whose answers are kept: their entries,
// still "sent", are not interrupted calls.
func keptAttempts(kept []keptAnswer) []int32 {
	out := []int32{} // never nil: NULL would make "<> ALL" match nothing
	for _, k := range kept {
		out = append(out, int32(k.attempt))
	}
	return out
}

// keptAttempt is the attempt that records k on task t, whose unsealed
// request is raw, without a call.
func (s *recording) keptAttempt(t Task, k keptAnswer, raw Request) (*begunAttempt, error) {
	t.Request = raw
	if k.model != "" && k.model != t.Model {
		t.Model = k.model // the model that answered
	}
	m, prov, err := s.cfg.modelOf(t)
	if err != nil {
		return nil, err
	}
	b := &begunAttempt{task: t, attempt: k.attempt, startAt: k.startedAt, model: m, prov: prov, raw: raw,
		stream: k.body.Stream, keptKey: k.attempt}
	resp := k.body.response()
	b.fromKept = &keptCall{resp: resp, latency: k.latency}
	return b, nil
}

// keptCall is a call whose answer a run records from its kept copy.
type keptCall struct {
	resp    *provider.Response
	latency time.Duration
}

// recordKept records a kept answer in place of a call.
func (s *recording) recordKept(ctx context.Context, r *run, b *begunAttempt) error {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	s.cfg.Logger.LogAttrs(ctx, slog.LevelWarn, "recording a kept answer instead of calling again",
		slog.String("task_id", b.task.ID), slog.Int("attempt", b.attempt), slog.String("trace_id", r.traceID))
	return s.recordRun(rctx, s.newFinishedCall(r, b, b.fromKept.resp, nil, b.fromKept.latency))
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
	ambiguous int     // journal entries counted ambiguous
	sent      []int32 // attempts whose entries are still "sent"
	kept      []int32 // attempts whose answers are kept
	traceID   string  // the job's, for the records of a reaped task
}

// possibleCalls counts the calls that may have been charged: ambiguous
// attempts, and calls whose entries are still "sent" (a run in flight, or
// one that died or failed to record), those whose answers are kept
// counted once. The reaper settles a task with any as possibly charged.
func possibleCalls(e callEvidence) int {
	n := e.ambiguous + len(e.kept)
	for _, a := range e.sent {
		if !slices.Contains(e.kept, a) {
			n++
		}
	}
	return n
}

// readEvidence reads t's callEvidence under tx: the journal's and the
// kept answers' from our tables, the trace id from its River job's
// arguments (JobGetTx).
func (s *maintenance) readEvidence(ctx context.Context, tx pgx.Tx, t Task, ambiguous int) (callEvidence, error) {
	e := callEvidence{ambiguous: ambiguous}
	err := tx.QueryRow(ctx, `
		SELECT (SELECT COALESCE(array_agg(attempt), '{}') FROM task_attempts WHERE task_id = $1 AND state = 'sent'),
		       (SELECT COALESCE(array_agg(attempt), '{}') FROM task_kept_answers WHERE task_id = $1)`,
		t.ID).Scan(&e.sent, &e.kept)
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
	var args TaskArgs
	if err := json.Unmarshal(job.EncodedArgs, &args); err != nil {
		return e, fmt.Errorf("river job args: %w", err)
	}
	e.traceID = args.TraceID
	return e, nil
}

// reapKept records, in the reaper's transaction tx, the kept answer of t,
// an unfinished task whose job is lost, as its success: the path a run of
// the task takes (beginAttempt, then the success's recording), without a
// call. Calls left "sent" are journalled ambiguous first, as a run would;
// the settlement counts them and any other kept answer as possibly
// charged calls. It returns nil and records nothing
// when no kept answer can be recorded (none, or none that opens; the
// task's request or model is gone): the reaper then settles the task as
// possibly charged.
func (s *recording) reapKept(ctx context.Context, tx pgx.Tx, t Task, ev callEvidence) (*outcome, error) {
	if len(ev.kept) == 0 {
		return nil, nil
	}
	kept, err := s.readKept(ctx, tx, t.ID)
	if err != nil || len(kept) == 0 {
		return nil, err
	}
	raw, err := s.guard.rawRequest(t)
	if err != nil {
		return nil, nil
	}
	m, prov, err := s.cfg.modelOf(t)
	if err != nil {
		return nil, nil
	}
	b, err := s.keptAttempt(t, kept[0], raw)
	if err != nil {
		return nil, nil
	}
	t.Request = raw
	r := &run{taskID: t.ID, traceID: ev.traceID}
	on := &begunAttempt{task: t, model: m, prov: prov, raw: raw}
	if err := s.markInterrupted(ctx, tx, on, ev.traceID, kept); err != nil {
		return nil, err
	}
	st, err := lockAttemptState(ctx, tx, t.ID)
	if err != nil {
		return nil, err
	}
	st.jc.ambiguous += len(kept) - 1
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
