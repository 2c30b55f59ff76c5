package bench

import (
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
