package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tollgate/tollgate/accounts"
	"github.com/tollgate/tollgate/internal/testdb"
	"github.com/tollgate/tollgate/provider/fake"
	"github.com/tollgate/tollgate/tasks"
)

// taskReadSQL is what tasks.Service.Get sends: the statement a waiting
// request reads its task with.
const taskReadSQL = "FROM tasks WHERE id = $1 AND ($2 = '' OR owner_id = $2)"

// sqlCounts is a pgx tracer counting the statements that contain each of
// its patterns.
type sqlCounts struct {
	patterns []string
	mu       sync.Mutex
	n        map[string]int
}

func (c *sqlCounts) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range c.patterns {
		if strings.Contains(d.SQL, p) {
			c.n[p]++
		}
	}
	return ctx
}

func (c *sqlCounts) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// N is how many statements containing pattern were sent so far.
func (c *sqlCounts) N(pattern string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[pattern]
}

// newCountingEnv is an env on a pool whose statements containing each
// pattern are counted.
func newCountingEnv(t *testing.T, o envOptions, patterns ...string) (*env, *sqlCounts) {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(testdb.New(t))
	if err != nil {
		t.Fatal(err)
	}
	counts := &sqlCounts{patterns: patterns, n: map[string]int{}}
	cfg.ConnConfig.Tracer = counts
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	o.pool = pool
	return newEnv(t, o), counts
}

// TestSynchronousCallsGetTheirTaskFromItsRecorder: a synchronous caller
// whose task runs in this process (on arrival) is handed the task as the
// finishing statement stored it. It reads the task neither before the
// wait (it listens from before the admission) nor after it, and what it
// answers is what a later GET reads.
func TestSynchronousCallsGetTheirTaskFromItsRecorder(t *testing.T) {
	t.Parallel()
	e, counts := newCountingEnv(t, envOptions{}, taskReadSQL)
	key := e.owner("sync", accounts.RoleClient, 1_000_000_000)
	tests := []struct {
		name string
		call func(i int) (taskID string, answered []byte)
	}{
		{"POST /v1/tasks with Prefer: wait", func(i int) (string, []byte) {
			r := e.post(key, fmt.Sprint("wait-", i), taskBody("a synchronous task", 16), map[string]string{"Prefer": "wait=30"})
			if r.status != http.StatusOK {
				t.Fatalf("POST: %d %s", r.status, r.body)
			}
			return r.task(t).ID, r.body
		}},
		{"POST /v1/chat/completions", func(i int) (string, []byte) {
			r := e.do(http.MethodPost, "/v1/chat/completions", key,
				[]byte(`{"model":"test-model","messages":[{"role":"user","content":"hi"}]}`),
				map[string]string{"Idempotency-Key": fmt.Sprint("chat-", i)})
			if r.status != http.StatusOK {
				t.Fatalf("chat completion: %d %s", r.status, r.body)
			}
			return r.header.Get("X-Tollgate-Task-Id"), nil
		}},
		{"POST /v1/routes/draft-reply", func(i int) (string, []byte) {
			out := routeCall(e, key, "draft-reply", fmt.Sprint("route-", i), map[string]any{"message": "where is my order?"})
			r := out.route(t)
			if !r.OK || r.TaskID == nil {
				t.Fatalf("route call: %+v, want an answer from a task", r)
			}
			return *r.TaskID, nil
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			const calls = 5
			for i := range calls {
				before := counts.N(taskReadSQL)
				id, answered := tt.call(i)
				if n := counts.N(taskReadSQL) - before; n != 0 {
					t.Errorf("call %d: the task was read %d times while the caller waited, want 0", i, n)
				}
				got := e.do(http.MethodGet, "/v1/tasks/"+id, key, nil, nil)
				if got.status != http.StatusOK || got.task(t).Status != tasks.StatusSucceeded {
					t.Fatalf("GET task %s: %d %s, want it succeeded", id, got.status, got.body)
				}
				if answered != nil {
					var a, g any
					if err := json.Unmarshal(answered, &a); err != nil {
						t.Fatal(err)
					}
					if err := json.Unmarshal(got.body, &g); err != nil {
						t.Fatal(err)
					}
					if diff := cmp.Diff(g, a); diff != "" {
						t.Errorf("call %d: the waiting request answered another task than GET reads (-GET +answered):\n%s", i, diff)
					}
				}
			}
		})
	}
}

// TestWaitOnCreatedAfterTheTaskFinished: a task that finishes before its
// creator begins to wait is not missed: Create listened from before the
// admission, so the finish is waiting for Wait (WaitParams.Created), which
// returns it without reading it.
func TestWaitOnCreatedAfterTheTaskFinished(t *testing.T) {
	t.Parallel()
	e, counts := newCountingEnv(t, envOptions{}, taskReadSQL)
	owner := "early"
	e.owner(owner, accounts.RoleClient, 1_000_000_000)
	var req tasks.Request
	if err := json.Unmarshal(taskBody("finished before the wait", 16), &req); err != nil {
		t.Fatal(err)
	}
	created, err := e.tasks.Create(t.Context(), tasks.Submission{OwnerID: owner, IdempotencyKey: "early-1", Request: req, Await: true})
	if err != nil {
		t.Fatal(err)
	}
	e.waitFor("the task to finish", func() bool {
		return e.scalar(`SELECT count(*) FROM tasks WHERE id = $1 AND finished_at IS NOT NULL`, created.Task.ID) == 1
	})
	before := counts.N(taskReadSQL)
	// An hour: a finish missed would hold the wait until the recheck reads
	// the task, which the count below would show.
	got, err := e.tasks.Wait(t.Context(), tasks.WaitParams{Created: &created, For: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != tasks.StatusSucceeded || got.Result == nil || got.Result.Output == "" {
		t.Errorf("Wait = status %s result %+v, want the succeeded task with its output", got.Status, got.Result)
	}
	if n := counts.N(taskReadSQL) - before; n != 0 {
		t.Errorf("Wait read the task %d times, want 0", n)
	}
}

// TestLostAnnouncementFoundBySweep: a task that finishes without being
// announced (its instance died between commit and NOTIFY) is found by the
// waiting process's sweep, one query for all its waiters, and the waiter
// reads its task once when woken: not once per recheck, so that a long
// wait does not cost more reads than a short one.
func TestLostAnnouncementFoundBySweep(t *testing.T) {
	t.Parallel()
	const sweepSQL = "WHERE id = ANY($1::uuid[]) AND (finished_at IS NOT NULL OR error IS NOT NULL)"
	e, counts := newCountingEnv(t, envOptions{recheckEvery: 20 * time.Millisecond}, taskReadSQL, sweepSQL)
	key := e.owner("sweep", accounts.RoleClient, 1_000_000_000)
	e.fake.Script(fake.Scripted{Hang: true})
	id := e.submit(key, "lost-1", taskBody("an answer that never comes", 16))
	e.waitFor("the call to be in flight", func() bool { return e.fake.CallCount() == 1 })

	readsBefore := counts.N(taskReadSQL)
	answered := make(chan response, 1)
	go func() {
		answered <- e.do(http.MethodGet, "/v1/tasks/"+id, key, nil, map[string]string{"Prefer": "wait=60"})
	}()
	e.waitFor("the poll to read its task", func() bool { return counts.N(taskReadSQL) > readsBefore })
	sweeps := counts.N(sweepSQL)
	e.waitFor("five sweeps while the poll waits", func() bool { return counts.N(sweepSQL) >= sweeps+5 })

	// Finished behind Tollgate's back: no announcement.
	if _, err := e.pool.Exec(context.Background(), `
		WITH t AS (
			UPDATE tasks SET status = 'canceled', finished_at = now(), updated_at = now()
			WHERE id = $1 RETURNING id)
		UPDATE budget_reservations SET state = 'released', closed_at = now() WHERE task_id IN (SELECT id FROM t)`, id); err != nil {
		t.Fatal(err)
	}
	r := <-answered
	if r.status != http.StatusOK || r.task(t).Status != tasks.StatusCanceled {
		t.Fatalf("poll: %d %s, want the canceled task", r.status, r.body)
	}
	if n := counts.N(taskReadSQL) - readsBefore; n != 2 {
		t.Errorf("the poll read its task %d times over five sweeps and more, want 2 (before the wait, after the wake)", n)
	}
}
