package main

import (
	"maps"
	"math"
	"slices"
	"time"

	"github.com/tollgate/tollgate/tools/bench/stats"
)

// summary describes one run against one target. Latencies are in
// milliseconds and cover successful requests only; failures are counted in
// Errors.
type summary struct {
	N         int     `json:"n"`
	Errors    int     `json:"errors"`
	FirstErr  string  `json:"first_error,omitempty"`
	Mean      float64 `json:"mean_ms"`
	P50       float64 `json:"p50_ms"`
	P90       float64 `json:"p90_ms"`
	P99       float64 `json:"p99_ms"`
	Max       float64 `json:"max_ms"`
	PerSecond float64 `json:"achieved_per_s"` // successful answers over the run's wall time
}

// summarize sorts a copy of the latencies of a run that took elapsed and
// summarises it. An empty sample gives zero latencies.
func summarize(lat []time.Duration, errors int, elapsed time.Duration) summary {
	s := summary{N: len(lat), Errors: errors}
	if elapsed > 0 {
		s.PerSecond = math.Round(float64(len(lat))/elapsed.Seconds()*10) / 10
	}
	if len(lat) == 0 {
		return s
	}
	sorted := stats.Sorted(lat)
	s.Mean = millis(stats.Mean(sorted))
	s.P50 = millis(stats.Percentile(sorted, 50))
	s.P90 = millis(stats.Percentile(sorted, 90))
	s.P99 = millis(stats.Percentile(sorted, 99))
	s.Max = millis(sorted[len(sorted)-1])
	return s
}

// millis rounds d to microseconds and returns it in milliseconds.
func millis(d time.Duration) float64 { return stats.MS(d.Round(time.Microsecond)) }

// added is what a gateway adds over the upstream called directly, as the
// difference of percentiles (not the percentile of per-request
// differences: the two samples are separate runs).
type added struct {
	Gateway string  `json:"gateway"`
	P50     float64 `json:"p50_ms"`
	P99     float64 `json:"p99_ms"`
}

// addedOver returns gateway minus direct at p50 and p99, rounded to
// microseconds.
func addedOver(gateway string, g, direct summary) added {
	round := func(v float64) float64 { return math.Round(v*1000) / 1000 }
	return added{Gateway: gateway, P50: round(g.P50 - direct.P50), P99: round(g.P99 - direct.P99)}
}

// second is the latency of the requests due in one second of an open-loop
// run: it shows whether a tail comes from a start-up backlog or from the
// whole run.
type second struct {
	Second int     `json:"second"` // from the start of the run
	N      int     `json:"n"`
	P50    float64 `json:"p50_ms"`
	Max    float64 `json:"max_ms"`
}

// bySecond groups latencies by the second their request was due (sched[i]
// for lat[i], both in request order) and summarises each second that had
// requests.
func bySecond(sched, lat []time.Duration) []second {
	groups := map[int][]time.Duration{}
	for i, at := range sched {
		s := int(at / time.Second)
		groups[s] = append(groups[s], lat[i])
	}
	keys := slices.Sorted(maps.Keys(groups))
	out := make([]second, 0, len(keys))
	for _, k := range keys {
		g := groups[k]
		slices.Sort(g)
		out = append(out, second{Second: k, N: len(g), P50: millis(stats.Percentile(g, 50)), Max: millis(g[len(g)-1])})
	}
	return out
}
