package server_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tollgate/tollgate/accounts"
	"github.com/tollgate/tollgate/internal/testdb"
)

// BenchmarkTaskLifecycle measures the whole path in-process (HTTP POST,
// task, reservation, job, provider call through the fake, settlement,
// replay record) with 32 concurrent clients: tasks/s and CPU profiles
// (-cpuprofile) for the performance work. It asserts no timing.
func BenchmarkTaskLifecycle(b *testing.B) {
	e := newEnv(b, envOptions{})
	key := e.owner("bench", accounts.RoleClient, 1<<50)
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	sem := make(chan struct{}, 32)
	for i := 0; i < b.N; i++ {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			r := e.post(key, fmt.Sprint("b", i), taskBody("benchmark prompt text", 16), map[string]string{"Prefer": "wait=30"})
			if r.status != http.StatusOK {
				b.Errorf("POST: %d %s", r.status, r.body)
			}
		}()
	}
	wg.Wait()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "tasks/s")
}

// BenchmarkTaskRoundTrips counts what one task costs in round trips to
// PostgreSQL on the happy path: one client at a time (so no batching), a
// POST that waits for the answer, the first attempt run on arrival. Each
// statement sent alone and each pipeline counts once; River's own polling
// and maintenance are left out, as they do not follow the tasks. The
// figure, roundtrips/task, is a count, not a timing: it moves only when
// the code sends more or fewer round trips. It asserts nothing.
func BenchmarkTaskRoundTrips(b *testing.B) {
	cfg, err := pgxpool.ParseConfig(testdb.New(b))
	if err != nil {
		b.Fatal(err)
	}
	// River's polling and maintenance (its named queries other than job
	// inserts) do not follow the tasks.
	trips := &testdb.RoundTrips{Skip: func(sql string) bool {
		return strings.Contains(sql, "-- name: ") && !strings.Contains(sql, "-- name: JobInsert")
	}}
	cfg.ConnConfig.Tracer = trips
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pool.Close)
	e := newEnv(b, envOptions{pool: pool})
	key := e.owner("bench", accounts.RoleClient, 1<<50)
	// The first task warms the key cache and the statement cache.
	if r := e.post(key, "warm", taskBody("benchmark prompt text", 16), map[string]string{"Prefer": "wait=30"}); r.status != http.StatusOK {
		b.Fatalf("POST: %d %s", r.status, r.body)
	}
	b.ResetTimer()
	before := trips.N()
	for i := 0; i < b.N; i++ {
		r := e.post(key, fmt.Sprint("b", i), taskBody("benchmark prompt text", 16), map[string]string{"Prefer": "wait=30"})
		if r.status != http.StatusOK {
			b.Fatalf("POST: %d %s", r.status, r.body)
		}
	}
	b.ReportMetric(float64(trips.N()-before)/float64(b.N), "roundtrips/task")
}

// BenchmarkPollLargePrompt measures GET /v1/tasks/{id} on a finished task
// whose prompt is 64 KiB: what a poll costs the process (allocs/op, B/op,
// both sides of the in-process HTTP exchange) as prompts grow. A poll
// answers the task's metadata, never its prompt, so the cost should not
// follow the prompt's size. It asserts nothing.
func BenchmarkPollLargePrompt(b *testing.B) {
	e := newEnv(b, envOptions{})
	key := e.owner("bench", accounts.RoleClient, 1<<50)
	r := e.post(key, "large", taskBody(strings.Repeat("a long prompt ", 64<<10/14), 16), map[string]string{"Prefer": "wait=30"})
	if r.status != http.StatusOK {
		b.Fatalf("POST: %d %s", r.status, r.body)
	}
	id := r.task(b).ID
	client := &http.Client{}
	get := func() {
		req, _ := http.NewRequest(http.MethodGet, e.url+"/v1/tasks/"+id, nil)
		req.Header.Set("Authorization", "Bearer "+key)
		res, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			b.Fatalf("GET: %d", res.StatusCode)
		}
	}
	get() // warm the key cache and the statement cache
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		get()
	}
}
