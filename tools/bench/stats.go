package bench

import (
	"cmp"
	"maps"
	"math"
	"slices"
	"time"
)

// Summary describes a sample of latencies, in milliseconds.
type Summary struct {
	N    int     `json:"n"`
	Min  float64 `json:"min_ms"`
	Mean float64 `json:"mean_ms"`
	P50  float64 `json:"p50_ms"`
	P95  float64 `json:"p95_ms"`
	P99  float64 `json:"p99_ms"`
	Max  float64 `json:"max_ms"`
}

// Summarize sorts a copy of samples and summarises it. An empty sample
// gives the zero Summary.
func Summarize(samples []time.Duration) Summary {
	if len(samples) == 0 {
		return Summary{}
	}
	sorted := slices.Clone(samples)
	slices.Sort(sorted)
	var sum time.Duration
	for _, d := range sorted {
		sum += d
	}
	return Summary{
		N:    len(sorted),
		Min:  ms(sorted[0]),
		Mean: ms(sum / time.Duration(len(sorted))),
		P50:  ms(Percentile(sorted, 50)),
		P95:  ms(Percentile(sorted, 95)),
		P99:  ms(Percentile(sorted, 99)),
		Max:  ms(sorted[len(sorted)-1]),
	}
}

// Percentile returns the p-th percentile (0 < p <= 100) of an ascending
// sample by the nearest-rank method: the smallest value that at least p% of
// the sample does not exceed. It never interpolates, so it always returns a
// latency that was actually observed. It returns 0 for an empty sample, the
// minimum for p <= 0 and the maximum for p >= 100.
func Percentile(sorted []time.Duration, p float64) time.Duration {
	n := len(sorted)
	if n == 0 {
		return 0
	}
	// p*n/100 rather than p/100*n: 99*200/100 is exactly 198, while
	// 0.99*200 is not exactly representable; the epsilon absorbs what
	// rounding is left for fractional p.
	rank := int(math.Ceil(p*float64(n)/100 - 1e-9))
	return sorted[min(max(rank, 1), n)-1]
}

// Throughput is the steady rate, per second, of events that happened at
// the given instants (in any order): the middle 98% of them, that is the
// count between the 1st and the 99th percentile instants over the time
// between those two. Under a steady load it equals the arrival rate,
// however long each event took; once a server falls behind, completions
// spread out and it reports what the server actually sustained. Trimming
// keeps a lone straggler (a job that waited for the queue's next poll) from
// stretching the span: stragglers show in the latency tail instead. It
// returns 0 when fewer than two events or no time separate them.
func Throughput(instants []time.Time) float64 {
	n := len(instants)
	if n < 2 {
		return 0
	}
	sorted := slices.Clone(instants)
	slices.SortFunc(sorted, time.Time.Compare)
	lo, hi := n/100, n-1-n/100
	span := sorted[hi].Sub(sorted[lo]).Seconds()
	if span <= 0 {
		return 0
	}
	return float64(hi-lo) / span
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// TailShape says how a step's slowest admissions were spread in time: a
// tail made of stalls (the machine or the server stopped for tens of
// milliseconds, and every admission in flight waited) crowds into a few
// windows of arrivals; a tail of admissions each slow for its own reason
// spreads over many.
type TailShape struct {
	// Slowest is how many admissions the tail holds: the slowest 1 % (at
	// least one).
	Slowest int `json:"slowest"`
	// Windows is how many windows of WindowMS of arrival times (due
	// times, from the step's first) hold them.
	Windows  int     `json:"windows"`
	WindowMS float64 `json:"window_ms"`
	// InWorst3 is how many of them the three fullest windows hold.
	InWorst3 int `json:"in_worst_3"`
}

// tailShape finds the slowest 1 % of the admissions (due time and
// latency, in any order) and the windows of arrival times they fall in.
func tailShape(dues []time.Time, lat []time.Duration, window time.Duration) TailShape {
	if len(dues) == 0 || len(dues) != len(lat) || window <= 0 {
		return TailShape{}
	}
	idx := make([]int, len(lat))
	first := dues[0]
	for i := range idx {
		idx[i] = i
		if dues[i].Before(first) {
			first = dues[i]
		}
	}
	slices.SortFunc(idx, func(a, b int) int { return cmp.Compare(lat[b], lat[a]) })
	k := max(1, len(lat)/100)
	perWindow := map[int64]int{}
	for _, i := range idx[:k] {
		perWindow[int64(dues[i].Sub(first)/window)]++
	}
	counts := slices.Collect(maps.Values(perWindow))
	slices.SortFunc(counts, func(a, b int) int { return b - a })
	worst := 0
	for _, c := range counts[:min(3, len(counts))] {
		worst += c
	}
	return TailShape{Slowest: k, Windows: len(perWindow), WindowMS: ms(window), InWorst3: worst}
}
