package server_test

import (
	"encoding/json"
	"github.com/tollgate/tollgate/provider"
	"github.com/tollgate/tollgate/tasks"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/accounts"
)

// TestRouteRetryUnderAKeyStoredInClearSkipsTheGuards: a route call retried
// under a key its task holds in clear (stored before keys were digested)
// is a retry like any other: it costs nothing, so the per-user guards do
// not count it again.
func TestRouteRetryUnderAKeyStoredInClearSkipsTheGuards(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	key := e.owner("acme", accounts.RoleClient, 1_000_000)
	e.fake.Script(workersAnswer(`{"label":"ok","confidence":1}`))
	first := routeCall(e, key, "classify-ticket", "route-legacy-1", map[string]any{"ticket": "x"}).route(t)
	if first.Fallback != nil || first.TaskID == nil {
		t.Fatalf("first call: fallback %+v task %v", first.Fallback, first.TaskID)
	}
	if _, err := e.pool.Exec(t.Context(), `UPDATE tasks SET idempotency_key = 'route-legacy-1' WHERE id = $1::uuid`, *first.TaskID); err != nil {
		t.Fatal(err)
	}
	again := routeCall(e, key, "classify-ticket", "route-legacy-1", map[string]any{"ticket": "x"}).route(t)
	if again.TaskID == nil || *again.TaskID != *first.TaskID {
		t.Errorf("retry answered task %v, want %s", again.TaskID, *first.TaskID)
	}
	if n := e.scalar(`SELECT coalesce(sum(count), 0) FROM route_limits WHERE kind = 'day'`); n != 1 {
		t.Errorf("daily cap counted %d calls, want 1: the retry went through the guards again", n)
	}
	if n := e.fake.CallCount(); n != 1 {
		t.Errorf("%d provider calls, want 1", n)
	}
}

// TestStoredKeySentAsAKeyDoesNotReachItsTask: the stored form of a key
// ("h:" and its digest) is shown in API answers; sent back as an
// Idempotency-Key it is a new key, never the task it names.
func TestStoredKeySentAsAKeyDoesNotReachItsTask(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	key := e.owner("acme", accounts.RoleClient, 1_000_000)
	body := []byte(`{"model":"test-model","messages":[{"role":"user","content":"hi"}]}`)
	e.fake.Script(openaiAnswer("a"), openaiAnswer("b"))
	a := e.waitFinished(key, e.post(key, "key-A", body, map[string]string{"Prefer": "wait=30"}).task(t).ID)
	if !strings.HasPrefix(a.IdempotencyKey, "h:") {
		t.Fatalf("task A shows idempotency_key %q, want its h: digest", a.IdempotencyKey)
	}
	r := e.post(key, a.IdempotencyKey, body, nil)
	if r.status >= 300 {
		t.Fatalf("post under A's stored key: %d %s", r.status, r.body)
	}
	if got := r.task(t); got.ID == a.ID || r.header.Get("Idempotent-Replayed") == "true" {
		t.Errorf("A's stored key sent as a key answered task %s (replayed %q): A's task must not be reachable so", got.ID, r.header.Get("Idempotent-Replayed"))
	}
	if n := e.scalar(`SELECT count(*) FROM tasks`); n != 2 {
		t.Errorf("%d tasks, want 2", n)
	}
}

// TestLoggedKeyDigestMatchesTheStoredKey: the task-created log line shows
// the idempotency key as the beginning of its stored form, the very value
// an API answer shows, so support can match the two; never the key sent.
func TestLoggedKeyDigestMatchesTheStoredKey(t *testing.T) {
	t.Parallel()
	logs := &syncBuffer{}
	e := newEnv(t, envOptions{logs: logs})
	key := e.owner("acme", accounts.RoleClient, 1_000_000)
	e.fake.Script(openaiAnswer("ok"))
	task := e.waitFinished(key, e.post(key, "log-key-1", []byte(`{"model":"test-model","messages":[{"role":"user","content":"hi"}]}`),
		map[string]string{"Prefer": "wait=30"}).task(t).ID)
	var logged string
	for _, line := range strings.Split(logs.String(), "\n") {
		var rec struct {
			Msg    string `json:"msg"`
			TaskID string `json:"task_id"`
			Key    string `json:"idempotency_key_digest"`
		}
		if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "task created" && rec.TaskID == task.ID {
			logged = rec.Key
		}
	}
	if len(logged) < len("h:")+16 || !strings.HasPrefix(task.IdempotencyKey, logged) {
		t.Errorf("logged idempotency_key_digest %q, want a prefix (h: and at least 16 digits) of the stored key %q", logged, task.IdempotencyKey)
	}
	if strings.Contains(logs.String(), "log-key-1") {
		t.Error("the logs hold the idempotency key as sent")
	}
}

// TestDigestPlainKeysRewritesKeysStoredInClear: the backfill behind
// `tollgate tasks digest-keys` rewrites the keys and request hashes that
// tasks stored before they were keyed hold in clear, batch by batch; a
// retry under such a key still replays its task, without a provider call;
// a key whose digest the owner holds already is left alone and counted;
// a second run finds nothing to do.
func TestDigestPlainKeysRewritesKeysStoredInClear(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	key := e.owner("acme", accounts.RoleClient, 1_000_000)
	plainOf := func(content string) []byte {
		return tasks.Request{Chat: provider.Chat{Model: "test-model", Messages: []provider.Message{{Role: "user", Content: provider.Text(content)}}}}.Hash()
	}
	ids := map[string]string{}
	for _, k := range []string{"legacy-a", "legacy-b", "legacy-c", "newer"} {
		e.fake.Script(openaiAnswer("ok"))
		body := []byte(`{"model":"test-model","messages":[{"role":"user","content":"` + k + `"}]}`)
		ids[k] = e.waitFinished(key, e.post(key, k, body, map[string]string{"Prefer": "wait=30"}).task(t).ID).ID
	}
	// legacy-a..c as stored before keys were digested; "newer" holds
	// legacy-c's digest, as if legacy-c's key had been used again.
	for _, k := range []string{"legacy-a", "legacy-b", "legacy-c"} {
		if _, err := e.pool.Exec(t.Context(), `UPDATE tasks SET idempotency_key = $2, request_hash = $3 WHERE id = $1::uuid`, ids[k], k, plainOf(k)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.pool.Exec(t.Context(), `UPDATE tasks SET idempotency_key = $2 WHERE id = $1::uuid`, ids["newer"], e.tasks.StoredKey("legacy-c")); err != nil {
		t.Fatal(err)
	}
	var batches int
	done, err := tasks.DigestPlainKeys(t.Context(), e.pool, testSealer(t), 1, func(tasks.DigestedKeys) { batches++ })
	if err != nil {
		t.Fatal(err)
	}
	if done != (tasks.DigestedKeys{Rewritten: 2, Skipped: 1}) || batches != 3 {
		t.Errorf("digest keys = %+v in %d batches, want 2 rewritten, 1 skipped in 3 batches", done, batches)
	}
	for _, k := range []string{"legacy-a", "legacy-b"} {
		if n := e.scalar(`SELECT count(*) FROM tasks WHERE id = $1::uuid AND idempotency_key = $2 AND request_hash <> $3`, ids[k], e.tasks.StoredKey(k), plainOf(k)); n != 1 {
			t.Errorf("%s: key or request hash not rewritten to its keyed form", k)
		}
	}
	if n := e.scalar(`SELECT count(*) FROM tasks WHERE idempotency_key IN ('legacy-a', 'legacy-b')`); n != 0 {
		t.Errorf("%d keys still in clear", n)
	}
	calls := e.fake.CallCount()
	for _, k := range []string{"legacy-a", "legacy-b"} {
		again := e.post(key, k, []byte(`{"model":"test-model","messages":[{"role":"user","content":"`+k+`"}]}`), nil)
		if again.task(t).ID != ids[k] || again.header.Get("Idempotent-Replayed") != "true" {
			t.Errorf("retry under %s after the rewrite: %d %s, want task %s replayed", k, again.status, again.body, ids[k])
		}
	}
	if n := e.fake.CallCount(); n != calls {
		t.Errorf("retries after the rewrite made %d provider calls, want none", n-calls)
	}
	again, err := tasks.DigestPlainKeys(t.Context(), e.pool, testSealer(t), 100, nil)
	if err != nil || again.Rewritten != 0 {
		t.Errorf("second run = %+v, %v; want nothing rewritten", again, err)
	}
}
