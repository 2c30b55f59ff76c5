//go:build faults

package faults

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tollgate/tollgate/internal/testdb"
)

// Scenario 2 figures.
const (
	restartTasks = 100
	restartAfter = 2500 * time.Millisecond // into the run
)

// TestPostgresRestart restarts PostgreSQL (fast shutdown, then start)
// while two instances serve a steady stream of submissions against a slow
// provider. Clients may see retryable errors (503 with Retry-After) or
// delays, never another answer and never a lost task; the instances must
// reconnect by themselves: no restart of theirs, ready again, and new tasks
// run to the end.
//
// The PostgreSQL server is shared with every test package, so the scenario
// runs only with TOLLGATE_FAULTS_PG_RESTART=1 (make test-faults sets it,
// and runs after make test, never alongside it), and it refuses to restart
// a server that other databases are using.
func TestPostgresRestart(t *testing.T) {
	const scenario = "2 PostgreSQL restart (fast)"
	if os.Getenv("TOLLGATE_FAULTS_PG_RESTART") != "1" {
		record(row{scenario: scenario, skipped: "set TOLLGATE_FAULTS_PG_RESTART=1 (make test-faults does)"})
		t.Skip("restarts the shared PostgreSQL server: set TOLLGATE_FAULTS_PG_RESTART=1 to run")
	}
	restart, ensure := restartCommand(t)
	started := time.Now()
	logDir := t.TempDir()
	dumpLogsOnFailure(t, logDir)
	dbURL := testdb.New(t)
	dbName := strings.TrimPrefix(mustParse(t, dbURL).Path, "/")
	t.Cleanup(func() { ensure(t) })
	if err := waitQuiet(dbURL, dbName, 2*time.Minute); err != nil {
		t.Fatal(err)
	}

	fp := startFake(t, logDir)
	fp.script(t, slowAnswers(restartTasks, 200, 800)...)
	apiKey := newOwner(t, dbURL, "faults", 1_000_000_000_000)
	c := newCluster(t, logDir, 2, serveEnv(dbURL, fp.url+"/v1"))

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var stats clientStats
	var mu sync.Mutex
	accepted := map[string]bool{}
	replayed := 0
	var clients sync.WaitGroup
	submitAll := func(prefix string, n int, gap time.Duration) {
		for i := range n {
			clients.Go(func() {
				time.Sleep(time.Duration(i) * gap)
				s, err := submit(ctx, c.pick, apiKey, fmt.Sprintf("%s-%03d", prefix, i), taskBody(i, prefix), &stats)
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err != nil:
					t.Error(err)
				case s.taskID == "":
					t.Errorf("%s-%03d: final status %d %s, want a task", prefix, i, s.status, s.code)
				default:
					accepted[s.taskID] = true
					if s.replayed {
						replayed++
					}
				}
			})
		}
	}
	submitAll("restart", restartTasks, 80*time.Millisecond)

	time.Sleep(restartAfter)
	if err := waitQuiet(dbURL, dbName, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	var inFlight int
	if conn, err := pgx.Connect(ctx, dbURL); err == nil {
		_ = conn.QueryRow(ctx, `SELECT count(*) FROM river_job WHERE kind = 'tollgate_task' AND state = 'running'`).Scan(&inFlight)
		conn.Close(ctx)
	}
	down := time.Now()
	if out, err := restart.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", restart, err, out)
	}
	restartTook := time.Since(down)
	clients.Wait()
	submittedAt := time.Since(started)

	counts := waitFinal(t, dbURL, 150*time.Second)
	if crashed := c.crashed(); len(crashed) > 0 {
		t.Errorf("instances exited on their own: %v", crashed)
	}
	// Reconnected by themselves: ready again, and new work runs through.
	for _, in := range c.instances {
		if err := waitHTTP(in.url+"/readyz", 30*time.Second, func() bool { return !in.p.exited() }); err != nil {
			t.Errorf("%s not ready after the restart: %v", in.name, err)
		}
	}
	submitAll("after", 10, 0)
	clients.Wait()
	after := waitFinal(t, dbURL, 60*time.Second)

	// Clients saw only retryable answers: 503 (with Retry-After) or delays.
	for status, n := range stats.retryStatus {
		if status != http.StatusServiceUnavailable {
			t.Errorf("clients were answered %d %d times during the restart; want only 503 (retryable) or delays", status, n)
		}
	}
	if stats.transport > 0 {
		t.Errorf("clients saw %d transport errors: an instance dropped connections", stats.transport)
	}
	finish(t, row{
		scenario:   scenario,
		tasks:      len(accepted),
		duplicates: replayed,
		notes: fmt.Sprintf("`%s` at %s with %d calls in flight, back in %s; all submitted at %s; final %v, then 10 more after the restart: %v; clients: %s",
			strings.Join(restart.Args, " "), restartAfter, inFlight, restartTook.Round(100*time.Millisecond), submittedAt.Round(time.Second), counts, after, &stats),
	}, outcome{dbURL: dbURL, calls: fp.calls(t), accepted: accepted, wantTasks: restartTasks + 10}, started)
}

func mustParse(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// restartCommand returns the command that restarts the test server with a
// fast shutdown, and a function that starts it again if a failed restart
// left it down. TOLLGATE_FAULTS_PG_RESTART_CMD (run with bash -c) replaces
// the default, pg_ctlcluster on the Debian cluster that serves the test
// server's port, for servers managed otherwise (a container, a private
// cluster).
func restartCommand(t *testing.T) (*exec.Cmd, func(*testing.T)) {
	t.Helper()
	if custom := os.Getenv("TOLLGATE_FAULTS_PG_RESTART_CMD"); custom != "" {
		return exec.Command("bash", "-c", custom), func(*testing.T) {}
	}
	version, name, port := localCluster(t)
	return exec.Command("pg_ctlcluster", "--skip-systemctl-redirect", version, name, "restart", "-m", "fast"),
		func(t *testing.T) { ensureRunning(t, version, name, port) }
}

// localCluster finds the Debian cluster (version and name) that serves the
// test server's port on this machine.
func localCluster(t *testing.T) (version, name, port string) {
	t.Helper()
	u := mustParse(t, testdb.ServerURL())
	host := u.Hostname()
	port = u.Port()
	if port == "" {
		port = "5432"
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		t.Fatalf("the test server %s is not local: the restart scenario only restarts a cluster on this machine", host)
	}
	out, err := exec.Command("pg_lsclusters", "--no-header").Output()
	if err != nil {
		t.Fatalf("pg_lsclusters: %v (the restart scenario needs the Debian postgresql-common tools)", err)
	}
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) >= 4 && f[2] == port && strings.HasPrefix(f[3], "online") {
			return f[0], f[1], port
		}
	}
	t.Fatalf("no online cluster on port %s in:\n%s", port, out)
	return "", "", ""
}

// waitQuiet waits until no client of another database is connected: the
// server is shared, and restarting it under another test run would fail
// that run.
func waitQuiet(dbURL, dbName string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	conn, err := connect(ctx, dbURL)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	var others string
	for {
		err := conn.QueryRow(ctx, `
			SELECT COALESCE(string_agg(DISTINCT COALESCE(datname, '?'), ', '), '')
			FROM pg_stat_activity
			WHERE backend_type = 'client backend' AND pid <> pg_backend_pid() AND datname IS DISTINCT FROM $1`, dbName).Scan(&others)
		if err == nil && others == "" {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("refusing to restart the shared PostgreSQL server: other databases are in use (%s); run make test-faults alone", others)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// ensureRunning starts the cluster if a failed restart left it down.
func ensureRunning(t *testing.T, version, name, port string) {
	if exec.Command("pg_isready", "-q", "-h", "127.0.0.1", "-p", port).Run() == nil {
		return
	}
	if out, err := exec.Command("pg_ctlcluster", "--skip-systemctl-redirect", version, name, "start").CombinedOutput(); err != nil {
		t.Errorf("start PostgreSQL again: %v\n%s", err, out)
	}
}
