package replay_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tollgate/tollgate/internal/testdb"
	"github.com/tollgate/tollgate/replay"
)

// newTask stores an owner's finished task with two attempts, the first
// failed transiently.
func newTask(t *testing.T, pool *pgxpool.Pool) string {
	t.Helper()
	ctx := context.Background()
	id := uuid.NewString()
	_, err := pool.Exec(ctx, `
		WITH o AS (INSERT INTO owners (id) VALUES ('acme') ON CONFLICT DO NOTHING)
		INSERT INTO tasks (id, owner_id, idempotency_key, request_hash, request, model, status, attempts, finished_at, result, deadline_at)
		VALUES ($1::uuid, 'acme', $1::text, '\x00', '{"messages": []}', 'm', 'succeeded', 2, now(), '{}', now())`, id)
	if err != nil {
		t.Fatal(err)
	}
	started := time.Now().UTC().Truncate(time.Millisecond)
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		for _, a := range []replay.Attempt{
			{TaskID: id, OwnerID: "acme", Attempt: 1, State: "failed", Provider: "openai:k", ProviderModel: "m",
				Error: &replay.Failure{Class: "transient", Code: "server_error", ProviderStatus: 503}, StartedAt: started},
			{TaskID: id, OwnerID: "acme", Attempt: 2, State: "succeeded", Provider: "openai:k", ProviderModel: "m",
				Response: &replay.Response{Content: "hi", FinishReason: "stop", Model: "m"}, StartedAt: started},
		} {
			if err := replay.InsertTx(ctx, tx, a); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func auditRows(t *testing.T, pool *pgxpool.Pool, taskID string) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM replay_audit WHERE task_id = $1`, taskID).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestAuditedAttemptsReturnsWhatAttemptsDoesAndAuditsIt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, _ := testdb.NewPool(t)
	store := replay.NewStore(pool)
	id := newTask(t, pool)

	want, err := store.Attempts(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if len(want) != 2 {
		t.Fatalf("Attempts returned %d records, want 2", len(want))
	}
	got, err := store.AuditedAttempts(ctx, replay.Access{TaskID: id, OwnerID: "acme", ActorOwner: "helpdesk",
		ActorKeyID: uuid.NewString(), ActorRole: "support", Reason: "ticket 1"})
	if err != nil {
		t.Fatalf("AuditedAttempts: %v", err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("AuditedAttempts mismatch with Attempts (-want +got):\n%s", diff)
	}
	if n := auditRows(t, pool, id); n != 1 {
		t.Errorf("%d audit rows, want 1", n)
	}
	log, _, err := store.AuditLog(ctx, replay.AuditFilter{TaskID: id})
	if err != nil {
		t.Fatal(err)
	}
	if len(log) != 1 || log[0].ActorOwner != "helpdesk" || log[0].Reason != "ticket 1" || log[0].OwnerID != "acme" {
		t.Errorf("audit log %+v, want one read by helpdesk for ticket 1", log)
	}
}

// A read whose audit row cannot be written returns nothing.
func TestAuditedAttemptsFailsWholeWhenTheAuditFails(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, _ := testdb.NewPool(t)
	store := replay.NewStore(pool)
	id := newTask(t, pool)

	got, err := store.AuditedAttempts(ctx, replay.Access{TaskID: id, OwnerID: "acme", ActorOwner: "helpdesk",
		ActorKeyID: "not a key id", ActorRole: "support", Reason: "ticket 1"})
	if err == nil {
		t.Fatalf("AuditedAttempts with an invalid key id returned %d records and no error, want an error", len(got))
	}
	if got != nil {
		t.Errorf("AuditedAttempts returned %d records with its error, want none", len(got))
	}
	if n := auditRows(t, pool, id); n != 0 {
		t.Errorf("%d audit rows, want 0", n)
	}
}

func TestAuditedAttemptsOfATaskWithoutRecords(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, _ := testdb.NewPool(t)
	store := replay.NewStore(pool)
	id := uuid.NewString() // the audit row names a task id, not a foreign key
	got, err := store.AuditedAttempts(ctx, replay.Access{TaskID: id, OwnerID: "acme", ActorOwner: "ops",
		ActorKeyID: uuid.NewString(), ActorRole: "admin", Reason: "check"})
	if err != nil {
		t.Fatal(err)
	}
	if got == nil || len(got) != 0 {
		t.Errorf("got %#v, want an empty slice", got)
	}
	if n := auditRows(t, pool, id); n != 1 {
		t.Errorf("%d audit rows, want 1", n)
	}
}
