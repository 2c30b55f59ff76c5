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

// Throughput is how many events per second n completions spread between the
// first and the last of them represent: (n-1)/(last-first), since n events
// bound n-1 intervals. Under a steady load it equals the arrival rate,
// however long each event took; once a server falls behind, completions
// spread out and it reports what the server actually sustained. It returns
// 0 when fewer than two events or no time separate them.
func Throughput(n int, first, last time.Time) float64 {
	span := last.Sub(first).Seconds()
	if n < 2 || span <= 0 {
		return 0
	}
	return float64(n-1) / span
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
