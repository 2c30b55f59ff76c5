package stats

import "math"

// Bucket is one cumulative bucket of a Prometheus histogram: Count
// observations at or below LE.
type Bucket struct {
	LE    float64
	Count float64
}

// SubtractBuckets returns after minus before, bucket by bucket: the
// observations in between two readings of one histogram. Buckets missing
// from before count zero (the series appeared with its first observation).
func SubtractBuckets(after, before []Bucket) []Bucket {
	prev := make(map[float64]float64, len(before))
	for _, b := range before {
		prev[b.LE] = b.Count
	}
	out := make([]Bucket, len(after))
	for i, b := range after {
		out[i] = Bucket{LE: b.LE, Count: b.Count - prev[b.LE]}
	}
	return out
}

// Quantile estimates the q-quantile of cumulative buckets ordered by
// bound, +Inf last, as Prometheus's histogram_quantile does: linearly
// within the bucket the rank falls in, from 0 for the first. A rank in the
// +Inf bucket returns the highest finite bound. It returns NaN for no
// observations.
func Quantile(q float64, bs []Bucket) float64 {
	if len(bs) == 0 || bs[len(bs)-1].Count <= 0 {
		return math.NaN()
	}
	total := bs[len(bs)-1].Count
	rank := q * total
	lower, below := 0.0, 0.0
	for _, b := range bs {
		if b.Count >= rank {
			if math.IsInf(b.LE, 1) {
				return lower
			}
			if b.Count == below {
				return b.LE
			}
			return lower + (b.LE-lower)*(rank-below)/(b.Count-below)
		}
		lower, below = b.LE, b.Count
	}
	return lower
}
