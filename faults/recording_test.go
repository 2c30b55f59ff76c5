//go:build faults

package faults

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tollgate/tollgate/internal/testdb"
)

// Scenario 6 figures.
const (
	recordingTasks = 100
	// recordingArmed is how long settlements fail at random.
	recordingArmed = 8 * time.Second
)

// TestRecordingFails makes the transactions that record succeeded calls
// fail at random on three instances: while armed, a trigger on the
// settlement's usage record terminates its own backend (the instance's
// connection lost mid-transaction) for a quarter of the settlements and
// raises a check violation for another quarter. A failed recording keeps
// the answer, and whatever run records the task next records it: every
// task must end succeeded with exactly one provider call, settled at its
// reported usage (none possibly charged), no kept answer left behind.
func TestRecordingFails(t *testing.T) {
	started := time.Now()
	logDir := t.TempDir()
	dumpLogsOnFailure(t, logDir)
	dbURL := testdb.New(t)
	fp := startFake(t, logDir)
	fp.script(t, slowAnswers(recordingTasks, 50, 400)...)
	apiKey := newOwner(t, dbURL, "faults", 1_000_000_000_000)

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, `
		CREATE TABLE faults_armed (armed boolean NOT NULL);
		INSERT INTO faults_armed VALUES (true);
		CREATE SEQUENCE faults_hits;
		CREATE FUNCTION faults_recording() RETURNS trigger LANGUAGE plpgsql AS $$
		DECLARE r float8 := random();
		BEGIN
			IF NOT (SELECT armed FROM faults_armed) OR r >= 0.5 THEN
				RETURN NEW;
			END IF;
			PERFORM nextval('faults_hits');
			IF r < 0.25 THEN
				PERFORM pg_terminate_backend(pg_backend_pid());
				PERFORM pg_sleep(10);
			END IF;
			RAISE EXCEPTION 'injected recording fault' USING ERRCODE = 'check_violation';
		END $$;
		CREATE TRIGGER faults_recording BEFORE INSERT ON usage_records FOR EACH ROW EXECUTE FUNCTION faults_recording();`); err != nil {
		t.Fatal(err)
	}
	c := newCluster(t, logDir, 3, serveEnv(dbURL, fp.url+"/v1"))

	var stats clientStats
	var mu sync.Mutex
	accepted := map[string]bool{}
	var wg sync.WaitGroup
	for i := range recordingTasks {
		wg.Go(func() {
			time.Sleep(time.Duration(i) * 40 * time.Millisecond)
			s, err := submit(ctx, c.pick, apiKey, fmt.Sprintf("recording-%03d", i), taskBody(i, "recording"), &stats)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				t.Error(err)
			case s.taskID == "":
				t.Errorf("recording-%03d: final status %d %s", i, s.status, s.code)
			default:
				accepted[s.taskID] = true
			}
		})
	}
	wg.Wait()
	if d := recordingArmed - time.Since(started); d > 0 {
		time.Sleep(d)
	}
	var hits int64
	if err := conn.QueryRow(ctx, `UPDATE faults_armed SET armed = false RETURNING (SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM faults_hits)`).Scan(&hits); err != nil {
		t.Fatal(err)
	}
	if hits == 0 {
		t.Error("no recording failed: the scenario proved nothing")
	}
	counts := waitFinal(t, dbURL, 150*time.Second)

	calls := fp.calls(t)
	perTask := map[string]int{}
	for _, cl := range calls {
		id, _, _ := strings.Cut(cl.IdempotencyKey, ":")
		perTask[id]++
	}
	for id := range accepted {
		if perTask[id] != 1 {
			t.Errorf("task %s: %d provider calls, want 1", id, perTask[id])
		}
	}
	var notSucceeded, possiblyCharged, kept int
	if err := conn.QueryRow(ctx, `
		SELECT (SELECT count(*) FROM tasks WHERE status <> 'succeeded'),
		       (SELECT count(*) FROM usage_records WHERE source = 'possibly_charged'),
		       (SELECT count(*) FROM task_kept_answers)`).Scan(&notSucceeded, &possiblyCharged, &kept); err != nil {
		t.Fatal(err)
	}
	if notSucceeded != 0 || possiblyCharged != 0 || kept != 0 {
		t.Errorf("%d tasks not succeeded, %d possibly charged, %d kept answers left; want 0, 0, 0", notSucceeded, possiblyCharged, kept)
	}

	finish(t, row{
		scenario: "6 recording fails (lost connection, constraint)",
		tasks:    len(accepted),
		notes: fmt.Sprintf("%d recordings failed while armed; %d provider calls for %d tasks; final %v; clients: %s",
			hits, len(calls), len(accepted), counts, &stats),
	}, outcome{dbURL: dbURL, calls: calls, accepted: accepted, wantTasks: recordingTasks}, started)
}
