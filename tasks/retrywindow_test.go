package tasks

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/tollgate/tollgate/budget"
	"github.com/tollgate/tollgate/catalog"
	"github.com/tollgate/tollgate/internal/testclock"
	"github.com/tollgate/tollgate/internal/testdb"
	"github.com/tollgate/tollgate/provider"
	"github.com/tollgate/tollgate/seal"
)

func TestReplaysFailure(t *testing.T) {
	t.Parallel()
	cases := []struct {
		code         string
		spent, bound int
		want         bool
	}{
		{CodeModelIncompatible, 1, 4, true},
		{CodeIncompatibleModelResponse, 1, 4, true},
		{CodeModelQuotaExhausted, 1, 4, true},
		{CodeProviderRedirected, 1, 4, true},
		{CodePossiblyExecuted, 1, 4, true},
		// A stream's one attempt leaves the rest to the client's retries.
		{CodeModelTemporarilyUnavailable, 1, 4, false},
		{CodeModelTemporarilyUnavailable, 3, 4, false},
		{CodeModelTemporarilyUnavailable, 4, 4, true},
		{CodeModelRateLimited, 2, 4, false},
		{CodeModelRateLimited, 5, 4, true},
		// Tollgate's own failure may pass on a retry.
		{CodeApplicationFailure, 4, 4, false},
		{"some_new_code", 4, 4, false},
	}
	for _, c := range cases {
		if got := replaysFailure(&Failure{Code: c.code}, c.spent, c.bound); got != c.want {
			t.Errorf("replaysFailure(%s, spent %d, bound %d) = %v, want %v", c.code, c.spent, c.bound, got, c.want)
		}
	}
	if replaysFailure(nil, 4, 4) {
		t.Error("replaysFailure(nil) = true, want false")
	}
}

// windowService is a Service with no workers on a database of its own,
// with owners "acme" and "other", its clock the returned one, the replay
// window window and an attempt bound of 4.
func windowService(t *testing.T, window time.Duration) (*Service, *testclock.Clock) {
	t.Helper()
	ctx := context.Background()
	pool, _ := testdb.NewPool(t)
	clock := &testclock.Clock{}
	for _, owner := range []string{"acme", "other"} {
		if _, err := budget.NewStore(pool, clock.Now).Set(ctx, owner, 1_000_000); err != nil {
			t.Fatal(err)
		}
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
	s, err := New(pool, Config{Catalog: cat, Clients: clients, Sealer: sealer, QueueOnly: true, MaxAttempts: 4,
		Now: clock.Now, FailureReplayWindow: window})
	if err != nil {
		t.Fatal(err)
	}
	return s, clock
}

// earlier is a task of the case's history: admitted (under a key of its
// own, so that a failure before it never answers it), then ended as
// status with a failure of code after attempts calls, ago before now.
type earlier struct {
	owner, text, code string
	status            Status
	attempts          int
	ago               time.Duration
}

// endTask ends the task as e says, as its last run would have.
func endTask(t *testing.T, s *Service, id string, e earlier) {
	t.Helper()
	f, err := json.Marshal(Failure{Code: e.code, Class: "test", Message: "test failure"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.pool.Exec(context.Background(), `
		UPDATE tasks SET status = $2, error = $3, attempts = $4, finished_at = now() - $5::interval, job_id = NULL WHERE id = $1`,
		id, e.status, f, e.attempts, e.ago); err != nil {
		t.Fatal(err)
	}
}

func windowSubmission(owner, text string, keyed bool) Submission {
	req := Request{}
	req.Messages = []provider.Message{{Role: "user", Content: provider.Text(text)}}
	return Submission{OwnerID: owner, IdempotencyKey: uuid.NewString(), Unkeyed: !keyed, Request: req}
}

// A request without a key identical to one whose task failed within the
// window is answered with that task, nothing admitted; anything else
// about it (a key, another owner or body, the window past or off, a
// failure a retry may pass, a cancel, the background) is admitted.
func TestFailureReplayWindow(t *testing.T) {
	t.Parallel()
	rejected := earlier{owner: "acme", text: "hello", code: CodeModelIncompatible, status: StatusFailed, attempts: 1}
	unavailable := func(attempts int, ago time.Duration) earlier {
		return earlier{owner: "acme", text: "hello", code: CodeModelTemporarilyUnavailable, status: StatusFailed, attempts: attempts, ago: ago}
	}
	cases := []struct {
		name    string
		window  time.Duration // 0 is the default
		history []earlier
		owner   string // "" is acme
		text    string // "" is hello
		keyed   bool
		queue   bool
		after   time.Duration // the clock moved on by this after the history
		want    int           // the history's task that answers, by index; -1 for a new task
	}{
		{name: "rejected, repeated", history: []earlier{rejected}, want: 0},
		{name: "rejected, repeated within the window", history: []earlier{rejected}, after: 59 * time.Second, want: 0},
		{name: "the latest of two failures", history: []earlier{rejected, rejected}, want: 1},
		{name: "past the window", history: []earlier{rejected}, after: 61 * time.Second, want: -1},
		{name: "a shorter window, past", window: 5 * time.Second, history: []earlier{rejected}, after: 6 * time.Second, want: -1},
		{name: "window off", window: -1, history: []earlier{rejected}, want: -1},
		{name: "with a key", history: []earlier{rejected}, keyed: true, want: -1},
		{name: "another owner", history: []earlier{rejected}, owner: "other", want: -1},
		{name: "another body", history: []earlier{rejected}, text: "hello again", want: -1},
		{name: "background", history: []earlier{rejected}, queue: true, want: -1},
		{name: "canceled", history: []earlier{{owner: "acme", text: "hello", code: CodeModelIncompatible, status: StatusCanceled, attempts: 1}}, want: -1},
		{name: "Tollgate's own failure", history: []earlier{{owner: "acme", text: "hello", code: CodeApplicationFailure, status: StatusFailed, attempts: 4}}, want: -1},
		{name: "unavailable, attempts spent", history: []earlier{unavailable(4, 0)}, want: 0},
		{name: "unavailable, attempts left", history: []earlier{unavailable(1, 0)}, want: -1},
		{name: "unavailable, the window's calls spend them", history: []earlier{unavailable(1, 0), unavailable(1, 0), unavailable(2, 0)}, want: 2},
		{name: "unavailable, older calls past the window", history: []earlier{unavailable(2, 70*time.Second), unavailable(2, 0)}, want: -1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			s, clock := windowService(t, c.window)
			var ids []string
			for _, e := range c.history {
				created, err := s.Create(ctx, windowSubmission(e.owner, e.text, true))
				if err != nil {
					t.Fatal(err)
				}
				ids = append(ids, created.Task.ID)
				endTask(t, s, created.Task.ID, e)
			}
			if c.after != 0 {
				clock.Set(time.Now().Add(c.after))
			}
			sub := windowSubmission(cmp.Or(c.owner, "acme"), cmp.Or(c.text, "hello"), c.keyed)
			sub.Queue = c.queue
			created, err := s.Create(ctx, sub)
			if err != nil {
				t.Fatal(err)
			}
			var tasks int64
			if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM tasks`).Scan(&tasks); err != nil {
				t.Fatal(err)
			}
			if c.want < 0 {
				if created.ReplayedFailure || created.Task.Status != StatusQueued || int(tasks) != len(c.history)+1 {
					t.Errorf("got task %s %s (replayed failure: %v, %d tasks), want a new task", created.Task.ID, created.Task.Status, created.ReplayedFailure, tasks)
				}
				return
			}
			if !created.ReplayedFailure || created.Task.ID != ids[c.want] || created.Task.Status != StatusFailed || created.Task.Error == nil {
				t.Errorf("got task %s %s (replayed failure: %v), want failed task %s replayed", created.Task.ID, created.Task.Status, created.ReplayedFailure, ids[c.want])
			}
			if int(tasks) != len(c.history) {
				t.Errorf("%d tasks, want %d: nothing admitted", tasks, len(c.history))
			}
			var held int64
			if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM budget_reservations WHERE state = 'held'`).Scan(&held); err != nil {
				t.Fatal(err)
			}
			if int(held) != len(c.history) {
				t.Errorf("%d reservations held, want the history's %d: a replay reserves nothing", held, len(c.history))
			}
		})
	}
}
