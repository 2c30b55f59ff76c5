package server_test

import (
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/tollgate/tollgate/accounts"
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
