package stats

import (
	"math"
	"testing"
)

func TestQuantileInterpolatesAsPrometheusDoes(t *testing.T) {
	t.Parallel()
	bs := []Bucket{{LE: 0.001, Count: 0}, {LE: 0.002, Count: 50}, {LE: 0.005, Count: 99}, {LE: 0.01, Count: 100}, {LE: math.Inf(1), Count: 100}}
	tail := []Bucket{{LE: 0.01, Count: 90}, {LE: 0.05, Count: 98}, {LE: math.Inf(1), Count: 100}}
	for _, tc := range []struct {
		name string
		q    float64
		bs   []Bucket
		want float64
	}{
		{"median at a bound", 0.5, bs, 0.002},
		{"p95 within a bucket", 0.95, bs, 0.002 + 0.003*45/49},
		{"p99 at a bound", 0.99, bs, 0.005},
		{"first bucket from zero", 0.5, tail, 0.01 * 50 / 90},
		{"rank in +Inf gives the highest bound", 0.99, tail, 0.05},
		{"no observations", 0.5, []Bucket{{LE: 0.01, Count: 0}, {LE: math.Inf(1), Count: 0}}, math.NaN()},
		{"no buckets", 0.5, nil, math.NaN()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := Quantile(tc.q, tc.bs)
			if math.IsNaN(tc.want) {
				if !math.IsNaN(got) {
					t.Errorf("Quantile = %v, want NaN", got)
				}
				return
			}
			if math.Abs(got-tc.want) > 1e-12 {
				t.Errorf("Quantile = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestSubtractBucketsCountsMissingBucketsAsZero(t *testing.T) {
	t.Parallel()
	before := []Bucket{{LE: 0.01, Count: 10}, {LE: math.Inf(1), Count: 12}}
	after := []Bucket{{LE: 0.005, Count: 4}, {LE: 0.01, Count: 30}, {LE: math.Inf(1), Count: 40}}
	got := SubtractBuckets(after, before)
	want := []Bucket{{LE: 0.005, Count: 4}, {LE: 0.01, Count: 20}, {LE: math.Inf(1), Count: 28}}
	if len(got) != len(want) {
		t.Fatalf("SubtractBuckets = %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("bucket %d = %v, want %v", i, got[i], want[i])
		}
	}
}
