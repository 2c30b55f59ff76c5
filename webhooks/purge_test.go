package webhooks_test

import (
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/testdb"
	"github.com/tollgate/tollgate/webhooks"
)

// TestPurgeEventsKeepsPendingAndRecent: events whose delivery ended before
// the cut are deleted; pending ones and recent ones stay.
func TestPurgeEventsKeepsPendingAndRecent(t *testing.T) {
	t.Parallel()
	pool, _ := testdb.NewPool(t)
	now := time.Now()
	old := now.Add(-webhooks.EventRetention - time.Hour)
	rows := []struct {
		state   string
		created time.Time
		kept    bool
	}{
		{"delivered", old, false},
		{"failed", old, false},
		{"dropped", old, false},
		{"pending", old, true},
		{"delivered", now, true},
	}
	for _, r := range rows {
		if _, err := pool.Exec(t.Context(), `INSERT INTO webhook_events (owner_id, task_id, type, state, created_at)
			VALUES ('acme', gen_random_uuid(), 'task.succeeded', $1, $2)`, r.state, r.created); err != nil {
			t.Fatal(err)
		}
	}
	n, err := webhooks.PurgeEvents(t.Context(), pool, now.Add(-webhooks.EventRetention))
	if err != nil || n != 3 {
		t.Fatalf("purged %d (%v), want 3", n, err)
	}
	var left int
	if err := pool.QueryRow(t.Context(), `SELECT count(*) FROM webhook_events`).Scan(&left); err != nil || left != 2 {
		t.Errorf("%d events left (%v), want 2: the pending and the recent one", left, err)
	}
}
