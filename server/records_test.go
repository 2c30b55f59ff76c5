package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/accounts"
	"github.com/tollgate/tollgate/tasks"
)

func finishedTask(t *testing.T, e *env, key, idem, content string) tasks.Task {
	t.Helper()
	r := e.post(key, idem, taskBody(content, 10), map[string]string{"Prefer": "wait=30"})
	return e.waitFinished(key, r.task(t).ID)
}

func TestSupportSearchesRecordsAndReadsAreAudited(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	alice := e.owner("alice", accounts.RoleClient, 1_000_000)
	bob := e.owner("bob", accounts.RoleClient, 1_000_000)
	support := e.owner("helpdesk", accounts.RoleSupport, 0)
	admin := e.owner("ops", accounts.RoleAdmin, 0)
	a1 := finishedTask(t, e, alice, "order-1", "refund the blue kettle")
	finishedTask(t, e, alice, "order-2", "track the red teapot")
	b1 := finishedTask(t, e, bob, "order-1", "refund the green kettle")

	cases := []struct {
		name, key, query string
		want             []string
	}{
		{"support finds words across owners", support, "q=kettle", []string{b1.ID, a1.ID}},
		{"support narrows to an owner", support, "q=kettle&owner=alice", []string{a1.ID}},
		{"by task id", support, "q=" + b1.ID, []string{b1.ID}},
		{"by idempotency key, every owner's", support, "q=order-1", []string{b1.ID, a1.ID}},
		{"by idempotency key within an owner", support, "q=order-1&owner=bob", []string{b1.ID}},
		{"by a key no task has", support, "q=order-9", nil},
		{"by status succeeded with words", support, "q=kettle&status=succeeded", []string{b1.ID, a1.ID}},
		{"by status running", support, "status=running", nil},
		{"a client sees only its own", alice, "q=kettle", []string{a1.ID}},
		{"by status", support, "status=failed", nil},
	}
	for _, c := range cases {
		if got := e.searchReplays(c.key, c.query); fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("%s: got %v, want %v", c.name, got, c.want)
		}
	}
	if r := e.do(http.MethodGet, "/v1/replays?owner=bob", alice, nil, nil); r.status != http.StatusForbidden {
		t.Errorf("client searching another owner: %d, want 403", r.status)
	}

	// The owner's read is not audited; support's is, with its reason.
	e.do(http.MethodGet, "/v1/tasks/"+a1.ID+"/replay", alice, nil, nil)
	if r := e.do(http.MethodGet, "/v1/tasks/"+a1.ID+"/replay", support, nil, map[string]string{"X-Reason": "ticket 4711"}); r.status != http.StatusOK {
		t.Fatalf("support read: %d %s", r.status, r.body)
	}
	r := e.do(http.MethodGet, "/v1/audit?task_id="+a1.ID, admin, nil, nil)
	var audit struct {
		Data []struct {
			ActorRole string `json:"actor_role"`
			Reason    string `json:"reason"`
		} `json:"data"`
	}
	_ = json.Unmarshal(r.body, &audit)
	if r.status != http.StatusOK || len(audit.Data) != 1 || audit.Data[0].ActorRole != "support" || audit.Data[0].Reason != "ticket 4711" {
		t.Errorf("audit = %d %s, want one support read with its reason", r.status, r.body)
	}
	if r := e.do(http.MethodGet, "/v1/audit", support, nil, nil); r.status != http.StatusForbidden {
		t.Errorf("support reading the audit log: %d, want 403", r.status)
	}
}

func TestReplayingAThousandRecordsCallsNoModel(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{noWorkers: true})
	key := e.owner("acme", accounts.RoleClient, 1_000_000)
	seed := e.post(key, "seed", taskBody("hello", 10), nil).task(t)
	// A thousand finished tasks with records, made in SQL from the seed.
	_, err := e.pool.Exec(t.Context(), `
		WITH src AS (SELECT * FROM tasks WHERE id = $1),
		t AS (
			INSERT INTO tasks (owner_id, idempotency_key, request_hash, request, model, status, attempts, result, created_at, updated_at, finished_at, deadline_at, payload)
			SELECT owner_id, 'bulk-' || g, request_hash, request, model, 'succeeded', 1,
			       '{"output": "", "model": "test-model", "usage": {"input_tokens": 1, "output_tokens": 1, "source": "reported"}, "cost_micros": 3}',
			       now(), now(), now(), now() + interval '1 hour', payload
			FROM src, generate_series(1, 1000) g
			RETURNING id, owner_id
		)
		INSERT INTO replay_records (task_id, attempt, owner_id, state, provider, provider_model, parameters, timeout_ms, response, started_at, finished_at)
		SELECT id, 1, owner_id, 'succeeded', 'openai:default', 'test-model', '{"model": "test-model", "max_tokens": 10}', 5000,
		       '{"content": "stored answer", "finish_reason": "stop", "model": "test-model"}', now(), now()
		FROM t`, seed.ID)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := e.pool.Query(t.Context(), `SELECT id::text FROM tasks WHERE idempotency_key LIKE 'bulk-%'`)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for rows.Next() {
		var id string
		_ = rows.Scan(&id)
		ids = append(ids, id)
	}
	rows.Close()
	for _, id := range ids {
		if r := e.do(http.MethodGet, "/v1/tasks/"+id+"/replay", key, nil, nil); r.status != http.StatusOK {
			t.Fatalf("replay %s: %d %s", id, r.status, r.body)
		}
	}
	if len(ids) != 1000 || e.fake.CallCount() != 0 {
		t.Errorf("replayed %d records with %d provider calls, want 1000 and 0", len(ids), e.fake.CallCount())
	}
}

func TestErasedRecordsAnswer410WithTheirTombstone(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	key := e.owner("acme", accounts.RoleClient, 1_000_000)
	other := e.owner("other", accounts.RoleClient, 1_000_000)
	task := finishedTask(t, e, key, "k", "forget me")
	if r := e.do(http.MethodDelete, "/v1/tasks/"+task.ID+"/replay", other, nil, nil); r.status != http.StatusNotFound {
		t.Errorf("another owner's delete: %d, want 404", r.status)
	}
	r := e.do(http.MethodDelete, "/v1/tasks/"+task.ID+"/replay", key, nil, nil)
	if r.status != http.StatusOK {
		t.Fatalf("delete: %d %s", r.status, r.body)
	}
	r = e.do(http.MethodGet, "/v1/tasks/"+task.ID+"/replay", key, nil, nil)
	if r.status != http.StatusGone || r.problemCode(t) != "gone" {
		t.Fatalf("replay after delete: %d %s, want 410 gone", r.status, r.body)
	}
	ts, _ := r.json(t)["tombstone"].(map[string]any)
	if ts["reason"] != "deleted" || ts["erased_by"] == "" {
		t.Errorf("tombstone = %v", ts)
	}
	if got := e.scalar(`SELECT count(*) FROM replay_records WHERE task_id = $1 AND response->>'content' <> ''`, task.ID); got != 0 {
		t.Error("response text survived the erasure")
	}
	// Finance still reconciles: the usage row stays.
	if got := e.scalar(`SELECT count(*) FROM usage_records WHERE task_id = $1`, task.ID); got != 1 {
		t.Error("the erasure removed finance metadata")
	}
	e.checkInvariants()
}

func TestRetentionPurgesOldBodiesOnly(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	key := e.owner("acme", accounts.RoleClient, 1_000_000)
	old := finishedTask(t, e, key, "old", "old story")
	fresh := finishedTask(t, e, key, "fresh", "fresh story")
	if _, err := e.pool.Exec(t.Context(), `UPDATE tasks SET finished_at = now() - interval '31 days' WHERE id = $1`, old.ID); err != nil {
		t.Fatal(err)
	}
	n, err := e.tasks.PurgeBodies(t.Context(), time.Now(), 1)
	if err != nil || n != 1 {
		t.Fatalf("PurgeBodies = %d, %v; want 1", n, err)
	}
	if r := e.do(http.MethodGet, "/v1/tasks/"+old.ID+"/replay", key, nil, nil); r.status != http.StatusGone {
		t.Errorf("purged record: %d, want 410", r.status)
	}
	if r := e.do(http.MethodGet, "/v1/tasks/"+fresh.ID+"/replay", key, nil, nil); r.status != http.StatusOK {
		t.Errorf("fresh record: %d, want 200", r.status)
	}
	// Thirty days on, the fresh one goes too (the clock is injected).
	if n, _ := e.tasks.PurgeBodies(t.Context(), time.Now().AddDate(0, 0, 31), 1); n != 1 {
		t.Errorf("second purge = %d, want 1", n)
	}
}

func TestRerunMakesANewLinkedTaskOnlyWhenEnabled(t *testing.T) {
	t.Parallel()
	for _, enabled := range []bool{false, true} {
		t.Run(fmt.Sprint(enabled), func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, envOptions{allowRerun: enabled})
			key := e.owner("acme", accounts.RoleClient, 1_000_000)
			orig := finishedTask(t, e, key, "k", "say it again")
			r := e.do(http.MethodPost, "/v1/tasks/"+orig.ID+"/rerun", key, nil, map[string]string{"Idempotency-Key": "again-1"})
			if !enabled {
				if r.status != http.StatusForbidden {
					t.Fatalf("rerun while disabled: %d, want 403", r.status)
				}
				return
			}
			if r.status != http.StatusAccepted {
				t.Fatalf("rerun: %d %s", r.status, r.body)
			}
			again := e.waitFinished(key, r.task(t).ID)
			if again.ID == orig.ID || again.Status != tasks.StatusSucceeded || again.IdempotencyKey != e.tasks.StoredKey(tasks.RerunKey(orig.ID, "", "again-1")) {
				t.Errorf("rerun task = %+v", again)
			}
			if got := e.scalar(`SELECT count(*) FROM tasks WHERE rerun_of = $1`, orig.ID); got != 1 {
				t.Error("the rerun is not linked to the original")
			}
			// The same rerun key is idempotent.
			if r := e.do(http.MethodPost, "/v1/tasks/"+orig.ID+"/rerun", key, nil, map[string]string{"Idempotency-Key": "again-1"}); r.task(t).ID != again.ID {
				t.Error("repeating the rerun made another task")
			}
			if e.fake.CallCount() != 2 {
				t.Errorf("provider calls = %d, want 2", e.fake.CallCount())
			}
			e.checkInvariants()
		})
	}
}

func TestAdminSetsAnOwnersPrivacyPolicy(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	admin := e.owner("ops", accounts.RoleAdmin, 0)
	key := e.owner("acme", accounts.RoleClient, 1_000_000)
	if r := e.do(http.MethodPut, "/v1/owners/acme/privacy", key, []byte(`{"redaction_policy":"full","body_retention_days":30,"metadata_retention_days":400}`), nil); r.status != http.StatusForbidden {
		t.Errorf("client setting its policy: %d, want 403", r.status)
	}
	if r := e.do(http.MethodPut, "/v1/owners/acme/privacy", admin, []byte(`{"redaction_policy":"shred","body_retention_days":30,"metadata_retention_days":400}`), nil); r.status != http.StatusBadRequest {
		t.Errorf("unknown policy: %d, want 400", r.status)
	}
	r := e.do(http.MethodPut, "/v1/owners/acme/privacy", admin, []byte(`{"redaction_policy":"hash-only","body_retention_days":7,"metadata_retention_days":400}`), nil)
	if r.status != http.StatusOK {
		t.Fatalf("set policy: %d %s", r.status, r.body)
	}
	if r := e.do(http.MethodGet, "/v1/owners/acme/privacy", key, nil, nil); r.json(t)["redaction_policy"] != "hash-only" {
		t.Errorf("policy = %s", r.body)
	}
	task := finishedTask(t, e, key, "k", "my secret plan")
	rec := e.do(http.MethodGet, "/v1/tasks/"+task.ID+"/replay", key, nil, nil)
	if contains(rec.body, "my secret plan") || !contains(rec.body, "[DIGEST:") {
		t.Errorf("hash-only record holds text: %s", rec.body)
	}
	if task.Result.Output == "" {
		t.Error("the owner lost its output under hash-only")
	}
}

func contains(b []byte, s string) bool { return strings.Contains(string(b), s) }

// A task read to answer a client carries its metadata and not its stored
// prompt (answers never show it, and decoding it on every poll would cost
// in proportion to its size); a replay record's read carries the whole
// stored request. Every kind of answer shows the metadata.
func TestAnswersReadMetadataRecordsReadTheRequest(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	key := e.owner("acme", accounts.RoleClient, 1_000_000)
	body := []byte(`{"model":"test-model","messages":[{"role":"user","content":"a prompt to keep out of answers"}],"max_tokens":16,"metadata":{"ticket":"T-1"}}`)
	r := e.post(key, "meta", body, map[string]string{"Prefer": "wait=10"})
	if r.status != http.StatusOK {
		t.Fatalf("POST: %d %s", r.status, r.body)
	}
	id := r.task(t).ID
	answers := map[string]response{
		"POST with wait": r,
		"replayed POST":  e.post(key, "meta", body, nil),
		"GET":            e.do(http.MethodGet, "/v1/tasks/"+id, key, nil, nil),
		"GET with wait":  e.do(http.MethodGet, "/v1/tasks/"+id, key, nil, map[string]string{"Prefer": "wait=5"}),
	}
	for name, a := range answers {
		if got := a.task(t).Metadata["ticket"]; got != "T-1" {
			t.Errorf("%s: metadata ticket = %v, want T-1", name, got)
		}
		if strings.Contains(string(a.body), "a prompt to keep out") {
			t.Errorf("%s: the answer shows the prompt: %s", name, a.body)
		}
	}
	ctx := context.Background()
	got, err := e.tasks.Get(ctx, "acme", id)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Request.Messages) != 0 || got.Request.Metadata["ticket"] != "T-1" {
		t.Errorf("Get's request = %+v, want the metadata alone", got.Request)
	}
	rec, err := e.tasks.Record(ctx, "acme", id)
	if err != nil {
		t.Fatal(err)
	}
	if len(rec.Request.Messages) != 1 || rec.Request.Messages[0].Content.String() != "a prompt to keep out of answers" || rec.Metadata["ticket"] != "T-1" {
		t.Errorf("Record's request = %+v, want the whole stored request", rec.Request)
	}
}
