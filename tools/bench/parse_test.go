package bench

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestParsePGBench(t *testing.T) {
	t.Parallel()
	const report = `pgbench (15.20 (Debian 15.20-0+deb12u1))
transaction type: scripts/pgbench-task.sql
scaling factor: 1
query mode: prepared
number of clients: 2
number of threads: 2
maximum number of tries: 1
duration: 1 s
number of transactions actually processed: 139
number of failed transactions: 0 (0.000%)
latency average = 14.300 ms
initial connection time = 7.300 ms
tps = 139.860421 (without initial connection time)
`
	tests := []struct {
		name    string
		out     string
		want    CeilingRun
		wantErr bool
	}{
		{"complete report", report, CeilingRun{TPS: 139.860421, LatencyMS: 14.3, Tasks: 139}, false},
		{"aborted run has no tps", "pgbench: error: client 0 script 0 aborted in command 10 query 0\n", CeilingRun{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := parsePGBench([]byte(tt.out))
			if (err != nil) != tt.wantErr {
				t.Fatalf("parsePGBench error = %v, want error: %v", err, tt.wantErr)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("parsePGBench mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseMetrics(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		body string
		want map[string]float64
	}{
		{"empty", "", map[string]float64{}},
		{
			"unlabelled samples",
			"# HELP go_goroutines Number of goroutines.\n# TYPE go_goroutines gauge\ngo_goroutines 42\n" +
				"process_resident_memory_bytes 2.5e+07\n",
			map[string]float64{"go_goroutines": 42, "process_resident_memory_bytes": 2.5e7},
		},
		{
			"labelled samples are summed per metric",
			"tollgate_queue_depth{provider_key=\"a\"} 3\ntollgate_queue_depth{provider_key=\"b\"} 4\n" +
				"tollgate_tasks_finished_total{status=\"succeeded\",code=\"\"} 10\ntollgate_tasks_finished_total{status=\"failed\",code=\"x\"} 2\n",
			map[string]float64{"tollgate_queue_depth": 7, "tollgate_tasks_finished_total": 12},
		},
		{"a label value with spaces and braces", "m{reason=\"a } b\"} 5 1700000000000\n", map[string]float64{"m": 5}},
		{"an unclosed label set is skipped", "m{a=\"b\" 5\n", map[string]float64{}},
		{"a timestamp is dropped", "up 1 1700000000000\n", map[string]float64{"up": 1}},
		{"unparseable values are skipped", "a NaNx\nb\n", map[string]float64{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if diff := cmp.Diff(tt.want, parseMetrics([]byte(tt.body))); diff != "" {
				t.Errorf("parseMetrics mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestWorkers(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		rates     []float64
		latencies []float64 // seconds
		want      int
	}{
		{"never below the default", []float64{20}, []float64{0}, 100},
		{"highest rate at longest latency", []float64{20, 200}, []float64{0, 1}, 600},
		{"capped", []float64{10000}, []float64{5}, 10000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var lat []time.Duration
			for _, s := range tt.latencies {
				lat = append(lat, time.Duration(s*float64(time.Second)))
			}
			if got := Workers(tt.rates, lat); got != tt.want {
				t.Errorf("Workers(%v, %v) = %d, want %d", tt.rates, lat, got, tt.want)
			}
		})
	}
}

func TestParseStatCPU(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		stat    string
		want    time.Duration
		wantErr bool
	}{
		{"plain", "4242 (tollgate) S 1 4242 4242 0 -1 4194560 1234 0 0 0 150 25 0 0 20 0 9 0 100 0 0",
			1750 * time.Millisecond, false},
		{"spaces and parentheses in the name", "7 (a (b) c) R 1 7 7 0 -1 0 0 0 0 0 3 4 0 0 20 0 1 0 1 0 0",
			70 * time.Millisecond, false},
		{"no name", "garbage", 0, true},
		{"too short", "1 (x) S 1 2 3", 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := parseStatCPU(tt.stat)
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Errorf("parseStatCPU(%q) = %v, %v; want %v, error: %v", tt.stat, got, err, tt.want, tt.wantErr)
			}
		})
	}
}

func TestTimeline(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	outcomes := []outcome{
		{due: t0, sent: true, admitted: true, admission: 5 * time.Millisecond, ok: true, finishedAt: t0.Add(20 * time.Millisecond)},
		{due: t0.Add(500 * time.Millisecond), sent: true, admitted: true, admission: 9 * time.Millisecond, ok: true, finishedAt: t0.Add(1200 * time.Millisecond)},
		{due: t0.Add(1500 * time.Millisecond), sent: true, err: "POST 503 overloaded"},
		{}, // never sent
	}
	want := []Second{
		{T: 0, Arrivals: 2, AdmissionP99MS: 9, AdmissionMaxMS: 9, Finished: 1},
		{T: 1, Arrivals: 1, Finished: 1, Errors: 1},
	}
	if diff := cmp.Diff(want, timeline(outcomes)); diff != "" {
		t.Errorf("timeline mismatch (-want +got):\n%s", diff)
	}
}
