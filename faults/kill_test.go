//go:build faults

package faults

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tollgate/tollgate/internal/testdb"
)

// Scenario 1 figures. The issue asks for 50 kill points in a 200-task run.
const (
	killTasks     = 200
	killPoints    = 50
	killInstances = 3
)

// TestSIGKILLMidCall runs three instances on one database against a slow
// provider and SIGKILLs one of them at random moments while calls are in
// flight, restarting each killed instance at once. Clients retry their
// POSTs on another instance under the same Idempotency-Key. Every task
// must end final, and no attempt may reach the provider twice: a call
// interrupted by a kill leaves the job running with nothing journalled; a
// surviving instance rescues the job (River records the rescue in the job's
// errors) and the next run journals the interrupted call as ambiguous
// before anything else.
func TestSIGKILLMidCall(t *testing.T) {
	started := time.Now()
	logDir := t.TempDir()
	dumpLogsOnFailure(t, logDir)
	dbURL := testdb.New(t)
	fp := startFake(t, logDir)
	// Slow answers keep calls in flight; once they run out the fake answers
	// at once, which only makes the tail of the run faster.
	fp.script(t, slowAnswers(killTasks*2, 200, 1500)...)
	apiKey := newOwner(t, dbURL, "faults", 1_000_000_000_000)
	c := newCluster(t, logDir, killInstances, serveEnv(dbURL, fp.url+"/v1"))

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	// Clients: one submission every 60ms, each retried until answered.
	var stats clientStats
	var mu sync.Mutex
	accepted := map[string]bool{}
	replayed := 0
	var submitErrs []error
	var clients sync.WaitGroup
	for i := range killTasks {
		clients.Go(func() {
			time.Sleep(time.Duration(i) * 60 * time.Millisecond)
			s, err := submit(ctx, c.pick, apiKey, fmt.Sprintf("kill-%03d", i), taskBody(i, "kill"), &stats)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				submitErrs = append(submitErrs, err)
			case s.taskID == "":
				submitErrs = append(submitErrs, fmt.Errorf("kill-%03d: final status %d %s", i, s.status, s.code))
			default:
				accepted[s.taskID] = true
				if s.replayed {
					replayed++
				}
			}
		})
	}

	// The killer: at random moments while an attempt is in flight, SIGKILL
	// a random ready instance and start it again at once.
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var kills, killsInFlight atomic.Int32
	var restarts sync.WaitGroup
	var restartErrs []error
	for range killPoints {
		time.Sleep(time.Duration(150+rand.IntN(450)) * time.Millisecond)
		inFlight := 0
		for wait := time.Now().Add(3 * time.Second); time.Now().Before(wait); time.Sleep(20 * time.Millisecond) {
			if err := conn.QueryRow(ctx, `SELECT count(*) FROM river_job WHERE kind = 'tollgate_task' AND state = 'running'`).Scan(&inFlight); err == nil && inFlight > 0 {
				break
			}
		}
		// A random instance that is up; one still restarting from an
		// earlier kill cannot be killed again.
		var in *instance
		for in == nil {
			for _, i := range rand.Perm(len(c.instances)) {
				if c.instances[i].kill() {
					in = c.instances[i]
					break
				}
			}
			if in == nil {
				time.Sleep(20 * time.Millisecond)
			}
		}
		kills.Add(1)
		if inFlight > 0 {
			killsInFlight.Add(1)
		}
		restarts.Go(func() {
			if err := c.start(in); err != nil {
				mu.Lock()
				restartErrs = append(restartErrs, err)
				mu.Unlock()
			}
		})
	}
	killPhase := time.Since(started)
	clients.Wait()
	restarts.Wait()
	for _, err := range append(submitErrs, restartErrs...) {
		t.Error(err)
	}
	submitted := time.Since(started)

	counts := waitFinal(t, dbURL, 150*time.Second)
	if crashed := c.crashed(); len(crashed) > 0 {
		t.Errorf("instances exited on their own: %v", crashed)
	}
	var interrupted, ambiguousFailed int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM task_attempts WHERE error_code = 'interrupted'`).Scan(&interrupted); err != nil {
		t.Fatal(err)
	}
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM tasks WHERE status = 'failed' AND error->>'class' = 'ambiguous'`).Scan(&ambiguousFailed); err != nil {
		t.Fatal(err)
	}
	if interrupted == 0 {
		t.Error("no kill struck an attempt mid-call: the scenario proved nothing; make the provider slower")
	}

	finish(t, row{
		scenario:   "1 SIGKILL mid-call, 3 instances",
		tasks:      len(accepted),
		duplicates: replayed,
		notes: fmt.Sprintf("%d kills (%d with calls in flight) over %s; %d attempts interrupted; all submitted at %s, all final at %s; final %v (%d failed as ambiguous); clients: %s",
			kills.Load(), killsInFlight.Load(), killPhase.Round(time.Second), interrupted, submitted.Round(time.Second),
			time.Since(started).Round(time.Second), counts, ambiguousFailed, &stats),
	}, outcome{dbURL: dbURL, calls: fp.calls(t), accepted: accepted, wantTasks: killTasks}, started)
}
