package migrations_test

import (
	"context"
	"regexp"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/tollgate/tollgate/internal/testdb"
	"github.com/tollgate/tollgate/migrations"
)

// Every migration can be reverted and re-applied: down to nothing, then up
// to the latest, leaving a current, clean schema.
func TestDownAndUpRoundTrip(t *testing.T) {
	t.Parallel()
	url := testdb.New(t)
	m, err := migrations.New(url)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if v, dirty, err := m.Version(); err != nil || dirty || v != migrations.Latest() {
		t.Fatalf("fresh database at version %d dirty=%v err=%v; want %d", v, dirty, err, migrations.Latest())
	}
	// Step down one migration at a time: each down file runs on its own.
	for steps := 0; ; steps++ {
		v, dirty, err := m.Version()
		if err != nil || dirty {
			t.Fatalf("after %d steps down: version %d dirty=%v err=%v", steps, v, dirty, err)
		}
		if v == 0 {
			break
		}
		if steps > 1000 {
			t.Fatal("down never reached version 0")
		}
		if err := m.Down(1); err != nil {
			t.Fatalf("down from %d: %v", v, err)
		}
	}
	if err := m.Up(); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	ok, err := migrations.Current(context.Background(), conn)
	if err != nil || !ok {
		t.Errorf("Current after round trip = %v, %v; want true", ok, err)
	}
	var riverVersions int
	if err := conn.QueryRow(context.Background(), `SELECT count(*) FROM river_migration WHERE line = 'main'`).Scan(&riverVersions); err != nil {
		t.Fatal(err)
	}
	if riverVersions != 8 {
		t.Errorf("river_migration records %d versions, want 8", riverVersions)
	}
}

// TestTaskFinishCanBeHOT: PostgreSQL makes an UPDATE heap-only (no new
// entry in any index) only when no index of the table keys on, computes
// from or filters on a column it changes, and when the new version fits on
// the row's page. A succeeded task's finish changes the columns below; an
// index that names one of them would put an entry in every index of tasks,
// the request words' GIN index included, for every finish.
func TestTaskFinishCanBeHOT(t *testing.T) {
	t.Parallel()
	conn := connect(t)
	finishChanges := []string{"status", "result", "error", "output_sealed", "finished_at", "updated_at"}
	rows, err := conn.Query(t.Context(), `
		SELECT c.relname, pg_get_indexdef(i.indexrelid)
		FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
		WHERE i.indrelid = 'tasks'::regclass`)
	if err != nil {
		t.Fatal(err)
	}
	defs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) ([2]string, error) {
		var d [2]string
		return d, r.Scan(&d[0], &d[1])
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(defs) == 0 {
		t.Fatal("no index on tasks")
	}
	for _, d := range defs {
		for _, col := range finishChanges {
			if regexp.MustCompile(`\b` + col + `\b`).MatchString(d[1]) {
				t.Errorf("index %s names %s, which a task's finish changes: %s", d[0], col, d[1])
			}
		}
	}
	var opts []string
	if err := conn.QueryRow(t.Context(), `SELECT coalesce(reloptions, '{}') FROM pg_class WHERE oid = 'tasks'::regclass`).Scan(&opts); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(opts, "fillfactor=75") {
		t.Errorf("tasks reloptions = %v, want fillfactor=75: room on each page for its tasks' finished versions", opts)
	}
}

// TestEndedUnsucceededFollowsStatus: the search mark of failed and canceled
// tasks is kept by a trigger, so that writers that do not know it (the
// previous release during a rolling deploy, a hand edit) keep it right.
func TestEndedUnsucceededFollowsStatus(t *testing.T) {
	t.Parallel()
	conn := connect(t)
	if _, err := conn.Exec(t.Context(), `
		INSERT INTO owners (id) VALUES ('acme');
		INSERT INTO tasks (id, owner_id, idempotency_key, request_hash, request, model, status, deadline_at)
		SELECT ('00000000-0000-0000-0000-00000000000' || i)::uuid, 'acme', 'k' || i, '\x00', '{}', 'm', 'queued', now() + interval '1 hour'
		FROM generate_series(1, 3) AS i`); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		id, finish string
		want       *string
	}{
		{"00000000-0000-0000-0000-000000000001", `status = 'failed', error = '{"code": "x"}', finished_at = now()`, ptr("failed")},
		{"00000000-0000-0000-0000-000000000002", `status = 'canceled', finished_at = now()`, ptr("canceled")},
		{"00000000-0000-0000-0000-000000000003", `status = 'succeeded', result = '{}', finished_at = now()`, nil},
	}
	for _, tt := range tests {
		// The finish as the previous release wrote it: no word of the mark.
		if _, err := conn.Exec(t.Context(), `UPDATE tasks SET `+tt.finish+` WHERE id = $1`, tt.id); err != nil {
			t.Fatal(err)
		}
		var got *string
		if err := conn.QueryRow(t.Context(), `SELECT ended_unsucceeded FROM tasks WHERE id = $1`, tt.id).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if (got == nil) != (tt.want == nil) || (got != nil && *got != *tt.want) {
			t.Errorf("task %s after %s: ended_unsucceeded = %v, want %v", tt.id, tt.finish, deref(got), deref(tt.want))
		}
	}
}

func ptr(s string) *string { return &s }

func deref(s *string) string {
	if s == nil {
		return "NULL"
	}
	return *s
}

// connect opens a connection to a fresh migrated database, closed with t.
func connect(t *testing.T) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), testdb.New(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// TestRouteGuardsMoveToRateWindows: 000101 carries the routes' guard
// counts from route_limits into rate_windows, beside the limits' minute
// windows, and its down carries them back.
func TestRouteGuardsMoveToRateWindows(t *testing.T) {
	t.Parallel()
	url := testdb.New(t)
	m, err := migrations.New(url)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	// Down to the baseline and back: the migrations after 000101 are
	// contiguous, so this many steps undo 000101 and everything after it.
	toBaseline := int(migrations.Latest()) - 100
	if err := m.Down(toBaseline); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(t.Context(), `
		INSERT INTO route_limits (route, owner_id, user_id, kind, window_start, count) VALUES
			('summarize', 'acme', 'h:ab:cd', 'day', date_trunc('day', now()), 7),
			('summarize', 'acme', 'h:ab:cd', 'window', date_trunc('minute', now()), 2);
		INSERT INTO rate_windows (owner_id, workload, window_start, requests) VALUES ('acme', '', date_trunc('minute', now()), 3)`); err != nil {
		t.Fatal(err)
	}
	if err := m.Up(); err != nil {
		t.Fatal(err)
	}
	windows := func() []string {
		t.Helper()
		rows, err := conn.Query(t.Context(), `SELECT workload || ' ' || span::text || ' ' || requests FROM rate_windows ORDER BY workload`)
		if err != nil {
			t.Fatal(err)
		}
		got, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	want := []string{" 00:01:00 3", "route:summarize:day:h:ab:cd 1 day 7", "route:summarize:window:h:ab:cd 366 days 2"}
	if got := windows(); !slices.Equal(got, want) {
		t.Errorf("rate_windows after up = %q, want %q", got, want)
	}
	if err := m.Down(toBaseline); err != nil {
		t.Fatal(err)
	}
	rows, err := conn.Query(t.Context(), `SELECT route || ' ' || user_id || ' ' || kind || ' ' || count FROM route_limits ORDER BY kind`)
	if err != nil {
		t.Fatal(err)
	}
	back, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"summarize h:ab:cd day 7", "summarize h:ab:cd window 2"}; !slices.Equal(back, want) {
		t.Errorf("route_limits after down = %q, want %q", back, want)
	}
	var n int
	if err := conn.QueryRow(t.Context(), `SELECT count(*) FROM rate_windows`).Scan(&n); err != nil || n != 1 {
		t.Errorf("rate_windows after down holds %d rows (%v), want the limit's one", n, err)
	}
}
