package server_test

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/tollgate/tollgate/accounts"
	"github.com/tollgate/tollgate/budget"
)

// TestRerunIsChargedToTheCallersWorkload exhausts a workload key's cap,
// then has it rerun a task of another workload of the same owner: the
// rerun is the caller's spending, refused like a task it submits, and the
// workload's books stay within its cap. A rerun it can afford is charged
// to its own workload.
func TestRerunIsChargedToTheCallersWorkload(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{allowRerun: true})
	e.owner("acme", accounts.RoleClient, 1_000_000)
	const capMicros = 2 * 206 // room for two tasks of taskBody("abcdefgh", 100) reserved at once
	if _, err := e.budgets.SetLimit(t.Context(), budget.Limit{OwnerID: "acme", Workload: "batch", Period: budget.PeriodNone, TotalMicros: capMicros}); err != nil {
		t.Fatal(err)
	}
	batch, err := e.accounts.CreateKey(t.Context(), "acme", accounts.RoleClient, "batch")
	if err != nil {
		t.Fatal(err)
	}
	chat, err := e.accounts.CreateKey(t.Context(), "acme", accounts.RoleClient, "chat")
	if err != nil {
		t.Fatal(err)
	}
	wait := map[string]string{"Prefer": "wait=20"}
	orig := e.post(chat, "chat-1", taskBody("abcdefgh", 100), wait).task(t)
	e.waitFinished(chat, orig.ID)

	// While batch has room, its rerun of chat's task is charged to batch.
	r := e.do(http.MethodPost, "/v1/tasks/"+orig.ID+"/rerun", batch, nil, map[string]string{"Idempotency-Key": "again-0"})
	if r.status != http.StatusAccepted {
		t.Fatalf("rerun within batch's cap: %d %s", r.status, r.body)
	}
	again := r.task(t)
	e.waitFinished(batch, again.ID)
	if got := e.scalar(`SELECT count(*) FROM tasks WHERE id = $1 AND workload = 'batch'`, again.ID); got != 1 {
		t.Errorf("batch's rerun of chat's task is not charged to batch")
	}

	// Spend batch's cap with its own tasks until it refuses one.
	refused := 0
	for i := 0; refused == 0 && i < 20; i++ {
		r := e.post(batch, fmt.Sprintf("b%d", i), taskBody("abcdefgh", 100), wait)
		if r.status >= 400 {
			refused = r.status
			break
		}
		e.waitFinished(batch, r.task(t).ID)
	}
	if refused == 0 {
		t.Fatal("batch's cap never refused a task")
	}
	r = e.do(http.MethodPost, "/v1/tasks/"+orig.ID+"/rerun", batch, nil, map[string]string{"Idempotency-Key": "again-1"})
	if r.status != refused {
		t.Errorf("rerun by a workload key past its cap: %d %s, want %d like its own tasks", r.status, r.body, refused)
	}
	if over := e.scalar(`SELECT count(*) FROM budget_periods WHERE owner_id = 'acme' AND workload = 'batch'
		AND spent_micros + reserved_micros > total_micros`); over != 0 {
		t.Errorf("batch's spending exceeds its cap")
	}
	e.checkInvariants()
}

// TestRerunKeysAreTheirWorkloads: two workload keys of one owner rerun the
// same task under the same Idempotency-Key. Each gets its own rerun,
// charged to its own workload; the first's is never replayed to the
// second. Repeating a rerun still returns the same task.
func TestRerunKeysAreTheirWorkloads(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{allowRerun: true})
	e.owner("acme", accounts.RoleClient, 1_000_000)
	keys := map[string]string{}
	for _, w := range []string{"batch", "chat"} {
		k, err := e.accounts.CreateKey(t.Context(), "acme", accounts.RoleClient, w)
		if err != nil {
			t.Fatal(err)
		}
		keys[w] = k
	}
	orig := e.post(keys["chat"], "chat-1", taskBody("abcdefgh", 100), map[string]string{"Prefer": "wait=20"}).task(t)
	e.waitFinished(keys["chat"], orig.ID)
	rerun := func(w string) string {
		t.Helper()
		r := e.do(http.MethodPost, "/v1/tasks/"+orig.ID+"/rerun", keys[w], nil, map[string]string{"Idempotency-Key": "same"})
		if r.status != http.StatusAccepted && r.status != http.StatusOK {
			t.Fatalf("%s's rerun: %d %s", w, r.status, r.body)
		}
		return r.task(t).ID
	}
	byBatch := rerun("batch")
	e.waitFinished(keys["batch"], byBatch)
	byChat := rerun("chat")
	if byChat == byBatch {
		t.Fatalf("chat's rerun under the key batch used answered batch's rerun %s", byBatch)
	}
	e.waitFinished(keys["chat"], byChat)
	for id, w := range map[string]string{byBatch: "batch", byChat: "chat"} {
		if got := e.scalar(`SELECT count(*) FROM tasks WHERE id = $1 AND workload = $2`, id, w); got != 1 {
			t.Errorf("rerun %s is not charged to %s", id, w)
		}
	}
	if again := rerun("chat"); again != byChat {
		t.Errorf("chat's repeated rerun answered %s, want %s", again, byChat)
	}
	e.checkInvariants()
}
