package server_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/accounts"
)

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
