package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tollgate/tollgate/internal/testdb"
)

// TestServeProcessHelper is `tollgate serve` in a process of its own
// when TestRateLimitAcrossTwoServeProcesses starts this test binary for
// it; otherwise it does nothing. It stops on SIGINT, as main does.
func TestServeProcessHelper(t *testing.T) {
	db, addr := os.Getenv("TOLLGATE_TEST_SERVE_DB"), os.Getenv("TOLLGATE_TEST_SERVE_ADDR")
	if db == "" {
		t.Skip("started only as a serve process")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, []string{"serve"}, envFunc(map[string]string{"DATABASE_URL": db, "TOLLGATE_ADDR": addr}),
		strings.NewReader(""), io.Discard, os.Stderr); err != nil {
		t.Fatal(err)
	}
}

// Two `tollgate serve` processes on one database share one rate limit:
// many concurrent admissions split between them admit exactly the limit
// in each minute window, the rest are 429 rate_limited with Retry-After,
// and the tasks in SQL are exactly the admitted ones. The processes run on
// the real clock, so the calls may straddle a minute: the counts are
// checked per window.
func TestRateLimitAcrossTwoServeProcesses(t *testing.T) {
	t.Parallel()
	const limit, calls = 5, 40
	dbURL := testdb.New(t)
	ctx := context.Background()
	cli := func(args ...string) string {
		t.Helper()
		var out, errb bytes.Buffer
		if err := run(ctx, args, envFunc(map[string]string{"DATABASE_URL": dbURL}), strings.NewReader(""), &out, &errb); err != nil {
			t.Fatalf("%v: %v\nstderr: %s", args, err, errb.String())
		}
		return strings.TrimSpace(out.String())
	}
	admin := cli("keys", "create", "--owner", "ops", "--role", "admin")
	client := cli("keys", "create", "--owner", "acme", "--role", "client")
	cli("budget", "set", "--owner", "acme", "--total-micros", "1000000000")

	bases := make([]string, 2)
	for i := range bases {
		addr := freeAddr(t)
		bases[i] = "http://" + addr
		logs := &syncBuffer{}
		cmd := exec.Command(os.Args[0], "-test.run=^TestServeProcessHelper$")
		cmd.Env = []string{"TOLLGATE_TEST_SERVE_DB=" + dbURL, "TOLLGATE_TEST_SERVE_ADDR=" + addr}
		cmd.Stdout, cmd.Stderr = io.Discard, logs
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		t.Cleanup(func() {
			_ = cmd.Process.Signal(os.Interrupt)
			select {
			case <-done:
			case <-time.After(time.Minute):
				_ = cmd.Process.Kill()
				t.Errorf("serve process %d did not exit within a minute of SIGINT", i)
			}
		})
		waitHealthy(t, &http.Client{Timeout: 30 * time.Second}, bases[i], done, logs)
	}
	hc := &http.Client{Timeout: 30 * time.Second}
	send := func(method, url, key, idem, body string) (*http.Response, string) {
		req, err := http.NewRequest(method, url, strings.NewReader(body))
		if err != nil {
			t.Error(err)
			return nil, ""
		}
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Content-Type", "application/json")
		if idem != "" {
			req.Header.Set("Idempotency-Key", idem)
		}
		res, err := hc.Do(req)
		if err != nil {
			t.Error(err)
			return nil, ""
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res, string(b)
	}
	if res, body := send(http.MethodPut, bases[1]+"/v1/limits/acme", admin, "", fmt.Sprintf(`{"requests_per_minute": %d}`, limit)); res == nil || res.StatusCode != http.StatusOK {
		t.Fatalf("PUT limits: %v %s", res, body)
	}

	var mu sync.Mutex
	admitted, refused := 0, 0
	var wg sync.WaitGroup
	for i := range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, body := send(http.MethodPost, bases[i%2]+"/v1/tasks", client, fmt.Sprintf("k%d", i),
				`{"messages":[{"role":"user","content":"hi"}],"max_tokens":8}`)
			if res == nil {
				return
			}
			mu.Lock()
			defer mu.Unlock()
			switch res.StatusCode {
			case http.StatusAccepted:
				admitted++
			case http.StatusTooManyRequests:
				refused++
				if !strings.Contains(body, `"code":"rate_limited"`) || res.Header.Get("Retry-After") == "" ||
					res.Header.Get("x-ratelimit-limit-requests") != fmt.Sprint(limit) {
					t.Errorf("429 without its code or headers: %v %s", res.Header, body)
				}
			default:
				t.Errorf("POST: %d %s", res.StatusCode, body)
			}
		}()
	}
	wg.Wait()

	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	var tasks int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM tasks WHERE owner_id = 'acme'`).Scan(&tasks); err != nil {
		t.Fatal(err)
	}
	rows, _ := pool.Query(ctx, `SELECT requests FROM rate_windows WHERE owner_id = 'acme' AND workload = '' ORDER BY window_start`)
	windows, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		t.Fatal(err)
	}
	var counted int64
	full := false
	for _, n := range windows {
		counted += n
		if n > limit {
			t.Errorf("a window counted %d, above the limit %d", n, limit)
		}
		full = full || n == limit
	}
	if admitted+refused != calls || int64(admitted) != counted || tasks != admitted || !full {
		t.Errorf("admitted %d, refused %d, tasks %d, windows %v: want every admission counted in a window of at most %d, one full",
			admitted, refused, tasks, windows, limit)
	}
	if len(windows) == 1 && admitted != limit {
		t.Errorf("admitted %d in one window, want %d", admitted, limit)
	}
}
