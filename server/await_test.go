package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tollgate/tollgate/accounts"
	"github.com/tollgate/tollgate/internal/testdb"
	"github.com/tollgate/tollgate/tasks"
)

// taskReads counts the reads of one task by id (tasks.Service.Get), the
// statement a waiting request sends to learn how its task ended.
type taskReads struct{ *testdb.RoundTrips }

func newTaskReadsEnv(t *testing.T) (*env, taskReads) {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(testdb.New(t))
	if err != nil {
		t.Fatal(err)
	}
	reads := taskReads{&testdb.RoundTrips{Skip: func(sql string) bool {
		return !strings.Contains(sql, "FROM tasks WHERE id = $1 AND ($2 = '' OR owner_id = $2)")
	}}}
	cfg.ConnConfig.Tracer = reads.RoundTrips
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return newEnv(t, envOptions{pool: pool}), reads
}

// TestSynchronousCallsGetTheirTaskFromItsRecorder: a synchronous caller
// whose task runs in this process (on arrival) is handed the task as the
// finishing statement stored it. It reads the task neither before the
// wait (it listens from before the admission) nor after it, and what it
// answers is what a later GET reads.
func TestSynchronousCallsGetTheirTaskFromItsRecorder(t *testing.T) {
	t.Parallel()
	e, reads := newTaskReadsEnv(t)
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
				before := reads.N()
				id, answered := tt.call(i)
				if n := reads.N() - before; n != 0 {
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

// TestAwaitCreatedAfterTheTaskFinished: a task that finishes before its
// creator begins to wait is not missed: Create listened from before the
// admission, so the finish is waiting for AwaitCreated, which returns it
// without reading it.
func TestAwaitCreatedAfterTheTaskFinished(t *testing.T) {
	t.Parallel()
	e, reads := newTaskReadsEnv(t)
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
	before := reads.N()
	// An hour: a finish missed would hold the wait until the recheck reads
	// the task, which the count below would show.
	got, err := e.tasks.AwaitCreated(t.Context(), created, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != tasks.StatusSucceeded || got.Result == nil || got.Result.Output == "" {
		t.Errorf("AwaitCreated = status %s result %+v, want the succeeded task with its output", got.Status, got.Result)
	}
	if n := reads.N() - before; n != 0 {
		t.Errorf("AwaitCreated read the task %d times, want 0", n)
	}
}
