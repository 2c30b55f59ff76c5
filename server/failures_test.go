package server_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/tollgate/tollgate/accounts"
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
		outOfCredit     = `{"error":{"message":"You exceeded your current quota, please check your plan and billing details.","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}`
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
		{"out of credit is final", []fake.Scripted{{Status: 429, Body: outOfCredit}}, 3,
			tasks.StatusFailed, "provider_exhausted", "exhausted", 1, []string{"failed"}},
		{"400 out of credit is final", []fake.Scripted{{Status: 400, Body: `{"error":{"message":"Your credit balance is too low to access the API.","type":"invalid_request_error","code":"insufficient_quota"}}`}}, 3,
			tasks.StatusFailed, "provider_exhausted", "exhausted", 1, []string{"failed"}},
		{"context too long is rejected", []fake.Scripted{{Status: 400, Body: contextTooLong}}, 3,
			tasks.StatusFailed, "provider_rejected", "rejected", 1, []string{"failed"}},
		{"empty output is retried", []fake.Scripted{{Status: 200, Body: emptyCompletion}}, 3,
			tasks.StatusSucceeded, "", "", 2, []string{"failed", "succeeded"}},
		{"malformed output is retried", []fake.Scripted{{Status: 200, Body: `{"choices": [`}}, 3,
			tasks.StatusSucceeded, "", "", 2, []string{"failed", "succeeded"}},
		{"transient failures stop at the attempt limit", []fake.Scripted{
			{Status: 500, Body: serverError}, {Status: 503, Body: serverError}}, 2,
			tasks.StatusFailed, "provider_unavailable", "transient", 2, []string{"failed", "failed"}},
		{"hang after reading the body is ambiguous", []fake.Scripted{{Hang: true}}, 3,
			tasks.StatusSucceeded, "", "", 2, []string{"ambiguous", "succeeded"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, envOptions{maxAttempts: c.maxAttempts, requestTimeout: 300 * time.Millisecond})
			key := e.owner("acme", accounts.RoleClient, 1_000_000)
			e.fake.Script(c.script...)
			r := e.post(key, "k", taskBody("abcdefgh", 100), nil)
			if r.status != http.StatusAccepted {
				t.Fatalf("POST: %d %s", r.status, r.body)
			}
			task := e.waitFinished(key, r.task(t).ID)
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
			if task.Status == tasks.StatusFailed {
				if got := e.scalar(`SELECT count(*) FROM budget_reservations WHERE task_id = $1 AND state = 'released'`, task.ID); got != 1 {
					t.Errorf("failed task's reservation not released")
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
		WITH a AS (INSERT INTO task_attempts (task_id, attempt, provider_key, idempotency_key) VALUES ($1::uuid, 1, 'default', $1::text || ':1'))
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
