package tasks

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"

	"github.com/tollgate/tollgate/budget"
	"github.com/tollgate/tollgate/catalog"
	"github.com/tollgate/tollgate/internal/pipetx"
	"github.com/tollgate/tollgate/internal/testdb"
	"github.com/tollgate/tollgate/provider"
	"github.com/tollgate/tollgate/seal"
)

const applyCatalog = `
providers:
  - {key: default, kind: openai, base_url: fake, api_key_env: TEST_OPENAI_KEY}
default_model: test-model
models:
  - {name: test-model, provider: default, input_micros_per_mtok: 1000000, output_micros_per_mtok: 2000000}
`

// newApplyService is a Service on a migrated database of its own, with
// no workers, and an owner "acme" with a budget.
func newApplyService(t *testing.T) (*Service, *pgxpool.Pool) {
	t.Helper()
	ctx := context.Background()
	pool, _ := testdb.NewPool(t)
	if _, err := budget.NewStore(pool, time.Now).Set(ctx, "acme", 1_000_000); err != nil {
		t.Fatal(err)
	}
	cat, err := catalog.Parse([]byte(applyCatalog), func(string) string { return "sk-test" })
	if err != nil {
		t.Fatal(err)
	}
	clients, err := cat.Clients(http.DefaultClient, "http://127.0.0.1:1")
	if err != nil {
		t.Fatal(err)
	}
	sealer, err := seal.New(bytes.Repeat([]byte{7}, 32))
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(pool, Config{Catalog: cat, Clients: clients, Sealer: sealer, QueueOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	return s, pool
}

// queuedCall is the first call of a task just admitted, made by a River
// run whose job completion is only noted (completed), its journal entry
// committed "sent" before the call as the run's begin commits it, ended
// with callErr (nil: an answer).
func queuedCall(t *testing.T, s *Service, key string, callErr *provider.Error, completed *bool) *finishedCall {
	t.Helper()
	req := Request{}
	req.Messages = []provider.Message{{Role: "user", Content: provider.Text("hello")}}
	created, err := s.Create(context.Background(), Submission{OwnerID: "acme", IdempotencyKey: key, Request: req})
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.runner.attemptOn(created.Task)
	if err != nil {
		t.Fatal(err)
	}
	b.attempt, b.startAt = 1, time.Now()
	err = pgx.BeginFunc(context.Background(), s.pool, func(tx pgx.Tx) error { return s.runner.journalSent(context.Background(), tx, b) })
	if err != nil {
		t.Fatal(err)
	}
	r := &run{taskID: created.Task.ID, attempt: 1, maxAttempts: 10, providerKey: "default",
		complete: func(context.Context, pgx.Tx) error { *completed = true; return nil }}
	resp := provider.TextResponse("hi", "stop")
	resp.Usage = &provider.Usage{InputTokens: 5, OutputTokens: 2}
	var cerr error
	if callErr != nil {
		cerr = callErr
	}
	return s.recording.newFinishedCall(r, b, resp, cerr, 20*time.Millisecond)
}

// applyAlone is recordAlone with the decision given: d is applied to c.
func applyAlone(t *testing.T, s *Service, c *finishedCall, d decision) applied {
	t.Helper()
	ctx := context.Background()
	var a applied
	err := pipetx.Run(ctx, s.pool, func(tx *pipetx.Tx) error {
		st, err := lockAttemptState(ctx, tx, c.b.task.ID)
		if err != nil {
			return err
		}
		st.task.Request = c.b.raw
		pending := &pgx.Batch{}
		if err := s.recording.queueAttemptRecords(pending, st.task, c); err != nil {
			return err
		}
		if c.err != nil {
			if err := tx.SendBatch(ctx, pending).Close(); err != nil {
				return err
			}
			pending = &pgx.Batch{}
		}
		a, err = s.applier.apply(ctx, tx, c, st, d, pending)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// afterApply is what a task, its reservation, its journal and its key's
// gate hold once a decision is applied.
type afterApply struct {
	Status      string
	Error       string // the stored failure's code, "" for none
	Reservation string
	Journal     string // the attempt's state
	Gate        string // the key's gate; "closed" when it has no row
	Completed   bool   // the run's job was completed
}

func readAfterApply(t *testing.T, pool *pgxpool.Pool, id string, completed bool) afterApply {
	t.Helper()
	var got afterApply
	err := pool.QueryRow(context.Background(), `
		SELECT t.status, COALESCE(t.error->>'code', ''), r.state, a.state,
		       COALESCE((SELECT k.state FROM provider_keys k WHERE k.key = 'default'), 'closed')
		FROM tasks t JOIN budget_reservations r ON r.task_id = t.id JOIN task_attempts a ON a.task_id = t.id
		WHERE t.id = $1`, id).Scan(&got.Status, &got.Error, &got.Reservation, &got.Journal, &got.Gate)
	if err != nil {
		t.Fatal(err)
	}
	got.Completed = completed
	return got
}

// TestApply carries out one decision of each kind on a real transaction
// and checks what the task, its money, its journal, its key's gate and
// its job come to.
func TestApply(t *testing.T) {
	t.Parallel()
	s, pool := newApplyService(t)
	throttled := &provider.Error{Class: provider.ClassThrottled, Code: "rate_limit", Status: 429}
	transient := &provider.Error{Class: provider.ClassTransient, Code: "overloaded", Status: 503}
	rejected := &provider.Error{Class: provider.ClassRejected, Code: "invalid_request", Status: 400}
	waiting := failureFor(provider.ClassThrottled, "rate_limit", "")
	waiting.Message = "Waiting: " + waiting.Message
	failed := failureFor(provider.ClassRejected, "invalid_request", "")
	ambiguous := &provider.Error{Class: provider.ClassAmbiguous, Code: "timeout"}
	possibly := failureFor(provider.ClassAmbiguous, "timeout", "")

	cases := []struct {
		name    string
		callErr *provider.Error
		d       decision
		want    afterApply
		after   func(error) bool // what the job is told next
	}{
		{"succeed: finished, settled, gate closed", nil,
			decision{next: stepSucceed, gate: gateChange{move: gateClose}, status: StatusSucceeded, money: moneySettle},
			afterApply{Status: "succeeded", Reservation: "settled", Journal: "succeeded", Gate: "closed"},
			func(err error) bool { return err == nil }},
		{"cancel: canceled, released, job completed", rejected,
			decision{next: stepCancel, money: moneyRelease},
			afterApply{Status: "canceled", Reservation: "released", Journal: "failed", Gate: "closed", Completed: true},
			func(err error) bool { return err == nil }},
		{"fail: failed with its failure, released, job completed", rejected,
			decision{next: stepFail, failure: &failed, money: moneyRelease},
			afterApply{Status: "failed", Error: failed.Code, Reservation: "released", Journal: "failed", Gate: "closed", Completed: true},
			func(err error) bool { return err == nil }},
		{"fail after an ambiguous call: settled as possibly charged", ambiguous,
			decision{next: stepFail, failure: &possibly, money: moneyPossiblyCharged, possiblyCharged: 1},
			afterApply{Status: "failed", Error: possibly.Code, Reservation: "settled", Journal: "ambiguous", Gate: "closed", Completed: true},
			func(err error) bool { return err == nil }},
		{"wait: queued with why, gate paused, job snoozed", throttled,
			decision{next: stepWait, failure: &waiting, gate: gateChange{move: gatePause, pause: time.Minute, class: "throttled", code: "rate_limit"}},
			afterApply{Status: "queued", Error: waiting.Code, Reservation: "held", Journal: "failed", Gate: "paused"},
			func(err error) bool { var snooze *river.JobSnoozeError; return errors.As(err, &snooze) }},
		{"retry: queued, job retried", transient,
			decision{next: stepRetry, retryAfter: time.Second, cause: transient},
			afterApply{Status: "queued", Reservation: "held", Journal: "failed", Gate: "closed"},
			func(err error) bool { var retry *retryError; return errors.As(err, &retry) }},
	}
	// Not parallel: the cases share the key's gate, opened afresh for each.
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if _, err := pool.Exec(context.Background(), `DELETE FROM provider_keys`); err != nil {
				t.Fatal(err)
			}
			var completed bool
			call := queuedCall(t, s, "k"+string(rune('a'+i)), c.callErr, &completed)
			a := applyAlone(t, s, call, c.d)
			got := readAfterApply(t, pool, call.b.task.ID, completed)
			if diff := cmp.Diff(c.want, got); diff != "" {
				t.Errorf("mismatch (-want +got):\n%s", diff)
			}
			if !c.after(a.after) {
				t.Errorf("the job is told %v next", a.after)
			}
			if (a.final != nil) != (c.d.next == stepSucceed || c.d.next == stepCancel || c.d.next == stepFail) {
				t.Errorf("final = %+v for %d", a.final, c.d.next)
			}
		})
	}
}

// TestApplyRecordOnly: an answer for a task that ended meanwhile is kept
// as history; the task, its money and its end stay as they were.
func TestApplyRecordOnly(t *testing.T) {
	t.Parallel()
	s, pool := newApplyService(t)
	var completed bool
	call := queuedCall(t, s, "ended", nil, &completed)
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `UPDATE tasks SET status = 'canceled', finished_at = now() WHERE id = $1`, call.b.task.ID); err != nil {
		t.Fatal(err)
	}
	a := applyAlone(t, s, call, decision{next: stepRecordOnly, gate: gateChange{move: gateClose}})
	got := readAfterApply(t, pool, call.b.task.ID, completed)
	want := afterApply{Status: "canceled", Reservation: "held", Journal: "succeeded", Gate: "closed", Completed: true}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("mismatch (-want +got):\n%s", diff)
	}
	if a.final != nil || a.after != nil {
		t.Errorf("applied = %+v, want nothing to follow", a)
	}
}

// TestRecordersAgree: a success recorded alone and one recorded by the
// batching recorder end the same: the task succeeded, its reservation
// settled, its attempt journalled, the key's gate closed, and the job
// left for River to complete.
func TestRecordersAgree(t *testing.T) {
	t.Parallel()
	s, pool := newApplyService(t)
	for _, c := range []struct {
		name string
		rec  recorder
	}{
		{"lone", loneRecorder{s.recording}},
		{"batch", newBatchRecorder(s.recording)},
	} {
		t.Run(c.name, func(t *testing.T) {
			var completed bool
			call := queuedCall(t, s, "key-"+c.name, nil, &completed)
			a, err := c.rec.record(context.Background(), call)
			if err != nil {
				t.Fatal(err)
			}
			got := readAfterApply(t, pool, call.b.task.ID, completed)
			want := afterApply{Status: "succeeded", Reservation: "settled", Journal: "succeeded", Gate: "closed"}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("mismatch (-want +got):\n%s", diff)
			}
			if a.final == nil || a.final.status != StatusSucceeded || a.after != nil {
				t.Errorf("applied = %+v, want the task's success and nothing after", a)
			}
		})
	}
}
