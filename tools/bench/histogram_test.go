package bench

import (
	"math"
	"testing"
)

const exposition = `# HELP tollgate_http_request_seconds Time from a request's routing to its answer written.
# TYPE tollgate_http_request_seconds histogram
tollgate_http_request_seconds_bucket{method="GET",route="/v1/tasks/:id",le="0.001"} 7
tollgate_http_request_seconds_bucket{method="GET",route="/v1/tasks/:id",le="+Inf"} 9
tollgate_http_request_seconds_bucket{method="POST",route="/v1/tasks",le="0.001"} 0
tollgate_http_request_seconds_bucket{method="POST",route="/v1/tasks",le="0.005"} 99
tollgate_http_request_seconds_bucket{method="POST",route="/v1/tasks",le="0.002"} 50
tollgate_http_request_seconds_bucket{method="POST",route="/v1/tasks",le="0.01"} 100
tollgate_http_request_seconds_bucket{method="POST",route="/v1/tasks",le="+Inf"} 100
tollgate_http_request_seconds_sum{method="POST",route="/v1/tasks"} 0.3
tollgate_http_request_seconds_count{method="POST",route="/v1/tasks"} 100
tollgate_http_request_seconds_bucket{method="POST",route="/v1/tasks",le="bogus"} 3
`

func TestParseBucketsTakesOneSeriesInOrder(t *testing.T) {
	t.Parallel()
	got := parseBuckets([]byte(exposition), admissionSeries)
	want := []bucket{{0.001, 0}, {0.002, 50}, {0.005, 99}, {0.01, 100}, {math.Inf(1), 100}}
	if len(got) != len(want) {
		t.Fatalf("buckets = %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("bucket %d = %v, want %v", i, got[i], want[i])
		}
	}
}

func TestQuantileInterpolatesAsPrometheusDoes(t *testing.T) {
	t.Parallel()
	bs := []bucket{{0.001, 0}, {0.002, 50}, {0.005, 99}, {0.01, 100}, {math.Inf(1), 100}}
	tail := []bucket{{0.01, 90}, {0.05, 98}, {math.Inf(1), 100}}
	for _, tc := range []struct {
		name string
		q    float64
		bs   []bucket
		want float64
	}{
		{"median at a bound", 0.5, bs, 0.002},
		{"p95 within a bucket", 0.95, bs, 0.002 + 0.003*45/49},
		{"p99 at a bound", 0.99, bs, 0.005},
		{"first bucket from zero", 0.5, tail, 0.01 * 50 / 90},
		{"rank in +Inf gives the highest bound", 0.99, tail, 0.05},
		{"no observations", 0.5, []bucket{{0.01, 0}, {math.Inf(1), 0}}, math.NaN()},
		{"no buckets", 0.5, nil, math.NaN()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := quantile(tc.q, tc.bs)
			if math.IsNaN(tc.want) {
				if !math.IsNaN(got) {
					t.Errorf("quantile = %v, want NaN", got)
				}
				return
			}
			if math.Abs(got-tc.want) > 1e-12 {
				t.Errorf("quantile = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestSubtractBucketsKeepsTheStepsObservations(t *testing.T) {
	t.Parallel()
	before := []bucket{{0.01, 10}, {math.Inf(1), 12}}
	after := []bucket{{0.005, 4}, {0.01, 30}, {math.Inf(1), 40}}
	got := summarizeBuckets(subtractBuckets(after, before))
	if got.N != 28 {
		t.Errorf("N = %d, want 28 (40 - 12)", got.N)
	}
	// 4 below 5 ms, 16 more below 10 ms, 8 above: the median (rank 14)
	// is in the second bucket.
	if want := (0.005 + 0.005*10/16) * 1000; math.Abs(got.P50-want) > 1e-9 {
		t.Errorf("P50 = %v ms, want %v", got.P50, want)
	}
	if (summarizeBuckets(nil) != ServerLatency{}) {
		t.Error("no buckets must summarise to nothing")
	}
}

func TestPoolWaitsPerTask(t *testing.T) {
	for _, tc := range []struct {
		name          string
		before, after poolCounters
		tasks         int
		want          PoolWaits
	}{
		{"waits", poolCounters{100, 4, 0.5}, poolCounters{500, 24, 0.9}, 100, PoolWaits{AcquiresPerTask: 4, WaitsPerTask: 0.2, WaitMSPerTask: 4}},
		{"no waits", poolCounters{10, 1, 0.01}, poolCounters{30, 1, 0.01}, 10, PoolWaits{AcquiresPerTask: 2}},
		{"no tasks", poolCounters{10, 1, 0}, poolCounters{30, 2, 1}, 0, PoolWaits{}},
		{"a server without the series", poolCounters{}, poolCounters{}, 10, PoolWaits{}},
		{"a restarted server", poolCounters{500, 20, 2}, poolCounters{40, 1, 0.1}, 10, PoolWaits{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := poolWaits(tc.before, tc.after, tc.tasks)
			if math.Abs(got.AcquiresPerTask-tc.want.AcquiresPerTask) > 1e-9 || math.Abs(got.WaitsPerTask-tc.want.WaitsPerTask) > 1e-9 ||
				math.Abs(got.WaitMSPerTask-tc.want.WaitMSPerTask) > 1e-9 {
				t.Errorf("poolWaits = %+v, want %+v", got, tc.want)
			}
		})
	}
}
