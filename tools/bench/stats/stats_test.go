package stats

import (
	"math"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func durations(msList ...int) []time.Duration {
	out := make([]time.Duration, len(msList))
	for i, v := range msList {
		out[i] = time.Duration(v) * time.Millisecond
	}
	return out
}

// upTo returns 1ms, 2ms, ... n ms.
func upTo(n int) []time.Duration {
	out := make([]time.Duration, n)
	for i := range out {
		out[i] = time.Duration(i+1) * time.Millisecond
	}
	return out
}

func TestPercentile(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		sorted []time.Duration
		p      float64
		want   time.Duration
	}{
		{"empty", nil, 50, 0},
		{"one sample, median", durations(7), 50, 7 * time.Millisecond},
		{"one sample, p99", durations(7), 99, 7 * time.Millisecond},
		{"p0 is the minimum", durations(1, 2, 3), 0, 1 * time.Millisecond},
		{"p100 is the maximum", durations(1, 2, 3), 100, 3 * time.Millisecond},
		{"above 100 is the maximum", durations(1, 2, 3), 150, 3 * time.Millisecond},
		{"median of odd count", durations(1, 2, 3, 4, 5), 50, 3 * time.Millisecond},
		{"median of even count is the lower middle", durations(1, 2, 3, 4), 50, 2 * time.Millisecond},
		{"p50 of 1..100", upTo(100), 50, 50 * time.Millisecond},
		{"p95 of 1..100", upTo(100), 95, 95 * time.Millisecond},
		{"p99 of 1..100", upTo(100), 99, 99 * time.Millisecond},
		{"p99 of 1..200 has no float drift", upTo(200), 99, 198 * time.Millisecond},
		{"p99 of 1..1000", upTo(1000), 99, 990 * time.Millisecond},
		{"p99 of 10 samples is the max", upTo(10), 99, 10 * time.Millisecond},
		{"p99.9 of 1..1000", upTo(1000), 99.9, 999 * time.Millisecond},
		{"fractional rank rounds up", upTo(3), 50, 2 * time.Millisecond},
		// The peer comparison's cases: it reports p90.
		{"one value, p99", durations(7), 99, 7 * time.Millisecond},
		{"median of four is the second", durations(1, 2, 3, 4), 50, 2 * time.Millisecond},
		{"p90 of 1..100", upTo(100), 90, 90 * time.Millisecond},
		{"p99 of 1..100, again", upTo(100), 99, 99 * time.Millisecond},
		{"p99 of ten is the max", durations(1, 2, 3, 4, 5, 6, 7, 8, 9, 10), 99, 10 * time.Millisecond},
		{"p0 is the min", durations(3, 4), 0, 3 * time.Millisecond},
		{"above 100 is the max", durations(3, 4), 150, 4 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := Percentile(tt.sorted, tt.p); got != tt.want {
				t.Errorf("Percentile(%v, %v) = %v, want %v", tt.sorted, tt.p, got, tt.want)
			}
		})
	}
}

func TestSummarize(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		samples []time.Duration
		want    Summary
	}{
		{"empty", nil, Summary{}},
		{"unsorted input", durations(30, 10, 20), Summary{N: 3, Min: 10, Mean: 20, P50: 20, P95: 30, P99: 30, Max: 30}},
		{"1..100", upTo(100), Summary{N: 100, Min: 1, Mean: 50.5, P50: 50, P95: 95, P99: 99, Max: 100}},
		{"sub-millisecond", []time.Duration{500 * time.Microsecond, 1500 * time.Microsecond},
			Summary{N: 2, Min: 0.5, Mean: 1, P50: 0.5, P95: 1.5, P99: 1.5, Max: 1.5}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			in := append([]time.Duration(nil), tt.samples...)
			got := Summarize(tt.samples)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Summarize mismatch (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(in, tt.samples); diff != "" {
				t.Errorf("Summarize changed its input (-before +after):\n%s", diff)
			}
		})
	}
}

// every returns n instants from t0, one every d.
func every(t0 time.Time, n int, d time.Duration) []time.Time {
	out := make([]time.Time, n)
	for i := range out {
		out[i] = t0.Add(time.Duration(i) * d)
	}
	return out
}

func TestThroughput(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	steady := every(t0, 1001, 10*time.Millisecond) // 100/s for 10 s
	straggler := append(every(t0, 1000, 10*time.Millisecond), t0.Add(time.Minute))
	reversed := slices.Clone(steady)
	slices.Reverse(reversed)
	tests := []struct {
		name     string
		instants []time.Time
		want     float64
	}{
		{"no events", nil, 0},
		{"one event", every(t0, 1, time.Second), 0},
		{"no time between", []time.Time{t0, t0, t0}, 0},
		{"two events half a second apart", every(t0, 2, 500*time.Millisecond), 2},
		{"steady 100/s", steady, 100},
		{"order does not matter", reversed, 100},
		{"a lone straggler is trimmed", straggler, 100},
		{"falling behind: 100 events over 2 s", every(t0, 101, 20*time.Millisecond), 50},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := Throughput(tt.instants); math.Abs(got-tt.want) > 1e-9 {
				t.Errorf("Throughput(%d instants) = %v, want %v", len(tt.instants), got, tt.want)
			}
		})
	}
}

func TestTailShape(t *testing.T) {
	t0 := time.Date(2026, 12, 4, 0, 0, 0, 0, time.UTC)
	// 1,000 arrivals 5 ms apart (200/s), 1 ms each, then the slow ones.
	arrivals := func(slow map[int]time.Duration) ([]time.Time, []time.Duration) {
		dues := make([]time.Time, 1000)
		lat := make([]time.Duration, 1000)
		for i := range dues {
			dues[i] = t0.Add(time.Duration(i) * 5 * time.Millisecond)
			lat[i] = time.Millisecond
			if d, ok := slow[i]; ok {
				lat[i] = d
			}
		}
		return dues, lat
	}
	stall := map[int]time.Duration{}
	for i := 400; i < 410; i++ { // 50 ms of arrivals: one window
		stall[i] = time.Duration(60-(i-400)*5) * time.Millisecond
	}
	spread := map[int]time.Duration{}
	for i := range 10 { // one slow arrival every 500 ms
		spread[i*100] = 30 * time.Millisecond
	}
	for _, tc := range []struct {
		name string
		slow map[int]time.Duration
		want TailShape
	}{
		{"one stall", stall, TailShape{Slowest: 10, Windows: 1, WindowMS: 100, InWorst3: 10}},
		{"spread out", spread, TailShape{Slowest: 10, Windows: 10, WindowMS: 100, InWorst3: 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dues, lat := arrivals(tc.slow)
			// Order must not matter: reverse the arrivals.
			slices.Reverse(dues)
			slices.Reverse(lat)
			if got := Tail(dues, lat, 100*time.Millisecond); got != tc.want {
				t.Errorf("Tail = %+v, want %+v", got, tc.want)
			}
		})
	}
	if got := Tail(nil, nil, 100*time.Millisecond); got != (TailShape{}) {
		t.Errorf("no admissions: %+v, want zero", got)
	}
	if got := Tail([]time.Time{t0}, []time.Duration{time.Second}, 100*time.Millisecond); got.Slowest != 1 || got.Windows != 1 {
		t.Errorf("one admission: %+v, want it as the whole tail", got)
	}
}
