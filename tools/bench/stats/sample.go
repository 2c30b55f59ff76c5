package stats

import (
	"cmp"
	"math"
	"slices"
	"time"
)

// Sorted returns an ascending copy of xs, leaving xs as it was.
func Sorted[T cmp.Ordered](xs []T) []T {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s
}

// Percentile returns the p-th percentile (0 < p <= 100) of an ascending
// sample by the nearest-rank method: the smallest value that at least p% of
// the sample does not exceed. It never interpolates, so it always returns a
// value that was actually observed (the median of an even count is the
// lower middle). It returns the zero value for an empty sample, the
// minimum for p <= 0 and the maximum for p >= 100.
func Percentile[T cmp.Ordered](sorted []T, p float64) T {
	n := len(sorted)
	if n == 0 {
		var zero T
		return zero
	}
	// p*n/100 rather than p/100*n: 99*200/100 is exactly 198, while
	// 0.99*200 is not exactly representable; the epsilon absorbs what
	// rounding is left for fractional p.
	rank := int(math.Ceil(p*float64(n)/100 - 1e-9))
	return sorted[min(max(rank, 1), n)-1]
}

// Spread returns the minimum, the median (nearest rank: the lower middle
// of an even count) and the maximum of xs, in any order; zeros for none.
func Spread(xs []float64) (lo, median, hi float64) {
	if len(xs) == 0 {
		return 0, 0, 0
	}
	s := Sorted(xs)
	return s[0], Percentile(s, 50), s[len(s)-1]
}

// Mean returns the arithmetic mean of samples, truncated to the
// nanosecond, or 0 for none.
func Mean(samples []time.Duration) time.Duration {
	if len(samples) == 0 {
		return 0
	}
	var sum time.Duration
	for _, d := range samples {
		sum += d
	}
	return sum / time.Duration(len(samples))
}

// MS returns d in milliseconds, unrounded.
func MS(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

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
	sorted := Sorted(samples)
	return Summary{
		N:    len(sorted),
		Min:  MS(sorted[0]),
		Mean: MS(Mean(sorted)),
		P50:  MS(Percentile(sorted, 50)),
		P95:  MS(Percentile(sorted, 95)),
		P99:  MS(Percentile(sorted, 99)),
		Max:  MS(sorted[len(sorted)-1]),
	}
}
