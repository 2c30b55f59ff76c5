package server_test

import (
	"context"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/tollgate/tollgate/accounts"
	"github.com/tollgate/tollgate/budget"
	"github.com/tollgate/tollgate/provider/fake"
	"github.com/tollgate/tollgate/tasks"
)

// A task's first attempt runs in the process that admitted it, without
// waiting for River: its job is only a safety net, dropped when the task
// succeeds on arrival, and made the next run when the attempt calls for
// another. With QueueOnly, every attempt waits for River.
func TestFirstAttemptRunsOnArrival(t *testing.T) {
	t.Parallel()
	const serverError = `{"error":{"message":"The server had an error while processing your request. Sorry about that!","type":"server_error","param":null,"code":null}}`
	cases := []struct {
		name        string
		queueOnly   bool
		script      []fake.Scripted
		wantArrival int64
		wantStates  []string
		wantJob     string // the task's River job at the end: "" for none left
	}{
		{"success on arrival drops the safety net", false, nil, 1, []string{"succeeded"}, ""},
		{"transient failure on arrival, retried by River", false, []fake.Scripted{{Status: 500, Body: serverError}}, 1,
			[]string{"failed", "succeeded"}, "completed"},
		{"queue only: River runs every attempt", true, nil, 0, []string{"succeeded"}, "completed"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, envOptions{queueOnly: c.queueOnly})
			key := e.owner("acme", accounts.RoleClient, 1_000_000)
			e.fake.Script(c.script...)
			task := e.waitFinished(key, e.submit(key, "k", taskBody("abcdefgh", 100)))
			if task.Status != tasks.StatusSucceeded {
				t.Fatalf("status %s, error %+v", task.Status, task.Error)
			}
			if n := e.fake.CallCount(); n != len(c.wantStates) {
				t.Errorf("provider calls = %d, want %d", n, len(c.wantStates))
			}
			if got := arrivalRuns(t, e); got != c.wantArrival {
				t.Errorf("tollgate_runs_on_arrival_total = %d, want %d", got, c.wantArrival)
			}
			var states []string
			rows, err := e.pool.Query(t.Context(), `SELECT state FROM task_attempts WHERE task_id = $1 ORDER BY attempt`, task.ID)
			if err != nil {
				t.Fatal(err)
			}
			for rows.Next() {
				var s string
				if err := rows.Scan(&s); err != nil {
					t.Fatal(err)
				}
				states = append(states, s)
			}
			if !slices.Equal(states, c.wantStates) {
				t.Errorf("journal %v, want %v", states, c.wantStates)
			}
			// River completes a job after Work returns, so wait for the
			// job's end rather than read it at once.
			jobState := func() string {
				var s string
				_ = e.pool.QueryRow(t.Context(), `SELECT state::text FROM river_job WHERE id = (SELECT job_id FROM tasks WHERE id = $1)`, task.ID).Scan(&s)
				return s
			}
			e.waitFor("the task's job to end as "+c.wantJob, func() bool { return jobState() == c.wantJob })
			e.checkInvariants()
		})
	}
}

// A process that dies mid-call on arrival leaves its task running, its
// attempt journalled "sent", and no River job: once the run has outlived
// its job timeout, a sweep (WriteSafetyNetsOnce, on any instance) writes the task's
// safety net, due at once, and another process finds the entry, counts
// that call as possibly made (ambiguous), repeats it once, and settles
// the task as possibly charged. Before that time no sweep touches it.
func TestRunOnArrivalWhoseProcessDiedIsFinishedByItsSafetyNet(t *testing.T) {
	t.Parallel()
	// The first process's call hangs for as long as its request timeout:
	// stuck mid-call, it is as good as dead for the test.
	e, key, id := stuckOnArrival(t)
	if got := e.do(http.MethodGet, "/v1/tasks/"+id, key, nil, nil).task(t).Status; got != tasks.StatusRunning {
		t.Errorf("admitted as %s, want running", got)
	}
	if n, err := e.tasks.WriteSafetyNetsOnce(t.Context()); err != nil || n != 0 {
		t.Errorf("WriteSafetyNetsOnce before the run's deadline = %d, %v; want 0", n, err)
	}
	e.expectScalars([]scalarCheck{
		{"journal entries sent before the call", `SELECT count(*) FROM task_attempts WHERE task_id = '` + id + `' AND state = 'sent' AND attempt = 1`, 1},
		{"jobs written for the run on arrival", `SELECT count(*) FROM river_job WHERE args->>'task_id' = '` + id + `'`, 0},
	})

	// The run outlives its deadline (its admission an hour ago), with
	// another instance running: a sweep writes its net.
	other := restartWorkers(t, e)
	if _, err := e.pool.Exec(t.Context(), `UPDATE budget_reservations SET created_at = now() - interval '1 hour' WHERE task_id = $1`, id); err != nil {
		t.Fatal(err)
	}
	if _, err := other.tasks.WriteSafetyNetsOnce(t.Context()); err != nil {
		t.Fatal(err)
	}
	task := other.waitFinished(key, id)
	if n := e.scalar(`SELECT count(*) FROM river_job WHERE args->>'task_id' = $1`, id); n != 1 {
		t.Errorf("%d jobs for the task, want its one net", n)
	}
	if task.Status != tasks.StatusSucceeded || task.Attempts != 2 {
		t.Fatalf("status %s after %d attempts, error %+v; want succeeded after 2", task.Status, task.Attempts, task.Error)
	}
	if task.Result == nil || task.Result.Usage.Source != "possibly_charged" {
		t.Errorf("result %+v, want usage labelled possibly_charged", task.Result)
	}
	// Either instance may run the net (the stuck one's workers are alive).
	if n := e.fake.CallCount() + other.fake.CallCount(); n != 2 {
		t.Errorf("%d provider calls, want 2 (the stuck one and its repeat)", n)
	}
	e.expectScalars([]scalarCheck{
		{"first attempt ambiguous", `SELECT count(*) FROM task_attempts WHERE task_id = '` + id + `' AND attempt = 1 AND state = 'ambiguous'`, 1},
		{"second attempt succeeded", `SELECT count(*) FROM task_attempts WHERE task_id = '` + id + `' AND attempt = 2 AND state = 'succeeded'`, 1},
	})
	e.checkInvariants()
	// The stuck call ends; its late outcome changes nothing.
	e.fake.Close()
	e.waitFor("the stuck run to finish", func() bool { return e.tasks.RunningOnArrival() == 0 })
	if got := e.do(http.MethodGet, "/v1/tasks/"+id, key, nil, nil).task(t); got.Status != tasks.StatusSucceeded || got.Attempts != 2 {
		t.Errorf("after the late outcome: %s after %d attempts", got.Status, got.Attempts)
	}
	e.checkInvariants()
}

// stuckOnArrival is a server whose one task is mid-call on arrival, its
// call hanging for up to the request timeout (a minute); with the owner's
// key and the task's id.
func stuckOnArrival(t *testing.T) (e *env, key, id string) {
	t.Helper()
	e = newEnv(t, envOptions{requestTimeout: time.Minute})
	key = e.owner("acme", accounts.RoleClient, 1_000_000)
	e.fake.Script(fake.Scripted{Hang: true})
	id = e.submit(key, "k", taskBody("abcdefgh", 100))
	e.waitFor("the call on arrival to start", func() bool { return e.fake.CallCount() == 1 })
	return e, key, id
}

var arrivalMetric = regexp.MustCompile(`(?m)^tollgate_runs_on_arrival_total (\d+)$`)

// arrivalRuns reads tollgate_runs_on_arrival_total from /metrics.
func arrivalRuns(t *testing.T, e *env) int64 {
	t.Helper()
	res := e.do(http.MethodGet, "/metrics", "", nil, nil)
	m := arrivalMetric.FindSubmatch(res.body)
	if m == nil {
		t.Fatalf("/metrics has no tollgate_runs_on_arrival_total")
	}
	n, _ := strconv.ParseInt(string(m[1]), 10, 64)
	return n
}

// A drain that times out cancels the calls of runs on arrival like River's
// jobs: each is recorded as ambiguous (it may have reached the provider),
// its task goes back to the queue, and another instance repeats it once.
func TestDrainHandsRunsOnArrivalBackToTheQueue(t *testing.T) {
	t.Parallel()
	e, key, id := stuckOnArrival(t)
	drain, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	_ = e.tasks.Stop(drain) // the drain's end is the point: its error says it timed out
	if n := e.tasks.RunningOnArrival(); n != 0 {
		t.Fatalf("%d runs on arrival still running after Stop", n)
	}
	e.expectScalars([]scalarCheck{
		{"interrupted call journalled ambiguous", `SELECT count(*) FROM task_attempts WHERE task_id = '` + id + `' AND attempt = 1 AND state = 'ambiguous'`, 1},
		{"task back in the queue", `SELECT count(*) FROM tasks WHERE id = '` + id + `' AND status = 'queued'`, 1},
		{"its job due again", `SELECT count(*) FROM river_job WHERE id = (SELECT job_id FROM tasks WHERE id = '` + id + `') AND state = 'available'`, 1},
	})

	other := restartWorkers(t, e)
	task := other.waitFinished(key, id)
	if task.Status != tasks.StatusSucceeded || task.Attempts != 2 {
		t.Fatalf("status %s after %d attempts; want succeeded after 2", task.Status, task.Attempts)
	}
	e.checkInvariants()
}

// TestArrivalSuccessAfterItsAttemptWasCountedAmbiguous: while a run on
// arrival's call is in flight, its journal entry is marked ambiguous, as
// its safety net does when it finds the entry "sent" after this process
// stalled. When the call then succeeds, the one-round-trip record (which
// assumes no ambiguous attempt) must not commit; the task is recorded
// on the ordinary path, whose settlement counts the ambiguous attempt:
// labelled possibly_charged, at the call's cost plus the reservation it
// may have spent, so finance sees an upper bound rather than a silent
// undercount.
func TestArrivalSuccessAfterItsAttemptWasCountedAmbiguous(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	key := e.owner("acme", accounts.RoleClient, 1_000_000)
	e.fake.Script(fakeDelay(300))
	id := e.submit(key, "k", taskBody("abcdefgh", 100))
	e.waitFor("call in flight", func() bool { return e.fake.CallCount() == 1 })
	tag, err := e.pool.Exec(t.Context(), `
		UPDATE task_attempts SET state = 'ambiguous', class = 'ambiguous', error_code = 'interrupted', finished_at = now()
		WHERE task_id = $1 AND attempt = 1 AND state = 'sent'`, id)
	if err != nil || tag.RowsAffected() != 1 {
		t.Fatalf("mark the attempt ambiguous: %v (%d rows); want the run on arrival's entry, sent", err, tag.RowsAffected())
	}
	task := e.waitFinished(key, id)
	if task.Status != tasks.StatusSucceeded || task.Result == nil {
		t.Fatalf("task = %s %+v, want succeeded", task.Status, task.Error)
	}
	reserved := e.scalar(`SELECT reserved_micros FROM tasks WHERE id = $1`, id)
	if task.Result.Usage.Source != budget.SourcePossiblyCharged || task.Result.CostMicros <= reserved {
		t.Errorf("result usage %s at %d micros, want %s above the reservation (%d)",
			task.Result.Usage.Source, task.Result.CostMicros, budget.SourcePossiblyCharged, reserved)
	}
	e.expectScalars([]scalarCheck{
		{"usage rows labelled possibly_charged, at the result's cost", `SELECT count(*) FROM usage_records
			WHERE task_id = '` + id + `' AND source = 'possibly_charged' AND cost_micros = ` + strconv.FormatInt(task.Result.CostMicros, 10), 1},
	})
	e.checkInvariants()
}

// TestArrivalRetryReusesANetWrittenBySweep: a run on arrival outlives its
// deadline (its process stalled), so a sweep writes its net; the run then
// fails with a retryable error. Its retry must move that net, not write a
// second job for the task (two jobs would run the task twice). So that no
// worker runs the net meanwhile, the test journals the call under a
// provider key no queue of this server serves: the sweep queues the net
// there, where it stays.
func TestArrivalRetryReusesANetWrittenBySweep(t *testing.T) {
	t.Parallel()
	const serverError = `{"error":{"message":"The server had an error while processing your request. Sorry about that!","type":"server_error","param":null,"code":null}}`
	e := newEnv(t, envOptions{})
	key := e.owner("acme", accounts.RoleClient, 1_000_000)
	e.fake.Script(fake.Scripted{DelayMS: 1000, Status: 500, Body: serverError})
	id := e.submit(key, "k", taskBody("abcdefgh", 100))
	e.waitFor("call in flight", func() bool { return e.fake.CallCount() == 1 })
	for _, sql := range []string{
		`UPDATE task_attempts SET provider_key = 'parked' WHERE task_id = $1`,
		`UPDATE budget_reservations SET created_at = now() - interval '1 hour' WHERE task_id = $1`,
	} {
		if _, err := e.pool.Exec(t.Context(), sql, id); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := e.tasks.WriteSafetyNetsOnce(t.Context()); err != nil || n != 1 {
		t.Fatalf("WriteSafetyNetsOnce = %d, %v; want the stalled run's net", n, err)
	}
	net := e.scalar(`SELECT job_id FROM tasks WHERE id = $1`, id)
	e.waitFor("the run's failure recorded", func() bool {
		return e.scalar(`SELECT count(*) FROM task_attempts WHERE task_id = $1 AND attempt = 1 AND state = 'failed'`, id) == 1
	})
	e.expectScalars([]scalarCheck{
		{"jobs for the task", `SELECT count(*) FROM river_job WHERE args->>'task_id' = '` + id + `'`, 1},
		{"the task's job is still the net", `SELECT job_id FROM tasks WHERE id = '` + id + `'`, net},
		{"the net due again, as the retry", `SELECT count(*) FROM river_job WHERE id = ` + strconv.FormatInt(net, 10) + ` AND state = 'available'`, 1},
		{"the task back in the queue", `SELECT count(*) FROM tasks WHERE id = '` + id + `' AND status = 'queued'`, 1},
	})
	e.checkInvariants()
}
