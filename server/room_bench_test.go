package server_test

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate/tollgate/accounts"
)

// BenchmarkOwnerBesideNoRoomFloods measures what four clients sending
// 1 MiB prompts from an owner with no room cost another owner: one task at
// a time of the paying owner, in alternating rounds of floodRound tasks
// alone and beside the four floods, so both figures come from the same
// run on the same host. It reports each round kind's p50 and their ratio
// (beside/alone), and the refusals the floods got; it asserts no timing.
// FLOOD_PATH=/v1/nowhere sends the floods to a 404 instead: the least any
// refusal of the same traffic can cost, for comparison.
func BenchmarkOwnerBesideNoRoomFloods(b *testing.B) {
	const floodRound, floods = 20, 4
	floodPath := cmp.Or(os.Getenv("FLOOD_PATH"), "/v1/chat/completions")
	const floodEvery = 8400 * time.Microsecond
	e := newEnv(b, envOptions{})
	broke := e.owner("broke", accounts.RoleClient, 0)
	payer := e.owner("payer", accounts.RoleClient, 1<<50)
	prompt := strings.Repeat("a prompt from an owner with no room. ", 1_000_000/37)
	flood := []byte(fmt.Sprintf(`{"model":%q,"max_tokens":16,"messages":[{"role":"user","content":%q}]}`, testModel, prompt))
	var refused atomic.Int64
	// A flood's body is sent as a remote client's would arrive: headers
	// and the first KiB, the rest never written unless the server reads
	// it, so the benchmark's own writes of 1 MiB bodies (on the same
	// cores) do not stand in for the server's work.
	floodOnce := func(ctx context.Context, client *http.Client) {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.url+floodPath, &stalledBody{ctx: ctx, head: bytes.NewReader(flood[:1024])})
		if err != nil {
			b.Error(err)
			return
		}
		req.ContentLength = int64(len(flood))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+broke)
		res, err := client.Do(req)
		if err != nil {
			return
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if res.StatusCode == http.StatusPaymentRequired || res.StatusCode == http.StatusTooManyRequests {
			refused.Add(1)
		}
	}
	startFloods := func() (stop func()) {
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		for range floods {
			wg.Go(func() {
				client := &http.Client{Transport: &http.Transport{}}
				defer client.CloseIdleConnections()
				// Each client sends at a 1 Gbit/s link's pace: a 1 MiB
				// body every 8.4 ms.
				tick := time.NewTicker(floodEvery)
				defer tick.Stop()
				for ctx.Err() == nil {
					wg.Go(func() { floodOnce(ctx, client) })
					select {
					case <-tick.C:
					case <-ctx.Done():
					}
				}
			})
		}
		return func() { cancel(); wg.Wait() }
	}
	task := func(i int) time.Duration {
		start := time.Now()
		r := e.post(payer, fmt.Sprint("p", i), taskBody("benchmark prompt text", 16), map[string]string{"Prefer": "wait=30"})
		if r.status != http.StatusOK {
			b.Fatalf("POST: %d %s", r.status, r.body)
		}
		return time.Since(start)
	}
	task(-1) // warm the key cache and the statement cache
	var alone, beside []time.Duration
	stop := func() {}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		inFlood := (i/floodRound)%2 == 1
		if i%floodRound == 0 {
			stop()
			stop = func() {}
			if inFlood {
				stop = startFloods()
			}
		}
		if d := task(i); inFlood {
			beside = append(beside, d)
		} else {
			alone = append(alone, d)
		}
	}
	b.StopTimer()
	stop()
	if len(alone) == 0 || len(beside) == 0 {
		return // too few iterations for both kinds of round
	}
	pa, pb := median(alone), median(beside)
	b.ReportMetric(float64(pa.Microseconds())/1000, "p50-alone-ms")
	b.ReportMetric(float64(pb.Microseconds())/1000, "p50-beside-ms")
	b.ReportMetric(float64(pb)/float64(pa), "p50-ratio")
	b.ReportMetric(float64(refused.Load()), "floods-refused")
}

// median is the middle of ds.
func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}
