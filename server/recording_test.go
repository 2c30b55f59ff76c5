package server_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/tollgate/tollgate/accounts"
	"github.com/tollgate/tollgate/provider/fake"
	"github.com/tollgate/tollgate/tasks"
)

// recordingFault installs, in e's database, a trigger that makes every
// settlement fail while armed: each insert of a usage record either raises
// a check violation (kind "constraint") or terminates its own backend, the
// client's connection lost mid-transaction (kind "terminate"). Real
// PostgreSQL errors, no mock. hits counts the faults raised (a sequence,
// so a rolled-back transaction still counts).
func recordingFault(t *testing.T, e *env, kind string) (disarm func(), hits func() int64) {
	t.Helper()
	_, err := e.pool.Exec(t.Context(), `
		CREATE TABLE test_fault (kind text NOT NULL);
		CREATE SEQUENCE test_fault_hits;
		CREATE FUNCTION test_fault() RETURNS trigger LANGUAGE plpgsql AS $$
		DECLARE k text;
		BEGIN
			SELECT f.kind INTO k FROM test_fault f;
			IF k IS NULL THEN
				RETURN NEW;
			END IF;
			PERFORM nextval('test_fault_hits');
			IF k = 'terminate' THEN
				PERFORM pg_terminate_backend(pg_backend_pid());
				PERFORM pg_sleep(10); -- interrupted by the termination
			END IF;
			RAISE EXCEPTION 'injected fault' USING ERRCODE = 'check_violation';
		END $$;
		CREATE TRIGGER test_fault BEFORE INSERT ON usage_records FOR EACH ROW EXECUTE FUNCTION test_fault();`)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.pool.Exec(t.Context(), `INSERT INTO test_fault VALUES ($1)`, kind); err != nil {
		t.Fatal(err)
	}
	disarm = func() {
		if _, err := e.pool.Exec(t.Context(), `DELETE FROM test_fault`); err != nil {
			t.Fatal(err)
		}
	}
	hits = func() int64 {
		return e.scalar(`SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM test_fault_hits`)
	}
	return disarm, hits
}

// theAnswer is the fake provider's one answer in these tests.
const theAnswer = "the original answer"

func originalAnswer() fake.Scripted {
	return fake.Scripted{Status: 200, Body: `{"id":"x","object":"chat.completion","created":1,"model":"test-model",` +
		`"choices":[{"index":0,"message":{"role":"assistant","content":"` + theAnswer + `"},"finish_reason":"stop"}],` +
		`"usage":{"prompt_tokens":6,"completion_tokens":3,"total_tokens":9}}`}
}

// When the transaction recording a succeeded call fails, whatever failed,
// the answer is not lost and the provider is not called again: the run
// keeps the answer, and the task's next run (River's retry of the job, or a
// run on arrival's safety net) records it. One provider call; the task
// succeeds with the original answer, settled at the reported usage, the
// reservation charged, the ledger consistent.
func TestFailedRecordingKeepsTheAnswer(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name      string
		fault     string
		queueOnly bool // a River run; else a run on arrival
	}{
		{"constraint error, River run", "constraint", true},
		{"constraint error, run on arrival", "constraint", false},
		{"lost connection, River run", "terminate", true},
		{"lost connection, run on arrival", "terminate", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, envOptions{queueOnly: c.queueOnly, recordWithin: 300 * time.Millisecond})
			key := e.owner("acme", accounts.RoleClient, 1_000_000)
			disarm, hits := recordingFault(t, e, c.fault)
			e.fake.Script(originalAnswer())
			id := e.submit(key, "k", taskBody("abcdefgh", 100))

			// The run that called has failed to record its outcome and
			// given up: River holds its error, or the run on arrival ended.
			if c.queueOnly {
				e.waitFor("the run's failure in river_job.errors", func() bool {
					return e.scalar(`SELECT COALESCE(max(cardinality(errors)), 0) FROM river_job WHERE args->>'task_id' = $1`, id) >= 1
				})
			} else {
				e.waitFor("the run on arrival to give up", func() bool {
					return e.fake.CallCount() == 1 && hits() > 0 && e.tasks.RunningOnArrival() == 0
				})
			}
			if hits() == 0 {
				t.Fatal("the fault never fired")
			}
			disarm()
			if !c.queueOnly {
				// Past the run's deadline, a sweep writes its net should
				// the run not have written it.
				if _, err := e.pool.Exec(t.Context(), `UPDATE budget_reservations SET created_at = now() - interval '1 hour' WHERE task_id = $1`, id); err != nil {
					t.Fatal(err)
				}
				if _, err := e.tasks.WriteSafetyNetsOnce(t.Context()); err != nil {
					t.Fatal(err)
				}
			}
			task := e.waitFinished(key, id)
			if n := e.fake.CallCount(); n != 1 {
				t.Errorf("provider calls = %d, want 1", n)
			}
			if task.Status != tasks.StatusSucceeded || task.Result == nil || task.Result.Output != theAnswer {
				t.Fatalf("task %s, result %+v, error %+v; want succeeded with the original answer", task.Status, task.Result, task.Error)
			}
			if task.Attempts != 1 || task.Result.Usage.Source != "reported" || task.Result.Usage.InputTokens != 6 || task.Result.Usage.OutputTokens != 3 {
				t.Errorf("attempts %d, usage %+v; want 1 attempt settled at the reported 6+3 tokens", task.Attempts, task.Result.Usage)
			}
			q := func(sql string) string { return fmt.Sprintf(sql, id) }
			e.expectScalars([]scalarCheck{
				{"journal: one succeeded attempt", q(`SELECT count(*) FROM task_attempts WHERE task_id = '%s' AND attempt = 1 AND state = 'succeeded'`), 1},
				{"journal entries", q(`SELECT count(*) FROM task_attempts WHERE task_id = '%s'`), 1},
				{"reservation settled", q(`SELECT count(*) FROM budget_reservations WHERE task_id = '%s' AND state = 'settled'`), 1},
				{"usage records at the reported cost", q(`SELECT count(*) FROM usage_records u JOIN tasks t ON t.id = u.task_id
					WHERE u.task_id = '%s' AND u.source = 'reported' AND u.cost_micros = (t.result->>'cost_micros')::bigint`), 1},
				{"spent equals the task's cost", q(`SELECT count(*) FROM budget_periods p, tasks t
					WHERE t.id = '%s' AND p.owner_id = t.owner_id AND p.workload = '' AND p.reserved_micros = 0
					  AND p.spent_micros = (t.result->>'cost_micros')::bigint`), 1},
				{"replay records", q(`SELECT count(*) FROM replay_records WHERE task_id = '%s'`), 1},
				{"kept answers left", `SELECT count(*) FROM task_kept_answers`, 0},
			})
			if c.queueOnly {
				// The failed run's entry, committed "sent" before its call,
				// is the one recorded, not taken for an interrupted call.
				e.expectScalars([]scalarCheck{{"attempts taken for interrupted calls",
					q(`SELECT count(*) FROM task_attempts WHERE task_id = '%s' AND error_code = 'interrupted'`), 0}})
			}
			e.checkInvariants()
		})
	}
}

// A task whose outcome was never recorded is not released uncharged by the
// reaper: a call journalled "sent" (by any run, a River run that failed
// while recording included) or an answer kept that cannot be opened may
// each have been charged, and the task is settled as possibly charged for
// its reservation; no kept answer outlives it. A River run that failed
// before calling left no entry, and the task is released.
func TestReaperNeverReleasesAPossibleCallUncharged(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		leave   string // SQL ($1 the task id) leaving the evidence
		charged bool
	}{
		{"journal entry still sent", `
			WITH a AS (INSERT INTO task_attempts (task_id, attempt, provider_key, model, idempotency_key)
			           VALUES ($1::uuid, 1, 'default', 'test-model', $1::text || ':1'))
			UPDATE tasks SET status = 'running', attempts = 1 WHERE id = $1::uuid`, true},
		{"River run failed while recording", `
			WITH a AS (INSERT INTO task_attempts (task_id, attempt, provider_key, model, idempotency_key)
			           VALUES ($1::uuid, 1, 'default', 'test-model', $1::text || ':1')),
			     t AS (UPDATE tasks SET status = 'running', attempts = 1 WHERE id = $1::uuid)
			UPDATE river_job SET attempt = 1, attempted_at = now(), state = 'retryable',
			       errors = ARRAY[jsonb_build_object('at', now(), 'attempt', 1, 'error', 'tasks: record outcome: conn closed', 'trace', '')]
			WHERE id = (SELECT job_id FROM tasks WHERE id = $1::uuid)`, true},
		{"answer kept", `
			INSERT INTO task_kept_answers (task_id, attempt, model, started_at, latency, answer_sealed)
			VALUES ($1::uuid, 1, 'test-model', now(), interval '1 second', '\x01')`, true},
		{"River run failed before calling", `
			UPDATE river_job SET attempt = 1, attempted_at = now(), state = 'retryable',
			       errors = ARRAY[jsonb_build_object('at', now(), 'attempt', 1, 'error', 'tasks: begin attempt: conn closed', 'trace', '')]
			WHERE id = (SELECT job_id FROM tasks WHERE id = $1::uuid)`, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, envOptions{noWorkers: true})
			key := e.owner("acme", accounts.RoleClient, 1_000_000)
			id := e.submit(key, "k", taskBody("abcdefgh", 100))
			if _, err := e.pool.Exec(t.Context(), c.leave, id); err != nil {
				t.Fatal(err)
			}
			// Its job lost, the task is long past its deadline.
			if _, err := e.pool.Exec(t.Context(), `UPDATE tasks SET deadline_at = now() - interval '1 hour' WHERE id = $1`, id); err != nil {
				t.Fatal(err)
			}
			if n, err := e.tasks.ReapOnce(t.Context()); err != nil || n != 1 {
				t.Fatalf("ReapOnce = %d, %v; want 1", n, err)
			}
			want := map[bool]string{true: "settled", false: "released"}[c.charged]
			if got := e.scalar(`SELECT count(*) FROM budget_reservations WHERE task_id = $1 AND state = $2`, id, want); got != 1 {
				t.Errorf("reservation not %s", want)
			}
			var wantCharged int64
			if c.charged {
				wantCharged = 1
			}
			if got := e.scalar(`SELECT count(*) FROM usage_records WHERE task_id = $1 AND source = 'possibly_charged'`, id); got != wantCharged {
				t.Errorf("possibly_charged usage records = %d, want %d", got, wantCharged)
			}
			task := e.waitFinished(key, id)
			if task.Status != tasks.StatusFailed {
				t.Errorf("task %s, want failed", task.Status)
			}
			if got := e.scalar(`SELECT count(*) FROM task_kept_answers`); got != 0 {
				t.Errorf("%d kept answers left, want none: settled with the task", got)
			}
			e.checkInvariants()
		})
	}
}

// An answer kept and never recorded is not thrown away by the reaper: when
// the task's job is lost, the reaper records the kept answer as the task's
// success, as a run of the task would, without a call: settled at the
// reported usage, the kept copy gone. A call left "sent" beside it is
// journalled ambiguous and the settlement counts it (possibly_charged, the
// reservation added).
func TestReaperRecordsAKeptAnswer(t *testing.T) {
	t.Parallel()
	// taskBody("abcdefgh", 100) reserves (2+4)×1 + 100×2 = 206 micros;
	// the answer's 6+3 tokens cost 6×1 + 3×2 = 12.
	const reserved, cost = 206, 12
	cases := []struct {
		name       string
		leave      string // SQL ($1 the task id, $2 the sealed answer) leaving the kept answer
		attempts   int64
		wantSource string
		wantCost   int64
	}{
		{"kept by a River run", `
			WITH a AS (INSERT INTO task_attempts (task_id, attempt, provider_key, model, idempotency_key)
			           VALUES ($1::uuid, 1, 'default', 'test-model', $1::text || ':1')),
			     k AS (INSERT INTO task_kept_answers (task_id, attempt, model, started_at, latency, answer_sealed)
			           VALUES ($1::uuid, 1, 'test-model', now(), interval '1 second', $2)),
			     t AS (UPDATE tasks SET status = 'running', attempts = 1 WHERE id = $1::uuid)
			UPDATE river_job SET attempt = 1, attempted_at = now(), state = 'retryable',
			       errors = ARRAY[jsonb_build_object('at', now(), 'attempt', 1, 'error', 'tasks: record outcome: conn closed', 'trace', '')]
			WHERE id = (SELECT job_id FROM tasks WHERE id = $1::uuid)`, 1, "reported", cost},
		{"kept by a run on arrival", `
			WITH a AS (INSERT INTO task_attempts (task_id, attempt, provider_key, model, idempotency_key)
			           VALUES ($1::uuid, 1, 'default', 'test-model', $1::text || ':1')),
			     k AS (INSERT INTO task_kept_answers (task_id, attempt, model, started_at, latency, answer_sealed)
			           VALUES ($1::uuid, 1, 'test-model', now(), interval '1 second', $2))
			UPDATE tasks SET status = 'running', attempts = 1 WHERE id = $1::uuid`, 1, "reported", cost},
		{"kept after a call left sent", `
			WITH a AS (INSERT INTO task_attempts (task_id, attempt, provider_key, model, idempotency_key)
			           VALUES ($1::uuid, 1, 'default', 'test-model', $1::text || ':1'), ($1::uuid, 2, 'default', 'test-model', $1::text || ':2')),
			     k AS (INSERT INTO task_kept_answers (task_id, attempt, model, started_at, latency, answer_sealed)
			           VALUES ($1::uuid, 2, 'test-model', now(), interval '1 second', $2))
			UPDATE tasks SET status = 'running', attempts = 2 WHERE id = $1::uuid`, 2, "possibly_charged", cost + reserved},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, envOptions{noWorkers: true})
			key := e.owner("acme", accounts.RoleClient, 1_000_000)
			id := e.submit(key, "k", taskBody("abcdefgh", 100))
			answer := `{"content":"` + theAnswer + `","finish_reason":"stop","status":200,"usage":{"input_tokens":6,"output_tokens":3}}`
			if _, err := e.pool.Exec(t.Context(), c.leave, id, testSealer(t).Seal([]byte(answer), []byte(id))); err != nil {
				t.Fatal(err)
			}
			// Its job lost, the task is long past its deadline.
			if _, err := e.pool.Exec(t.Context(), `UPDATE tasks SET deadline_at = now() - interval '1 hour' WHERE id = $1`, id); err != nil {
				t.Fatal(err)
			}
			if n, err := e.tasks.ReapOnce(t.Context()); err != nil || n != 1 {
				t.Fatalf("ReapOnce = %d, %v; want 1", n, err)
			}
			task := e.waitFinished(key, id)
			if task.Status != tasks.StatusSucceeded || task.Result == nil || task.Result.Output != theAnswer {
				t.Fatalf("task %s, result %+v, error %+v; want succeeded with the kept answer", task.Status, task.Result, task.Error)
			}
			if task.Result.CostMicros != c.wantCost || string(task.Result.Usage.Source) != c.wantSource {
				t.Errorf("cost %d, usage %+v; want %d, %s", task.Result.CostMicros, task.Result.Usage, c.wantCost, c.wantSource)
			}
			if n := e.fake.CallCount(); n != 0 {
				t.Errorf("provider calls = %d, want 0", n)
			}
			q := func(sql string) string { return fmt.Sprintf(sql, id) }
			e.expectScalars([]scalarCheck{
				{"journal: the kept attempt succeeded", q(`SELECT count(*) FROM task_attempts WHERE task_id = '%s' AND state = 'succeeded'`), 1},
				{"journal entries", q(`SELECT count(*) FROM task_attempts WHERE task_id = '%s'`), c.attempts},
				{"journal entries still sent", q(`SELECT count(*) FROM task_attempts WHERE task_id = '%s' AND state = 'sent'`), 0},
				{"reservation settled", q(`SELECT count(*) FROM budget_reservations WHERE task_id = '%s' AND state = 'settled'`), 1},
				{"usage records at the result's cost", q(`SELECT count(*) FROM usage_records u JOIN tasks t ON t.id = u.task_id
					WHERE u.task_id = '%s' AND u.source = '` + c.wantSource + `' AND u.cost_micros = ` + fmt.Sprint(c.wantCost) + `
					  AND u.charged_micros = u.cost_micros`), 1},
				{"spent", `SELECT spent_micros FROM budget_periods WHERE owner_id = 'acme'`, c.wantCost},
				{"kept answers left", `SELECT count(*) FROM task_kept_answers`, 0},
			})
			e.checkInvariants()
		})
	}
}

// When the reaper cannot record a kept answer (what failed the run's
// recording fails it again), the task is failed and settled as possibly
// charged, as for any call whose outcome was never recorded, the kept copy
// goes with it, and the reaper goes on to the next task.
func TestReaperFailsATaskWhoseKeptAnswerCannotBeRecorded(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{noWorkers: true})
	key := e.owner("acme", accounts.RoleClient, 1_000_000)
	// Every settlement at the reported usage fails; one as possibly
	// charged passes.
	_, err := e.pool.Exec(t.Context(), `
		CREATE FUNCTION test_fault() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			IF NEW.source = 'reported' THEN
				RAISE EXCEPTION 'injected fault' USING ERRCODE = 'check_violation';
			END IF;
			RETURN NEW;
		END $$;
		CREATE TRIGGER test_fault BEFORE INSERT ON usage_records FOR EACH ROW EXECUTE FUNCTION test_fault();`)
	if err != nil {
		t.Fatal(err)
	}
	ids := []string{e.submit(key, "k1", taskBody("abcdefgh", 100)), e.submit(key, "k2", taskBody("abcdefgh", 100))}
	answer := `{"content":"` + theAnswer + `","finish_reason":"stop","status":200,"usage":{"input_tokens":6,"output_tokens":3}}`
	for _, id := range ids {
		if _, err := e.pool.Exec(t.Context(), `
			WITH a AS (INSERT INTO task_attempts (task_id, attempt, provider_key, model, idempotency_key)
			           VALUES ($1::uuid, 1, 'default', 'test-model', $1::text || ':1')),
			     k AS (INSERT INTO task_kept_answers (task_id, attempt, model, started_at, latency, answer_sealed)
			           VALUES ($1::uuid, 1, 'test-model', now(), interval '1 second', $2)),
			     t AS (UPDATE tasks SET status = 'running', attempts = 1 WHERE id = $1::uuid)
			UPDATE river_job SET attempt = 1, attempted_at = now(), state = 'retryable',
			       errors = ARRAY[jsonb_build_object('at', now(), 'attempt', 1, 'error', 'tasks: record outcome: conn closed', 'trace', '')]
			WHERE id = (SELECT job_id FROM tasks WHERE id = $1::uuid)`, id, testSealer(t).Seal([]byte(answer), []byte(id))); err != nil {
			t.Fatal(err)
		}
		if _, err := e.pool.Exec(t.Context(), `UPDATE tasks SET deadline_at = now() - interval '1 hour' WHERE id = $1`, id); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := e.tasks.ReapOnce(t.Context()); err != nil || n != 2 {
		t.Fatalf("ReapOnce = %d, %v; want both tasks", n, err)
	}
	for _, id := range ids {
		if task := e.waitFinished(key, id); task.Status != tasks.StatusFailed {
			t.Errorf("task %s, want failed", task.Status)
		}
	}
	e.expectScalars([]scalarCheck{
		{"reservations settled", `SELECT count(*) FROM budget_reservations WHERE state = 'settled'`, 2},
		{"usage records possibly_charged", `SELECT count(*) FROM usage_records WHERE source = 'possibly_charged'`, 2},
		{"kept answers left", `SELECT count(*) FROM task_kept_answers`, 0},
	})
	e.checkInvariants()
}
