package server_test

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/accounts"
	"github.com/tollgate/tollgate/gate"
	"github.com/tollgate/tollgate/provider/fake"
	"github.com/tollgate/tollgate/tasks"
)

// Each provider failure class gets its own reaction, and whatever the
// outcome the budget is settled or released and the journal explains every
// provider call.
func TestProviderFailuresAreClassifiedAndHandled(t *testing.T) {
	t.Parallel()
	const (
		serverError     = `{"error":{"message":"The server had an error while processing your request. Sorry about that!","type":"server_error","param":null,"code":null}}`
		rateLimited     = `{"error":{"message":"Rate limit reached for test-model on requests per min. Please try again in 20ms.","type":"requests","param":null,"code":"rate_limit_exceeded"}}`
		contextTooLong  = `{"error":{"message":"This model's maximum context length is 4097 tokens. However, your messages resulted in 4294 tokens.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`
		emptyCompletion = `{"id":"x","object":"chat.completion","created":1,"model":"test-model","choices":[{"index":0,"message":{"role":"assistant","content":""},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":0,"total_tokens":1}}`
	)
	cases := []struct {
		name         string
		script       []fake.Scripted
		maxAttempts  int
		wantStatus   tasks.Status
		wantCode     string
		wantClass    string
		wantAttempts int
		wantStates   []string
	}{
		{"500 then success retries", []fake.Scripted{{Status: 500, Body: serverError}}, 3,
			tasks.StatusSucceeded, "", "", 2, []string{"failed", "succeeded"}},
		{"429 with Retry-After pauses then succeeds", []fake.Scripted{{Status: 429, Headers: map[string]string{"Retry-After": "0"}, Body: rateLimited}}, 3,
			tasks.StatusSucceeded, "", "", 2, []string{"failed", "succeeded"}},
		{"context too long is rejected after one call", []fake.Scripted{{Status: 400, Body: contextTooLong}}, 3,
			tasks.StatusFailed, "model_incompatible", "rejected", 1, []string{"failed"}},
		{"empty output is retried", []fake.Scripted{{Status: 200, Body: emptyCompletion}}, 3,
			tasks.StatusSucceeded, "", "", 2, []string{"failed", "succeeded"}},
		{"malformed output is retried", []fake.Scripted{{Status: 200, Body: `{"choices": [`}}, 3,
			tasks.StatusSucceeded, "", "", 2, []string{"failed", "succeeded"}},
		{"500 four times stops at the attempt limit", []fake.Scripted{
			{Status: 500, Body: serverError}, {Status: 503, Body: serverError}, {Status: 500, Body: serverError}, {Status: 502, Body: serverError}}, 4,
			tasks.StatusFailed, "model_temporarily_unavailable", "transient", 4, []string{"failed", "failed", "failed", "failed"}},
		{"empty output at the attempt limit is an output failure", []fake.Scripted{
			{Status: 200, Body: emptyCompletion}, {Status: 200, Body: emptyCompletion}}, 2,
			tasks.StatusFailed, "incompatible_model_response", "transient", 2, []string{"failed", "failed"}},
		{"hang after reading the body is ambiguous and repeated once", []fake.Scripted{{Hang: true}}, 3,
			tasks.StatusSucceeded, "", "", 2, []string{"ambiguous", "succeeded"}},
		{"a second ambiguous attempt is not repeated", []fake.Scripted{{Hang: true}, {Hang: true}}, 4,
			tasks.StatusFailed, "possibly_executed", "ambiguous", 2, []string{"ambiguous", "ambiguous"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, envOptions{maxAttempts: c.maxAttempts, requestTimeout: 300 * time.Millisecond})
			key := e.owner("acme", accounts.RoleClient, 1_000_000)
			e.fake.Script(c.script...)
			task := e.waitFinished(key, e.submit(key, "k", taskBody("abcdefgh", 100)))
			if task.Status != c.wantStatus || task.Attempts != c.wantAttempts {
				t.Fatalf("status=%s attempts=%d error=%+v; want %s after %d", task.Status, task.Attempts, task.Error, c.wantStatus, c.wantAttempts)
			}
			if c.wantCode != "" {
				if task.Error == nil || task.Error.Code != c.wantCode || task.Error.Class != c.wantClass {
					t.Errorf("error = %+v, want code %s class %s", task.Error, c.wantCode, c.wantClass)
				}
			}
			if n := e.fake.CallCount(); n != c.wantAttempts {
				t.Errorf("provider calls = %d, want %d", n, c.wantAttempts)
			}
			rows, err := e.pool.Query(t.Context(), `SELECT state FROM task_attempts WHERE task_id = $1 ORDER BY attempt`, task.ID)
			if err != nil {
				t.Fatal(err)
			}
			var states []string
			for rows.Next() {
				var s string
				_ = rows.Scan(&s)
				states = append(states, s)
			}
			if len(states) != len(c.wantStates) {
				t.Fatalf("journal states = %v, want %v", states, c.wantStates)
			}
			for i := range states {
				if states[i] != c.wantStates[i] {
					t.Errorf("journal states = %v, want %v", states, c.wantStates)
					break
				}
			}
			ambiguous := e.scalar(`SELECT count(*) FROM task_attempts WHERE task_id = $1 AND state = 'ambiguous'`, task.ID)
			wantReservation := "settled"
			if task.Status == tasks.StatusFailed && ambiguous == 0 {
				wantReservation = "released"
			}
			if got := e.scalar(`SELECT count(*) FROM budget_reservations WHERE task_id = $1 AND state = $2`, task.ID, wantReservation); got != 1 {
				t.Errorf("reservation not %s", wantReservation)
			}
			if ambiguous > 0 {
				if got := e.scalar(`SELECT count(*) FROM usage_records WHERE task_id = $1 AND source = 'possibly_charged'`, task.ID); got != 1 {
					t.Errorf("a task with ambiguous attempts was not settled as possibly_charged")
				}
			}
			e.checkInvariants()
		})
	}
}

// A worker that dies mid-call leaves its journal entry "sent". The next run
// must count it as an ambiguous attempt instead of silently repeating it.
func TestInterruptedAttemptIsRecordedAsAmbiguous(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{noWorkers: true})
	key := e.owner("acme", accounts.RoleClient, 1_000_000)
	r := e.post(key, "k", taskBody("abcdefgh", 100), nil)
	id := r.task(t).ID
	// Simulate a process killed after committing attempt 1 but before
	// recording its outcome.
	_, err := e.pool.Exec(t.Context(), `
		WITH a AS (INSERT INTO task_attempts (task_id, attempt, provider_key, model, idempotency_key) VALUES ($1::uuid, 1, 'default', 'test-model', $1::text || ':1'))
		UPDATE tasks SET status = 'running', attempts = 1 WHERE id = $1::uuid`, id)
	if err != nil {
		t.Fatal(err)
	}
	e2 := restartWorkers(t, e)
	task := e2.waitFinished(key, id)
	if task.Status != tasks.StatusSucceeded || task.Attempts != 2 {
		t.Fatalf("task = %s after %d attempts, want succeeded after 2", task.Status, task.Attempts)
	}
	if got := e.scalar(`SELECT count(*) FROM task_attempts WHERE task_id = $1 AND state = 'ambiguous' AND error_code = 'interrupted'`, id); got != 1 {
		t.Errorf("ambiguous journal entries = %d, want 1", got)
	}
	if got := e.scalar(`SELECT count(*) FROM replay_records WHERE task_id = $1`, id); got != 2 {
		t.Errorf("replay records = %d, want 2 (the interrupted attempt and the successful one)", got)
	}
	if calls := e2.fake.Calls(); len(calls) != 1 || calls[0].IdempotencyKey != id+":2" {
		t.Errorf("provider calls = %+v, want one with key %s:2", calls, id)
	}
	e.checkInvariants()
}

// A River run commits its journal entry "sent" before its call, as every
// run does; one that died mid-call (killed and rescued) or failed while
// recording leaves the entry so, whatever River's job row says. Such a
// call is counted as an ambiguous attempt before the call is repeated; a
// run that failed before calling left no entry, and is not.
func TestRiverRunThatDiedIsJournalledAsAmbiguous(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name          string
		errorText     string
		sent          bool // the run got as far as its call
		wantAmbiguous int64
		wantAttempts  int64
	}{
		{"killed mid-call and rescued", "Stuck job rescued by JobRescuer", true, 1, 2},
		{"recording the outcome failed", "tasks: record outcome: conn closed", true, 1, 2},
		{"failed before calling", "tasks: begin attempt: conn closed", false, 0, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, envOptions{noWorkers: true})
			key := e.owner("acme", accounts.RoleClient, 1_000_000)
			id := e.post(key, "k", taskBody("abcdefgh", 100), nil).task(t).ID
			// What run 1 leaves after it ended that way: River's attempt
			// counter and the run's error entry and, if it got as far as
			// its call, the journal entry it committed "sent" before it.
			_, err := e.pool.Exec(t.Context(), `
				UPDATE river_job SET attempt = 1, attempted_at = now(), state = 'available',
				       errors = ARRAY[jsonb_build_object('at', now(), 'attempt', 1, 'error', $2::text, 'trace', '')]
				WHERE id = (SELECT job_id FROM tasks WHERE id = $1::uuid)`, id, tc.errorText)
			if err != nil {
				t.Fatal(err)
			}
			if tc.sent {
				_, err := e.pool.Exec(t.Context(), `
					WITH a AS (INSERT INTO task_attempts (task_id, attempt, provider_key, model, idempotency_key)
					           VALUES ($1::uuid, 1, 'default', 'test-model', $1::text || ':1'))
					UPDATE tasks SET status = 'running', attempts = 1 WHERE id = $1::uuid`, id)
				if err != nil {
					t.Fatal(err)
				}
			}
			e2 := restartWorkers(t, e)
			task := e2.waitFinished(key, id)
			if task.Status != tasks.StatusSucceeded || int64(task.Attempts) != tc.wantAttempts {
				t.Fatalf("task = %s after %d attempts, want succeeded after %d", task.Status, task.Attempts, tc.wantAttempts)
			}
			if got := e.scalar(`SELECT count(*) FROM task_attempts WHERE task_id = $1 AND state = 'ambiguous' AND error_code = 'interrupted' AND attempt = 1`, id); got != tc.wantAmbiguous {
				t.Errorf("interrupted journal entries = %d, want %d", got, tc.wantAmbiguous)
			}
			if got := e.scalar(`SELECT count(*) FROM replay_records WHERE task_id = $1`, id); got != tc.wantAttempts {
				t.Errorf("replay records = %d, want %d", got, tc.wantAttempts)
			}
			wantKey := fmt.Sprintf("%s:%d", id, tc.wantAttempts)
			if calls := e2.fake.Calls(); len(calls) != 1 || calls[0].IdempotencyKey != wantKey {
				t.Errorf("provider calls = %+v, want one with key %s", calls, wantKey)
			}
			if tc.wantAmbiguous > 0 {
				if got := e.scalar(`SELECT count(*) FROM usage_records WHERE task_id = $1 AND source = 'possibly_charged'`, id); got != 1 {
					t.Errorf("a task after an interrupted run was not settled as possibly_charged")
				}
			}
			e.checkInvariants()
		})
	}
}

// An exhausted account opens the provider key's breaker: queued tasks wait
// without calling the provider, one probe closes the breaker when the
// account works again, and the queue drains.
func TestExhaustedAccountOpensTheBreakerAndAProbeClosesIt(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{probeEvery: time.Hour, maxSnooze: 20 * time.Millisecond})
	key := e.owner("acme", accounts.RoleClient, 1_000_000)
	e.fake.Script(fake.Scripted{Status: 400, Body: `{"type":"error","error":{"type":"invalid_request_error","message":"Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing to upgrade or purchase credits."}}`})

	first := e.post(key, "first", taskBody("abcdefgh", 100), nil).task(t)
	e.waitFor("breaker open", func() bool {
		return e.scalar(`SELECT count(*) FROM provider_keys WHERE key = 'default' AND state = 'open'`) == 1
	})
	var ids []string
	for i := range 10 {
		ids = append(ids, e.post(key, fmt.Sprintf("queued-%d", i), taskBody("abcdefgh", 100), nil).task(t).ID)
	}
	// Every queued task has been looked at by a worker, and waits.
	e.waitFor("all tasks waiting on the breaker", func() bool {
		return e.scalar(`SELECT count(*) FROM tasks WHERE status = 'queued' AND error->>'class' = 'exhausted'`) == 11
	})
	if n := e.fake.CallCount(); n != 1 {
		t.Fatalf("provider calls while the breaker is open = %d, want 1", n)
	}
	r := e.do(http.MethodGet, "/v1/tasks/"+first.ID, key, nil, nil).task(t)
	if r.Status != tasks.StatusQueued || r.Error == nil || r.Error.Code != "model_quota_exhausted" {
		t.Errorf("waiting task = %s %+v, want queued with model_quota_exhausted", r.Status, r.Error)
	}

	// The account is topped up (the fake answers successes again); an
	// operator brings the probe forward instead of waiting an hour.
	if err := gate.NewStore(e.pool).ProbeNow(t.Context(), "default"); err != nil {
		t.Fatal(err)
	}
	for _, id := range append(ids, first.ID) {
		if task := e.waitFinished(key, id); task.Status != tasks.StatusSucceeded {
			t.Errorf("task %s = %s %+v after the breaker closed, want succeeded", id, task.Status, task.Error)
		}
	}
	if n := e.fake.CallCount(); n != 12 {
		t.Errorf("provider calls = %d, want 12 (1 failure, the probe, 10 more)", n)
	}
	if got := e.scalar(`SELECT count(*) FROM provider_keys WHERE state = 'closed'`); got != 1 {
		t.Errorf("breaker not closed after the probe succeeded")
	}
	e.checkInvariants()
}

// A 429 with Retry-After pauses the whole provider key: no call on that key
// goes out before the pause ends, and the throttled attempt is not counted.
func TestThrottlePausesTheWholeKey(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{maxAttempts: 1, retryMax: 5 * time.Second})
	key := e.owner("acme", accounts.RoleClient, 1_000_000)
	e.fake.Script(fake.Scripted{Status: 429, Headers: map[string]string{"Retry-After": "1"},
		Body: `{"error":{"message":"Rate limit reached for requests","type":"requests","param":null,"code":"rate_limit_exceeded"}}`})

	first := e.post(key, "first", taskBody("abcdefgh", 100), nil).task(t)
	e.waitFor("key paused", func() bool {
		return e.scalar(`SELECT count(*) FROM provider_keys WHERE state = 'paused'`) == 1
	})
	var pausedUntil time.Time
	if err := e.pool.QueryRow(t.Context(), `SELECT paused_until FROM provider_keys`).Scan(&pausedUntil); err != nil {
		t.Fatal(err)
	}
	second := e.post(key, "second", taskBody("abcdefgh", 100), nil).task(t)
	for _, id := range []string{first.ID, second.ID} {
		task := e.waitFinished(key, id)
		// One counted attempt allowed, yet the throttled task succeeds: the
		// throttled call did not use it up.
		if task.Status != tasks.StatusSucceeded {
			t.Errorf("task %s = %s %+v, want succeeded", id, task.Status, task.Error)
		}
	}
	calls := e.fake.Calls()
	if len(calls) != 3 {
		t.Fatalf("provider calls = %d, want 3", len(calls))
	}
	for _, c := range calls[1:] {
		if c.ReceivedAt.Before(pausedUntil) {
			t.Errorf("a call at %s went out before the pause ended at %s", c.ReceivedAt, pausedUntil)
		}
	}
	e.checkInvariants()
}

func TestDeadlineFailsAWaitingTaskAndReleasesItsReservation(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{probeEvery: time.Hour, maxSnooze: 20 * time.Millisecond})
	key := e.owner("acme", accounts.RoleClient, 1_000_000)
	e.fake.Script(fake.Scripted{Status: 429, Body: `{"error":{"message":"You exceeded your current quota, please check your plan and billing details.","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}`})
	body := []byte(`{"model":"test-model","messages":[{"role":"user","content":"abcdefgh"}],"max_tokens":100,"deadline_s":1}`)
	task := e.waitFinished(key, e.submit(key, "k", body))
	if task.Status != tasks.StatusFailed || task.Error == nil || task.Error.Code != "model_quota_exhausted" {
		t.Fatalf("task = %s %+v, want failed model_quota_exhausted at its deadline", task.Status, task.Error)
	}
	if n := e.fake.CallCount(); n != 1 {
		t.Errorf("provider calls = %d, want 1", n)
	}
	e.checkInvariants()
}

// A provider's redirect is refused and opens the key's breaker as an
// exhausted account does, but the task says the provider redirected, not
// that its quota is gone: while it waits, and when its deadline fails it.
func TestProviderRedirectIsNotQuotaExhausted(t *testing.T) {
	t.Parallel()
	for _, status := range []int{301, 302, 303, 307, 308} {
		t.Run(strconv.Itoa(status), func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, envOptions{probeEvery: time.Hour, maxSnooze: 20 * time.Millisecond})
			key := e.owner("acme", accounts.RoleClient, 1_000_000)
			e.fake.Script(fake.Scripted{Status: status, Headers: map[string]string{"Location": "https://elsewhere.example/v1/chat/completions"},
				Body: `{"error":{"message":"You exceeded your current quota","type":"insufficient_quota","code":"insufficient_quota"}}`})
			body := []byte(`{"model":"test-model","messages":[{"role":"user","content":"abcdefgh"}],"max_tokens":100,"deadline_s":2}`)
			id := e.submit(key, "k", body)
			e.waitFor("breaker open", func() bool {
				return e.scalar(`SELECT count(*) FROM provider_keys WHERE key = 'default' AND state = 'open' AND reason_code = 'redirect_refused'`) == 1
			})
			e.waitFor("the task waiting on the breaker", func() bool {
				return e.scalar(`SELECT count(*) FROM tasks WHERE status = 'queued' AND error->>'code' = 'provider_redirected'`) == 1
			})
			waiting := e.do(http.MethodGet, "/v1/tasks/"+id, key, nil, nil).task(t)
			checkRedirected(t, "waiting", waiting.Error, "Waiting: ")
			task := e.waitFinished(key, id)
			if task.Status != tasks.StatusFailed {
				t.Fatalf("task = %s %+v, want failed at its deadline", task.Status, task.Error)
			}
			checkRedirected(t, "failed", task.Error, "")
			if n := e.fake.CallCount(); n != 1 {
				t.Errorf("provider calls = %d, want 1", n)
			}
			e.checkInvariants()
		})
	}
}

// checkRedirected checks a task's error says the provider redirected.
func checkRedirected(t *testing.T, when string, f *tasks.Failure, prefix string) {
	t.Helper()
	if f == nil || f.Code != tasks.CodeProviderRedirected || f.Class != "exhausted" || f.Retryable ||
		!strings.HasPrefix(f.Message, prefix+"The model provider redirected the call, and it was refused") || strings.Contains(f.Message, "quota") {
		t.Errorf("%s: error = %+v, want provider_redirected (class exhausted, not retryable) saying the provider redirected, nothing of quota", when, f)
	}
}

// When a model's attempts are used up, the task moves to the next model of
// its chain that fits the request — here on another provider key, in
// another wire format — skipping one whose context window is too small.
func TestFallbackChainSkipsModelsThatDoNotFit(t *testing.T) {
	t.Parallel()
	serverError := fake.Scripted{Status: 500, Body: `{"error":{"message":"boom","type":"server_error","param":null,"code":null}}`}
	outOfCredit := fake.Scripted{Status: 429, Body: `{"error":{"message":"You exceeded your current quota, please check your plan and billing details.","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}`}
	cases := []struct {
		name      string
		script    []fake.Scripted
		wantCalls int
	}{
		{"transient failures use up the primary", []fake.Scripted{serverError, serverError, serverError, serverError}, 5},
		{"an exhausted primary falls back at once", []fake.Scripted{outOfCredit}, 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, envOptions{maxAttempts: 4, probeEvery: time.Hour})
			key := e.owner("acme", accounts.RoleClient, 1_000_000)
			e.fake.Script(c.script...)
			body := []byte(`{"model":"chain-model","messages":[{"role":"user","content":"abcdefgh"}],"max_tokens":100}`)
			r := e.post(key, "k", body, nil)
			created := r.task(t)
			// The reservation covers the dearest model that may run it:
			// backup-model at 3 and 4 micros a token, 6*3 + 100*4.
			if created.ReservedMicros != 418 {
				t.Errorf("reserved_micros = %d, want 418 (the chain's dearest fitting model)", created.ReservedMicros)
			}
			task := e.waitFinished(key, created.ID)
			if task.Status != tasks.StatusSucceeded || task.Model != "backup-model" || task.Result.Model != "backup-model" {
				t.Fatalf("task = %s on %s %+v, want succeeded on backup-model", task.Status, task.Model, task.Error)
			}
			calls := e.fake.Calls()
			if len(calls) != c.wantCalls {
				t.Fatalf("provider calls = %d, want %d", len(calls), c.wantCalls)
			}
			if last := calls[len(calls)-1]; last.Model != "claude-test" {
				t.Errorf("last call went to model %q, want the backup's provider model claude-test", last.Model)
			}
			if got := e.scalar(`SELECT count(*) FROM task_attempts WHERE task_id = $1 AND model = 'small-backup'`, task.ID); got != 0 {
				t.Errorf("small-backup, whose context window is too small, was tried %d times", got)
			}
			e.checkInvariants()
		})
	}
}

func TestUnknownModelIsRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{noWorkers: true})
	key := e.owner("acme", accounts.RoleClient, 1_000_000)
	r := e.post(key, "k", []byte(`{"model":"no-such-model","messages":[{"role":"user","content":"x"}]}`), nil)
	if r.status != http.StatusBadRequest || r.problemCode(t) != "invalid_request" {
		t.Fatalf("%d %s, want 400 invalid_request", r.status, r.body)
	}
}

// A breaker opened by one instance stops the others: two services with
// their own workers and providers on one database.
func TestBreakerOpenedByOneInstanceStopsTheOthers(t *testing.T) {
	t.Parallel()
	a := newEnv(t, envOptions{probeEvery: time.Hour, maxSnooze: 20 * time.Millisecond})
	key := a.owner("acme", accounts.RoleClient, 1_000_000)
	a.fake.Script(fake.Scripted{Status: 429, Body: `{"error":{"message":"You exceeded your current quota","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}`})
	a.post(key, "first", taskBody("abcdefgh", 100), nil)
	a.waitFor("breaker open", func() bool {
		return a.scalar(`SELECT count(*) FROM provider_keys WHERE key = 'default' AND state = 'open'`) == 1
	})
	b := newEnv(t, envOptions{pool: a.pool, probeEvery: time.Hour, maxSnooze: 20 * time.Millisecond})
	r := b.post(key, "second", taskBody("abcdefgh", 100), nil)
	b.waitFor("the second instance holds its task behind the breaker", func() bool {
		return b.scalar(`SELECT count(*) FROM tasks WHERE id = $1 AND error->>'class' = 'exhausted'`, r.task(t).ID) == 1
	})
	// Whichever instance's worker picked the task up, neither called out.
	if na, nb := a.fake.CallCount(), b.fake.CallCount(); na != 1 || nb != 0 {
		t.Errorf("provider calls while the breaker was open: first instance %d (want 1, the one that opened it), second %d (want 0)", na, nb)
	}
}
