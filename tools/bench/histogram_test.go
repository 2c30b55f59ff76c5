package bench

import (
	"math"
	"testing"

	"github.com/tollgate/tollgate/tools/bench/stats"
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
	want := []stats.Bucket{{LE: 0.001, Count: 0}, {LE: 0.002, Count: 50}, {LE: 0.005, Count: 99}, {LE: 0.01, Count: 100}, {LE: math.Inf(1), Count: 100}}
	if len(got) != len(want) {
		t.Fatalf("buckets = %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("bucket %d = %v, want %v", i, got[i], want[i])
		}
	}
}

func TestSubtractBucketsKeepsTheStepsObservations(t *testing.T) {
	t.Parallel()
	before := []stats.Bucket{{LE: 0.01, Count: 10}, {LE: math.Inf(1), Count: 12}}
	after := []stats.Bucket{{LE: 0.005, Count: 4}, {LE: 0.01, Count: 30}, {LE: math.Inf(1), Count: 40}}
	got := summarizeBuckets(stats.SubtractBuckets(after, before))
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
