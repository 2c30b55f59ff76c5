package tasks

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/tollgate/tollgate/internal/testdb"
)

// A queue's wait is how long its next available job has been due, zero
// for an empty queue; a job's state is read under a lock, "" for no job.
func TestRiverReads(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, _ := testdb.NewPool(t)
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := client.Insert(ctx, TaskArgs{TaskID: "t"}, &river.InsertOpts{Queue: queueFor("busy")})
	if err != nil {
		t.Fatal(err)
	}
	// Due a minute ago and not fetched since.
	if _, err := pool.Exec(ctx, `UPDATE river_job SET scheduled_at = now() - interval '1 minute' WHERE id = $1`, res.Job.ID); err != nil {
		t.Fatal(err)
	}
	waits, err := readQueueWaits(ctx, pool, []string{queueFor("busy"), queueFor("idle")})
	if err != nil {
		t.Fatal(err)
	}
	if w := waits[queueFor("busy")]; w < time.Minute || w > 2*time.Minute {
		t.Errorf("busy queue's wait %s, want about a minute", w)
	}
	if w, ok := waits[queueFor("idle")]; !ok || w != 0 {
		t.Errorf("idle queue's wait %s (read: %v), want 0", w, ok)
	}
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		for id, want := range map[int64]string{res.Job.ID: "available", res.Job.ID + 1000: ""} {
			state, err := lockJobState(ctx, tx, id)
			if err != nil {
				return err
			}
			if state != want {
				t.Errorf("job %d: state %q, want %q", id, state, want)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
