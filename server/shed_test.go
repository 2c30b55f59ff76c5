package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/tollgate/tollgate/accounts"
)

// Past TOLLGATE_MAX_ADMITTING admissions in progress (and its patience:
// here, none), a new task is refused
// at once on every surface that creates one (503 overloaded with
// Retry-After; a route's fallback; OpenAI's envelope), nothing is written
// for it and its key stays free; a retry of a task already admitted is
// still answered from its task; and the admissions in progress finish.
func TestAdmissionsPastTheBoundAreShed(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{maxAdmitting: 2, shedAfter: time.Nanosecond})
	key := e.owner("acme", accounts.RoleClient, 1_000_000)
	earlier := e.submit(key, "k0", taskBody("first", 16))
	e.waitFinished(key, earlier)

	// Hold the owner's budget rows: admissions stop at their reservation.
	ctx := context.Background()
	hold, err := e.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = hold.Rollback(ctx) }()
	if _, err := hold.Exec(ctx, `SELECT 1 FROM budget_periods WHERE owner_id = 'acme' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	type answer struct {
		status int
		err    error
	}
	blocked := make(chan answer, 2)
	for _, k := range []string{"k1", "k2"} {
		go func() {
			req, _ := http.NewRequest(http.MethodPost, e.url+"/v1/tasks", bytes.NewReader(taskBody("blocked "+k, 16)))
			req.Header.Set("Authorization", "Bearer "+key)
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Idempotency-Key", k)
			res, err := e.client.Do(req)
			if err != nil {
				blocked <- answer{err: err}
				return
			}
			res.Body.Close()
			blocked <- answer{status: res.StatusCode}
		}()
	}
	e.waitFor("two admissions in progress", func() bool { return e.tasks.Admitting() == 2 })

	r := e.post(key, "k3", taskBody("third", 16), nil)
	if r.status != http.StatusServiceUnavailable || r.problemCode(t) != "overloaded" {
		t.Fatalf("third POST = %d %s, want 503 overloaded", r.status, r.body)
	}
	if got := r.header.Get("Retry-After"); got != "1" {
		t.Errorf("Retry-After = %q, want 1", got)
	}
	if n := e.scalar(`SELECT count(*) FROM tasks WHERE idempotency_key = 'k3'`); n != 0 {
		t.Errorf("the refused task left %d rows", n)
	}
	// A retry of a task already admitted is answered from it.
	if r := e.post(key, "k0", taskBody("first", 16), nil); r.status != http.StatusOK || r.header.Get("Idempotent-Replayed") != "true" {
		t.Errorf("replay while overloaded = %d %s, want 200 replayed", r.status, r.body)
	}
	// A route with a fallback answers it, saying why; one without fails
	// with the same code.
	if got := routeCall(e, key, "tagline", "r1", map[string]any{"product": "tea"}).route(t); got.Fallback == nil || got.Fallback.Reason != "overloaded" {
		t.Errorf("route fallback = %+v, want reason overloaded", got.Fallback)
	}
	if r := routeCall(e, key, "draft-reply", "r2", map[string]any{"message": "hi"}); r.status != http.StatusServiceUnavailable || r.problemCode(t) != "overloaded" {
		t.Errorf("route without fallback = %d %s, want 503 overloaded", r.status, r.body)
	}
	oai := e.do(http.MethodPost, "/v1/chat/completions", key,
		[]byte(`{"model":"test-model","messages":[{"role":"user","content":"hi"}]}`), nil)
	var envelope struct {
		Error struct{ Code, Type string } `json:"error"`
	}
	_ = json.Unmarshal(oai.body, &envelope)
	if oai.status != http.StatusServiceUnavailable || envelope.Error.Code != "overloaded" || oai.header.Get("x-should-retry") != "true" {
		t.Errorf("chat completion = %d %s (x-should-retry %q), want 503 overloaded, retry", oai.status, oai.body, oai.header.Get("x-should-retry"))
	}
	if got := shedCount(t, e, "admissions"); got != 4 {
		t.Errorf("tollgate_tasks_shed_total{reason=admissions} = %d, want 4", got)
	}

	// Once the row is free the admissions in progress finish, and the
	// refused key is free for a new attempt.
	if err := hold.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if a := <-blocked; a.err != nil || a.status != http.StatusAccepted {
			t.Errorf("blocked POST = %d %v, want 202", a.status, a.err)
		}
	}
	e.waitFor("no admission in progress", func() bool { return e.tasks.Admitting() == 0 })
	if id := e.submit(key, "k3", taskBody("third", 16)); id == "" {
		t.Error("the refused key could not be used again")
	}
	e.checkInvariants()
}

// A new task that would join a queue whose next task has waited past
// TOLLGATE_SHED_QUEUE_WAIT_S is refused, with a Retry-After that grows with
// the excess; an API-only instance, which runs no workers, sheds on the
// same reading; and once the queue catches up, tasks are accepted again.
func TestTasksShedWhileTheQueueIsBehind(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{noWorkers: true, shedQueueWait: 30 * time.Second, shedSample: 10 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	e.tasks.StartListener(ctx)
	key := e.owner("acme", accounts.RoleClient, 1_000_000)
	queued := e.submit(key, "k1", taskBody("first", 16))

	// Nothing runs here: the task's job waits. Make it look two minutes late.
	if _, err := e.pool.Exec(ctx, `UPDATE river_job SET scheduled_at = now() - interval '2 minutes' WHERE state = 'available'`); err != nil {
		t.Fatal(err)
	}
	e.waitFor("the queue's wait read", func() bool { return e.tasks.QueueWait("default") > time.Minute })
	if e.tasks.QueueWait("backup") != 0 {
		t.Errorf("an empty queue's wait = %s, want 0", e.tasks.QueueWait("backup"))
	}

	r := e.post(key, "k2", taskBody("second", 16), nil)
	if r.status != http.StatusServiceUnavailable || r.problemCode(t) != "overloaded" {
		t.Fatalf("POST behind the queue = %d %s, want 503 overloaded", r.status, r.body)
	}
	// 120 s waited, 30 s allowed: 90 s over, capped at 30.
	if got := r.header.Get("Retry-After"); got != "30" {
		t.Errorf("Retry-After = %q, want 30", got)
	}
	if r := e.post(key, "k1", taskBody("first", 16), nil); r.status != http.StatusAccepted || r.task(t).ID != queued {
		t.Errorf("replay of the queued task = %d %s, want 202 with its task", r.status, r.body)
	}
	if got := shedCount(t, e, "queue"); got != 1 {
		t.Errorf("tollgate_tasks_shed_total{reason=queue} = %d, want 1", got)
	}

	if _, err := e.pool.Exec(ctx, `UPDATE river_job SET scheduled_at = now() WHERE state = 'available'`); err != nil {
		t.Fatal(err)
	}
	e.waitFor("the queue caught up", func() bool { return e.tasks.QueueWait("default") < 30*time.Second })
	e.submit(key, "k2", taskBody("second", 16))
	if n := e.scalar(`SELECT count(*) FROM tasks`); n != 2 {
		t.Errorf("tasks = %d, want 2", n)
	}
	e.checkInvariants()
}

// shedCount reads tollgate_tasks_shed_total{reason} from /metrics.
func shedCount(t *testing.T, e *env, reason string) int64 {
	t.Helper()
	res := e.do(http.MethodGet, "/metrics", "", nil, nil)
	m := regexp.MustCompile(`(?m)^tollgate_tasks_shed_total\{reason="` + reason + `"\} (\d+)$`).FindSubmatch(res.body)
	if m == nil {
		t.Fatalf("/metrics has no tollgate_tasks_shed_total{reason=%q}", reason)
	}
	n, _ := strconv.ParseInt(string(m[1]), 10, 64)
	return n
}
