package tasks

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tollgate/tollgate/internal/logbuf"
	"github.com/tollgate/tollgate/internal/testdb"
)

// A stop cancels the announcer's context whenever it comes, often with a
// finish still to announce: that last write must reach other instances and
// log nothing, while a write the database refuses still warns.
func TestWaiterAnnouncesTheLastFinishesOfAStopAndWarnsOnlyOnFailure(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		closed   bool // the pool is closed: every write fails
		wantWarn bool
	}{
		{name: "normal stop with a finish queued", closed: false, wantWarn: false},
		{name: "database refuses the write", closed: true, wantWarn: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			pool, url := testdb.NewPool(t)
			ctx := context.Background()
			conn, err := pgx.Connect(ctx, url)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = conn.Close(context.Background()) })
			if _, err := conn.Exec(ctx, "LISTEN "+finishedChannel); err != nil {
				t.Fatal(err)
			}
			if tt.closed {
				pool.Close()
			}
			logs := &logbuf.Buffer{}
			w := newWaiter(pool, slog.New(slog.NewTextHandler(logs, nil)), time.Hour)
			stopped, cancel := context.WithCancel(ctx)
			cancel()
			// send chooses at random between its ended context and the
			// queued id: twenty stops take both orders but once in a
			// million runs.
			for i := range 20 {
				id := fmt.Sprintf("task-%d", i)
				w.announce(id, nil)
				w.send(stopped)
				warned := strings.Contains(logs.String(), "announcing finished tasks failed")
				if warned != tt.wantWarn {
					t.Fatalf("stop %d: warned = %v, want %v; logs:\n%s", i, warned, tt.wantWarn, logs)
				}
				if tt.closed {
					continue
				}
				wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
				n, err := conn.WaitForNotification(wctx)
				wcancel()
				if err != nil {
					t.Fatalf("stop %d: no notification: %v", i, err)
				}
				if n.Payload != id {
					t.Fatalf("stop %d: notified %q, want %q", i, n.Payload, id)
				}
			}
		})
	}
}
