package tasks

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/tollgate/tollgate/internal/testdb"
	"github.com/tollgate/tollgate/provider"
)

// TestAdmittedTaskIsTheRowAsRead: the task an admission builds from what
// it holds (admitted) equals the row read back as a client's answer
// would read it (clientViewColumns), the fields runs use but clients never
// see included: a queued task with a job and every per-task setting, and
// a run on arrival with none.
func TestAdmittedTaskIsTheRowAsRead(t *testing.T) {
	ctx := context.Background()
	pool, _ := testdb.NewPool(t)
	if _, err := pool.Exec(ctx, `INSERT INTO owners (id) VALUES ('acme')`); err != nil {
		t.Fatal(err)
	}
	for i, tc := range []struct {
		name      string
		sub       Submission
		onArrival bool
		jobID     int64
	}{
		{"queued, every setting", Submission{
			Request:  Request{Metadata: map[string]any{"n": json.Number("1.50"), "nested": map[string]any{"a": []any{1, "x", nil}}}},
			Workload: "search", Route: "summarise", PromptVersion: "v3", MaxAttempts: 3, CallTimeout: 1500 * time.Millisecond,
		}, false, 42},
		{"run on arrival, no settings", Submission{}, true, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := tc.sub.Request
			req.Messages = []provider.Message{{Role: "user", Content: provider.Text("hello")}}
			stored, err := json.Marshal(req)
			if err != nil {
				t.Fatal(err)
			}
			tc.sub.Request = req
			a := &admission{id: uuid.New().String(), owner: "acme", key: "k" + string(rune('a'+i)), model: "test-model",
				hash: []byte{1, 2}, stored: stored, sealed: []byte("sealed"), policy: "redact", amount: 1234, deadline: time.Hour,
				sub: tc.sub, providerKey: "default", onArrival: tc.onArrival}
			tx, err := pool.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback(ctx)
			b := &pgx.Batch{}
			a.queueInsert(b, tc.jobID, true)
			if err := tx.SendBatch(ctx, b).Close(); err != nil {
				t.Fatal(err)
			}
			if a.taken {
				t.Fatal("the key was taken")
			}
			rows, err := tx.Query(ctx, `SELECT `+clientViewColumns+` FROM tasks WHERE id = $1`, a.id)
			if err != nil {
				t.Fatal(err)
			}
			read, err := pgx.CollectExactlyOneRow(rows, scanTask)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(read, a.task, cmp.AllowUnexported(Task{}, Result{})); diff != "" {
				t.Errorf("admitted task differs from the row read back (-read +admitted):\n%s", diff)
			}
		})
	}
}
