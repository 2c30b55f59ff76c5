package tasks

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/tollgate/tollgate/budget"
	"github.com/tollgate/tollgate/internal/pipetx"
	"github.com/tollgate/tollgate/internal/testdb"
	"github.com/tollgate/tollgate/provider"
)

// Both admitters give Create the same answers: an admission is written
// whole (row, job unless it runs on arrival, reservation) or not at all,
// a key already held is errKeyTaken and a budget too short is
// budget.ErrInsufficient, with nothing written for either.
func TestAdmittersWriteAnAdmissionWholeOrNotAtAll(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{"lone", "batched"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			pool, lone := admitterDB(t, 10_000)
			var ad admitter = lone
			if kind == "batched" {
				ad = newBatchAdmitter(lone, nil)
			}
			steps := []struct {
				name      string
				a         *admission
				wantErr   error
				wantJob   bool
				wantState Status
			}{
				{"admitted", testAdmission("k1", 4000, false), nil, true, StatusQueued},
				{"its key again", testAdmission("k1", 4000, false), errKeyTaken, false, ""},
				{"past the budget", testAdmission("k2", 7000, false), budget.ErrInsufficient, false, ""},
				{"admitted to run on arrival", testAdmission("k3", 1000, true), nil, false, StatusRunning},
			}
			for _, s := range steps {
				err := ad.admit(ctx, s.a)
				if !errors.Is(err, s.wantErr) {
					t.Fatalf("%s: err = %v, want %v", s.name, err, s.wantErr)
				}
				if err != nil {
					continue
				}
				if got := s.a.jobID != 0; got != s.wantJob {
					t.Errorf("%s: job %d, want one: %v", s.name, s.a.jobID, s.wantJob)
				}
				if s.a.task.ID != s.a.id || s.a.task.Status != s.wantState {
					t.Errorf("%s: task %s %s, want %s %s", s.name, s.a.task.ID, s.a.task.Status, s.a.id, s.wantState)
				}
			}
			// What the database holds: the two admitted tasks, one job,
			// one journal entry (the run on arrival's "sent"), and their
			// reservations only.
			var got struct{ Tasks, Jobs, Attempts, Reserved int64 }
			if err := pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM tasks), (SELECT count(*) FROM river_job),
				(SELECT count(*) FROM task_attempts WHERE state = 'sent'), (SELECT COALESCE(sum(reserved_micros), 0) FROM tasks)`).
				Scan(&got.Tasks, &got.Jobs, &got.Attempts, &got.Reserved); err != nil {
				t.Fatal(err)
			}
			want := struct{ Tasks, Jobs, Attempts, Reserved int64 }{2, 1, 1, 5000}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("mismatch (-want +got):\n%s", diff)
			}
			balances, err := budget.NewStore(pool, nil).Balances(ctx, "acme")
			if err != nil {
				t.Fatal(err)
			}
			if len(balances) != 1 || balances[0].ReservedMicros != 5000 {
				t.Errorf("balances %+v, want one with 5000 reserved", balances)
			}
		})
	}
}

// A key sent twice in one batch is written once; the later submission is
// answered from the first's task (a.taken), as it would be had the first
// committed before it.
func TestBatchWritesAKeySentTwiceOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, lone := admitterDB(t, 10_000)
	b := newBatchAdmitter(lone, nil)
	first, twice, other := testAdmission("k1", 1000, false), testAdmission("k1", 1000, false), testAdmission("k2", 1000, false)
	if err := b.writeBatch(ctx, []*admission{first, twice, other}); err != nil {
		t.Fatal(err)
	}
	if got := []bool{first.taken, twice.taken, other.taken}; !cmp.Equal(got, []bool{false, true, false}) {
		t.Errorf("taken %v, want [false true false]", got)
	}
	var n int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM tasks WHERE id = ANY($1)`, []string{first.id, other.id}).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 2 {
		t.Errorf("%d of the two distinct keys' tasks written", n)
	}
}

// admitterDB returns a migrated database whose owner "acme" has a budget
// of total micros, and a lone admitter on it, inserting jobs as River
// does.
func admitterDB(t *testing.T, total int64) (*pgxpool.Pool, *loneAdmitter) {
	t.Helper()
	ctx := context.Background()
	pool, _ := testdb.NewPool(t)
	if _, err := budget.NewStore(pool, nil).Set(ctx, "acme", total); err != nil {
		t.Fatal(err)
	}
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{})
	if err != nil {
		t.Fatal(err)
	}
	commit := func(ctx context.Context, tx *pipetx.Tx, _ string, b *pgx.Batch) error { return tx.CommitWith(ctx, b) }
	return pool, &loneAdmitter{pool: pool, river: client, now: time.Now, commitOnBudget: commit}
}

// testAdmission is an admission of owner "acme" under key, reserving
// amount.
func testAdmission(key string, amount int64, onArrival bool) *admission {
	req := Request{Chat: provider.Chat{Messages: []provider.Message{{Role: "user", Content: provider.Text("hello")}}}}
	stored, _ := json.Marshal(req)
	id := uuid.New().String()
	return &admission{id: id, owner: "acme", key: key, model: "test-model", hash: []byte{1}, stored: stored,
		sealed: []byte("sealed"), policy: "redact", amount: amount, deadline: time.Hour, sub: Submission{Request: req},
		providerKey: "default", onArrival: onArrival,
		args: TaskArgs{TaskID: id}, opts: &river.InsertOpts{Queue: queueFor("default")}}
}
