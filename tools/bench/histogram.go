package bench

import (
	"bufio"
	"bytes"
	"context"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/tollgate/tollgate/tools/bench/stats"
)

// The server's own view of admission: tollgate_http_request_seconds for
// POST /v1/tasks, read before and after a step's arrivals. Laid beside the
// client's admission latency it splits the time: what the server took from
// routing the request to writing the answer, and the rest (the load
// generator's own scheduling, the connection, the kernel), which on a
// shared 2-core machine is part of what a client waits.

// admissionSeries selects the admission series of the server's request
// histogram.
const admissionSeries = `tollgate_http_request_seconds_bucket{method="POST",route="/v1/tasks",`

// parseBuckets returns the cumulative buckets of the series whose lines
// start with prefix (a metric name and the labels before le), ordered by
// bound, +Inf last.
func parseBuckets(body []byte, prefix string) []stats.Bucket {
	var out []stats.Bucket
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), prefix)
		if !ok {
			continue
		}
		le, rest, ok := strings.Cut(line, `"}`)
		if !ok {
			continue
		}
		le, ok = strings.CutPrefix(le, `le="`)
		if !ok {
			continue
		}
		bound, err := strconv.ParseFloat(le, 64) // "+Inf" parses as +Inf
		if err != nil {
			continue
		}
		val, _, _ := strings.Cut(strings.TrimSpace(rest), " ")
		n, err := strconv.ParseFloat(val, 64)
		if err != nil {
			continue
		}
		out = append(out, stats.Bucket{LE: bound, Count: n})
	}
	slices.SortFunc(out, func(a, b stats.Bucket) int {
		switch {
		case a.LE < b.LE:
			return -1
		case a.LE > b.LE:
			return 1
		}
		return 0
	})
	return out
}

// ServerLatency is the server's own timing of the step's admissions, from
// its histogram's buckets: quantiles are interpolated within a bucket, so
// they are as fine as the buckets (1–15 ms wide below 50 ms).
type ServerLatency struct {
	N   int     `json:"n"`
	P50 float64 `json:"p50_ms"`
	P95 float64 `json:"p95_ms"`
	P99 float64 `json:"p99_ms"`
}

// summarizeBuckets turns the buckets of a step (seconds) into a
// ServerLatency (milliseconds).
func summarizeBuckets(bs []stats.Bucket) ServerLatency {
	if len(bs) == 0 || bs[len(bs)-1].Count <= 0 {
		return ServerLatency{}
	}
	return ServerLatency{
		N:   int(bs[len(bs)-1].Count),
		P50: stats.Quantile(0.50, bs) * 1000,
		P95: stats.Quantile(0.95, bs) * 1000,
		P99: stats.Quantile(0.99, bs) * 1000,
	}
}

// serverReading is one scrape of the server's metrics: its admission
// histogram and its connection pool's counters.
type serverReading struct {
	admission []stats.Bucket
	pool      poolCounters
	gc        gcCounters
}

// gcCounters are the server's Go collector's GC pause summary totals.
type gcCounters struct{ cycles, pauseSeconds float64 }

// ServerGC is the server's garbage collection over a step: its cycles and
// the time they stopped the world (go_gc_duration_seconds), which every
// request in flight waits out.
type ServerGC struct {
	Cycles  int     `json:"cycles"`
	PauseMS float64 `json:"pause_ms"`
}

// gcBetween is the GC work between two readings.
func gcBetween(before, after gcCounters) ServerGC {
	if after.cycles < before.cycles {
		return ServerGC{}
	}
	return ServerGC{Cycles: int(after.cycles - before.cycles), PauseMS: (after.pauseSeconds - before.pauseSeconds) * 1000}
}

// poolCounters are the server's tollgate_db_pool_* counters.
type poolCounters struct{ acquires, waits, waitSeconds float64 }

// readServer scrapes the server's metrics once. A server without the
// histogram or the pool's series gives none of them.
func readServer(ctx context.Context, client *http.Client, metricsURL string) (serverReading, error) {
	body, err := scrapeMetrics(ctx, client, metricsURL)
	if err != nil {
		return serverReading{}, err
	}
	m := parseMetrics(body)
	return serverReading{
		admission: parseBuckets(body, admissionSeries),
		pool: poolCounters{
			acquires: m["tollgate_db_pool_acquires_total"], waits: m["tollgate_db_pool_waits_total"],
			waitSeconds: m["tollgate_db_pool_wait_seconds_total"],
		},
		gc: gcCounters{cycles: m["go_gc_duration_seconds_count"], pauseSeconds: m["go_gc_duration_seconds_sum"]},
	}, nil
}

// PoolWaits is how the server's connection pool served a step, per task
// sent: connections taken, how many of those waited (none idle), and the
// time waited.
type PoolWaits struct {
	AcquiresPerTask float64 `json:"acquires_per_task"`
	WaitsPerTask    float64 `json:"waits_per_task"`
	WaitMSPerTask   float64 `json:"wait_ms_per_task"`
}

// poolWaits is the pool's use between two readings, per task.
func poolWaits(before, after poolCounters, tasks int) PoolWaits {
	if tasks <= 0 || after.acquires <= before.acquires {
		return PoolWaits{}
	}
	n := float64(tasks)
	return PoolWaits{
		AcquiresPerTask: (after.acquires - before.acquires) / n,
		WaitsPerTask:    (after.waits - before.waits) / n,
		WaitMSPerTask:   (after.waitSeconds - before.waitSeconds) * 1000 / n,
	}
}
