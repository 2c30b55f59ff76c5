//go:build faults

package faults

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tollgate/tollgate/internal/testdb"
)

// providerCase is one task sent to a misbehaving provider, and how it must
// end.
type providerCase struct {
	name       string
	prepare    func(t *testing.T) // scripts the provider for this task alone
	wantStatus string
	wantCalls  int
	wantMoney  string // the reservation's end: "settled" or "released"
	wantSource string // usage_records.source when settled
}

// providerScenario runs cases one at a time against one instance whose
// provider is at modelBaseURL, then checks the invariants.
func providerScenario(t *testing.T, scenario, modelBaseURL string, env map[string]string, logDir string,
	calls func(t *testing.T) []call, cases []providerCase) {
	t.Helper()
	started := time.Now()
	dbURL := testdb.New(t)
	apiKey := newOwner(t, dbURL, "faults", 1_000_000_000)
	e := serveEnv(dbURL, modelBaseURL)
	for k, v := range env {
		e[k] = v
	}
	c := newCluster(t, logDir, 1, e)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())

	var stats clientStats
	accepted := map[string]bool{}
	var notes []string
	for i, pc := range cases {
		pc.prepare(t)
		s, err := submit(ctx, c.pick, apiKey, fmt.Sprintf("provider-%d", i), taskBody(i, pc.name), &stats)
		if err != nil || s.taskID == "" {
			t.Fatalf("%s: submit: %v (status %d %s)", pc.name, err, s.status, s.code)
		}
		accepted[s.taskID] = true
		status, money, source := waitTask(t, ctx, conn, s.taskID)
		n := 0
		for _, cl := range calls(t) {
			if strings.HasPrefix(cl.IdempotencyKey, s.taskID+":") {
				n++
			}
		}
		if status != pc.wantStatus || n != pc.wantCalls || money != pc.wantMoney || source != pc.wantSource {
			t.Errorf("%s: task %s ended %s after %d provider calls, reservation %s, usage %q; want %s after %d, %s, %q",
				pc.name, s.taskID, status, n, money, source, pc.wantStatus, pc.wantCalls, pc.wantMoney, pc.wantSource)
		}
		notes = append(notes, fmt.Sprintf("%s: %s after %d calls", pc.name, status, n))
	}
	if crashed := c.crashed(); len(crashed) > 0 {
		t.Errorf("instances exited on their own: %v", crashed)
	}
	finish(t, row{scenario: scenario, tasks: len(accepted), notes: strings.Join(notes, "; ")},
		outcome{dbURL: dbURL, calls: calls(t), accepted: accepted, wantTasks: len(cases)}, started)
}

// waitTask waits for the task to be final and returns its status, how its
// reservation ended and the source of its usage record ("" for none).
func waitTask(t *testing.T, ctx context.Context, conn *pgx.Conn, id string) (status, money, source string) {
	t.Helper()
	for {
		err := conn.QueryRow(ctx, `
			SELECT t.status, COALESCE(r.state, ''), COALESCE(u.source, '')
			FROM tasks t LEFT JOIN budget_reservations r ON r.task_id = t.id LEFT JOIN usage_records u ON u.task_id = t.id
			WHERE t.id = $1`, id).Scan(&status, &money, &source)
		if err != nil {
			t.Fatalf("task %s: %v", id, err)
		}
		if status == "succeeded" || status == "failed" || status == "canceled" {
			return status, money, source
		}
		select {
		case <-ctx.Done():
			t.Fatalf("task %s still %s", id, status)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// TestProviderHangs: a provider that takes the request and never answers.
// The call times out (REQUEST_TIMEOUT_MS=2000) and is ambiguous: it may
// have run. One repeat is allowed, then the task fails rather than risk
// paying again; either way the money settles as possibly charged.
func TestProviderHangs(t *testing.T) {
	logDir := t.TempDir()
	dumpLogsOnFailure(t, logDir)
	fp := startFake(t, logDir)
	providerScenario(t, "3a provider hangs", fp.url+"/v1", nil, logDir, fp.calls, []providerCase{
		{"hang once", func(t *testing.T) { fp.script(t, scripted{Hang: true}) }, "succeeded", 2, "settled", "possibly_charged"},
		{"hang twice", func(t *testing.T) { fp.script(t, scripted{Hang: true}, scripted{Hang: true}) }, "failed", 2, "settled", "possibly_charged"},
		{"answer after the deadline", func(t *testing.T) { fp.script(t, scripted{Body: completionBody, DelayMS: 5000}) }, "succeeded", 2, "settled", "possibly_charged"},
	})
}

// TestProviderCutsConnection: a provider (a tiny TCP server, since the fake
// answers whole responses only) that reads the request and then drops the
// connection, before any answer or half-way through a 200.
func TestProviderCutsConnection(t *testing.T) {
	logDir := t.TempDir()
	dumpLogsOnFailure(t, logDir)
	cut := startCutter(t)
	providerScenario(t, "3b provider cuts connection", cut.url+"/v1", nil, logDir, cut.calls, []providerCase{
		{"cut half-way through a 200", func(*testing.T) { cut.script(cutHalf) }, "succeeded", 2, "settled", "possibly_charged"},
		{"cut before answering", func(*testing.T) { cut.script(cutBeforeAnswer) }, "succeeded", 2, "settled", "possibly_charged"},
		{"cut twice", func(*testing.T) { cut.script(cutHalf, cutBeforeAnswer) }, "failed", 2, "settled", "possibly_charged"},
	})
}

// TestProviderBroken200: a provider that answers 200 with an error body or
// with garbage. Nothing usable came back, but the provider did answer, so
// the call is over (not ambiguous): transient, retried up to the attempt
// limit, and a task that never gets an answer releases its whole
// reservation.
func TestProviderBroken200(t *testing.T) {
	logDir := t.TempDir()
	dumpLogsOnFailure(t, logDir)
	fp := startFake(t, logDir)
	errBody := `{"error":{"message":"The server had an error while processing your request.","type":"server_error","code":null}}`
	providerScenario(t, "3c provider 200 error/garbage", fp.url+"/v1", map[string]string{"TOLLGATE_MAX_ATTEMPTS": "3"}, logDir, fp.calls, []providerCase{
		{"200 with an error body", func(t *testing.T) { fp.script(t, scripted{Body: errBody}) }, "succeeded", 2, "settled", "reported"},
		{"200 with garbage", func(t *testing.T) {
			fp.script(t, scripted{Body: "<html>upstream sorry</html>", Headers: map[string]string{"Content-Type": "text/html"}})
		}, "succeeded", 2, "settled", "reported"},
		{"200 garbage every time", func(t *testing.T) {
			fp.script(t, scripted{Body: `{"choices":`}, scripted{Body: `null`}, scripted{Body: `{"choices":[{"message":{"content":""}}]}`})
		}, "failed", 3, "released", ""},
	})
}

// cutMode is what the cutter does with one request.
type cutMode int

const (
	cutNone         cutMode = iota // answer a whole, valid completion
	cutHalf                        // send the status line, headers and half the body, then close
	cutBeforeAnswer                // close right after reading the request
)

// cutter is a provider that cuts connections on demand. Each request is
// served on its own connection (Connection: close), so that no client
// retry on a reused connection can hide a cut.
type cutter struct {
	url string
	ln  net.Listener

	mu    sync.Mutex
	queue []cutMode
	log   []call
	wg    sync.WaitGroup
}

func startCutter(t *testing.T) *cutter {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := &cutter{url: "http://" + ln.Addr().String(), ln: ln}
	c.wg.Go(func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			c.wg.Go(func() { c.serve(conn) })
		}
	})
	t.Cleanup(func() { ln.Close(); c.wg.Wait() })
	return c
}

func (c *cutter) script(modes ...cutMode) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.queue = append(c.queue, modes...)
}

func (c *cutter) calls(*testing.T) []call {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]call{}, c.log...)
}

func (c *cutter) serve(conn net.Conn) {
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	req, err := http.ReadRequest(bufio.NewReader(conn))
	if err != nil {
		return
	}
	if _, err := io.Copy(io.Discard, req.Body); err != nil {
		return
	}
	c.mu.Lock()
	c.log = append(c.log, call{ReceivedAt: time.Now(), IdempotencyKey: req.Header.Get("Idempotency-Key")})
	mode := cutNone
	if len(c.queue) > 0 {
		mode, c.queue = c.queue[0], c.queue[1:]
	}
	c.mu.Unlock()

	head := fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n", len(completionBody))
	switch mode {
	case cutBeforeAnswer:
		return
	case cutHalf:
		_, _ = io.WriteString(conn, head+completionBody[:len(completionBody)/2])
		return
	}
	_, _ = io.WriteString(conn, head+completionBody)
}
