package bench

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tollgate/tollgate/tools/bench/stats"
)

func TestParseScenarios(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in      string
		want    []string
		wantErr string
	}{
		{"throughput", []string{"throughput"}, ""},
		{"duplicates, inflight", []string{"inflight", "duplicates"}, ""},
		{"INFLIGHT,inflight", []string{"inflight"}, ""},
		{"all", []string{"throughput", "agent", "inflight", "duplicates"}, ""},
		{"agent,throughput", []string{"throughput", "agent"}, ""},
		{"inflight,,", []string{"inflight"}, ""},
		{"", nil, "no scenario"},
		{" , ", nil, "no scenario"},
		{"throughput,soak", nil, `unknown scenario "soak"`},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			t.Parallel()
			got, err := ParseScenarios(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ParseScenarios(%q) = %v, %v; want an error containing %q", tt.in, got, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseScenarios(%q) = %v", tt.in, err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("ParseScenarios(%q) mismatch (-want +got):\n%s", tt.in, diff)
			}
		})
	}
}

func TestSummarizeCalls(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(startMS, endMS int, status int, err string) call {
		return call{start: t0.Add(time.Duration(startMS) * time.Millisecond), end: t0.Add(time.Duration(endMS) * time.Millisecond), status: status, err: err}
	}
	calls := []call{
		at(0, 500, 200, ""),     // answered before the window: warm-up
		at(900, 1100, 200, ""),  // started in the warm-up: left out
		at(1000, 1002, 200, ""), // in
		at(1500, 1504, 202, ""), // in
		at(2000, 2010, 429, "POST 429 rate_limited"),
		at(2500, 2500, 0, "POST: timeout"),
		at(2999, 3001, 200, ""), // answered after the window: tail
	}
	got := summarizeCalls(calls, t0.Add(time.Second), t0.Add(3*time.Second))
	want := CallStats{
		N: 4, PerS: 2,
		Latency:    stats.Summary{N: 4, Min: 0, Mean: 4, P50: 2, P95: 10, P99: 10, Max: 10},
		Statuses:   map[string]int{"200": 1, "202": 1, "429": 1, "none": 1},
		ErrorCount: 2,
		Errors:     map[string]int{"POST 429 rate_limited": 1, "POST: timeout": 1},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("summarizeCalls mismatch (-want +got):\n%s", diff)
	}
	empty := summarizeCalls(nil, t0, t0)
	if empty.N != 0 || empty.PerS != 0 {
		t.Errorf("summarizeCalls of nothing over no time = %+v, want zero counts", empty)
	}
}

func TestClosedLoop(t *testing.T) {
	t.Parallel()
	t.Run("stops when the context ends", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var seen []int
		calls := closedLoop(ctx, 1, time.Now().Add(time.Hour), func(_ context.Context, w, i int) (int, string) {
			seen = append(seen, i)
			if i == 4 {
				cancel()
			}
			return 200, ""
		})
		if len(calls) != 5 || len(seen) != 5 || seen[4] != 4 {
			t.Errorf("closedLoop made %d calls with indexes %v, want 5 (0..4)", len(calls), seen)
		}
		for _, c := range calls {
			if c.status != 200 || c.end.Before(c.start) {
				t.Errorf("call %+v: want status 200 and end >= start", c)
			}
		}
	})
	t.Run("starts nothing after the end", func(t *testing.T) {
		t.Parallel()
		calls := closedLoop(context.Background(), 8, time.Now().Add(-time.Second), func(context.Context, int, int) (int, string) {
			t.Error("a request started after the end")
			return 0, ""
		})
		if len(calls) != 0 {
			t.Errorf("closedLoop made %d calls after its end, want 0", len(calls))
		}
	})
}

func TestParseProcStat(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name              string
		stat              string
		wantBusy, wantAll time.Duration
		wantErr           bool
	}{
		{"aggregate line", "cpu  100 5 50 800 20 3 2 1 0 0\ncpu0 50 2 25 400 10 1 1 0 0 0\n",
			1610 * time.Millisecond, 9810 * time.Millisecond, false},
		{"no aggregate line", "cpu0 1 2 3 4 5 6 7 8\n", 0, 0, true},
		{"short line", "cpu 1 2 3\n", 0, 0, true},
		{"not numbers", "cpu a b c d e f g h\n", 0, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			busy, all, err := parseProcStat(tt.stat)
			if (err != nil) != tt.wantErr || busy != tt.wantBusy || all != tt.wantAll {
				t.Errorf("parseProcStat(%q) = %v, %v, %v; want %v, %v, error: %v", tt.stat, busy, all, err, tt.wantBusy, tt.wantAll, tt.wantErr)
			}
		})
	}
}

func TestCPUShare(t *testing.T) {
	t.Parallel()
	a := cpuSnapshot{
		server: cpuReading{1: 10 * time.Second}, pg: cpuReading{7: time.Second}, self: 2 * time.Second,
		hostBusy: 100 * time.Second, hostAt: 1000 * time.Second,
	}
	b := cpuSnapshot{
		// Over 10 s on 2 CPUs: the server used 8 s, Postgres 6 s (one
		// backend new), tollbench 4 s, the machine 19 s busy of 20.
		server: cpuReading{1: 18 * time.Second}, pg: cpuReading{7: 3 * time.Second, 8: 4 * time.Second}, self: 6 * time.Second,
		hostBusy: 119 * time.Second, hostAt: 1020 * time.Second,
	}
	got := cpuShare(a, b, 10*time.Second, 10000, 2)
	want := CPUShare{
		CPUs: 2, ServerMSPerReq: 0.8, PostgresMSPerReq: 0.6, ClientMSPerReq: 0.4,
		Server: 0.8, Postgres: 0.6, Client: 0.4, Other: 0.1, HostBusy: 0.95,
		ProjectedPerS: 2000 / 1.4,
	}
	if diff := cmp.Diff(want, got, cmp.Comparer(func(x, y float64) bool { return math.Abs(x-y) < 1e-9 })); diff != "" {
		t.Errorf("cpuShare mismatch (-want +got):\n%s", diff)
	}
	if !strings.HasPrefix(duplicatesLimit(DuplicatesRun{CPU: got}), "CPU-bound") {
		t.Errorf("duplicatesLimit at 95%% busy = %q, want CPU-bound", duplicatesLimit(DuplicatesRun{CPU: got}))
	}
	idle := got
	idle.HostBusy = 0.5
	if !strings.HasPrefix(duplicatesLimit(DuplicatesRun{CPU: idle}), "not CPU-bound") {
		t.Errorf("duplicatesLimit at 50%% busy = %q, want not CPU-bound", duplicatesLimit(DuplicatesRun{CPU: idle}))
	}
	if z := cpuShare(a, b, 0, 10, 2); z != (CPUShare{CPUs: 2}) {
		t.Errorf("cpuShare over no time = %+v, want only the CPU count", z)
	}
}

func TestTimelineRows(t *testing.T) {
	t.Parallel()
	tests := []struct {
		n, max int
		want   []int
	}{
		{0, 5, nil},
		{1, 5, []int{0}},
		{4, 5, []int{0, 1, 2, 3}},
		{10, 5, []int{0, 2, 4, 6, 8, 9}},
		{9, 3, []int{0, 3, 6, 8}},
	}
	for _, tt := range tests {
		if diff := cmp.Diff(tt.want, timelineRows(tt.n, tt.max)); diff != "" {
			t.Errorf("timelineRows(%d, %d) mismatch (-want +got):\n%s", tt.n, tt.max, diff)
		}
	}
}

func TestTallyInFlight(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	sec := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	fin := func(s float64) *time.Time { f := sec(s); return &f }
	subs := []submitted{
		{due: sec(0), answered: sec(0.01), id: "a"},
		{due: sec(0), answered: sec(0.03), id: "b"},
		{due: sec(0.02), answered: sec(2), err: "POST 503 overloaded"},
		{due: sec(0.02), answered: sec(0.05), id: "c"},
		{}, // never sent
	}
	views := []taskView{
		{ID: "a", Status: "succeeded", CreatedAt: sec(0.005), FinishedAt: fin(5.005)},
		{ID: "b", Status: "failed", CreatedAt: sec(0.02), FinishedAt: fin(10.02)},
		{},
		{ID: "c", Status: "queued", CreatedAt: sec(0.04)},
		{},
	}
	r := InFlightResult{Tasks: 4, Final: map[string]int{}, Errors: map[string]int{}}
	tallySubmissions(&r, subs, t0)
	tallyFinals(&r, views)
	want := InFlightResult{
		Tasks: 4, Sent: 4, Admitted: 3, Succeeded: 1,
		Final:      map[string]int{"succeeded": 1, "failed": 1, "unfinished": 1},
		ErrorCount: 3,
		Errors:     map[string]int{"POST 503 overloaded": 1, "task failed": 1, "task queued at the end": 1},
		Admission:  stats.Summarize([]time.Duration{10 * time.Millisecond, 30 * time.Millisecond, 30 * time.Millisecond}),
		SubmitS:    2, AdmittedPerS: 1.5,
		DrainS:    10.015,
		E2EServer: stats.Summarize([]time.Duration{5 * time.Second, 10 * time.Second}),
	}
	if diff := cmp.Diff(want, r, cmp.Comparer(func(x, y float64) bool { return math.Abs(x-y) < 1e-9 })); diff != "" {
		t.Errorf("tally mismatch (-want +got):\n%s", diff)
	}
}

func TestInFlightVerdict(t *testing.T) {
	t.Parallel()
	ok := InFlightResult{Resources: Resources{RSSPeakMB: 120, GoroutinesPeak: 900}, GoroutineBound: goroutineBound(40, 400, 64)}
	tests := []struct {
		name    string
		r       InFlightResult
		want    bool
		wantWhy string
	}{
		{"bounded", ok, true, "bounded"},
		{"no worker count: goroutines unchecked", InFlightResult{Resources: Resources{RSSPeakMB: 120, GoroutinesPeak: 90000}}, true, "bounded"},
		{"too much memory", InFlightResult{Resources: Resources{RSSPeakMB: 600, GoroutinesPeak: 900}, GoroutineBound: 2000}, false, "RSS peak 600 MB >= 500 MB"},
		{"goroutines grow with the tasks", InFlightResult{Resources: Resources{RSSPeakMB: 120, GoroutinesPeak: 10900}, GoroutineBound: 2000}, false, "goroutines peak 10900 > 2000"},
		{"errors", InFlightResult{Resources: Resources{RSSPeakMB: 120}, ErrorCount: 3}, false, "3 errors"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, why := inFlightVerdict(tt.r)
			if got != tt.want || !strings.Contains(why, tt.wantWhy) {
				t.Errorf("inFlightVerdict = %v, %q; want %v, containing %q", got, why, tt.want, tt.wantWhy)
			}
		})
	}
}

func TestInFlightLimits(t *testing.T) {
	t.Parallel()
	base := InFlightResult{
		Tasks: 10000, ModelLatencyMS: 5000, Clients: 64, Workers: 600, DrainFloorS: 85,
		Admitted: 10000, SubmitS: 40, AdmittedPerS: 250, DrainS: 90,
	}
	full, starved, slowAdmission, slowServer := base, base, base, base
	full.PeakModelCalls = 600
	full.Timeline = []InFlightSample{{T: 1, QueueDepth: 5000, ModelCalls: 600}, {T: 2, QueueDepth: 4000, ModelCalls: 580}}
	starved.PeakModelCalls = 200
	slowAdmission.PeakModelCalls, slowAdmission.SubmitS = 600, 120
	slowServer.PeakModelCalls = 600
	slowServer.Timeline = []InFlightSample{
		{T: 1, QueueDepth: 5000, ModelCalls: 600, Finished: 0},
		{T: 2, QueueDepth: 4000, ModelCalls: 200, Finished: 300},
		{T: 3, QueueDepth: 300, ModelCalls: 300, Finished: 500}, // too few jobs to fill the pool: not counted
		{T: 4, QueueDepth: -1, ModelCalls: 0, Finished: 600},    // depth not read: not counted
	}
	tests := []struct {
		name string
		r    InFlightResult
		want string
	}{
		{"worker pool full", full, "the worker pool stayed full while work waited"},
		{"worker pool never full", starved, "never filled (peak 200 of 600)"},
		{"admission slower than the model", slowAdmission, "admission was slower than the model"},
		{"workers busy with Tollgate's own work", slowServer, "only 67% of the workers had a model call open on average"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := strings.Join(inFlightLimits(tt.r), "\n")
			if !strings.Contains(got, tt.want) || !strings.Contains(got, "ceil(10000/600) × 5s = 85 s") {
				t.Errorf("inFlightLimits =\n%s\nwant it to contain %q and the floor", got, tt.want)
			}
		})
	}
	unknown := base
	unknown.Workers = 0
	if got := strings.Join(inFlightLimits(unknown), "\n"); !strings.Contains(got, "TOLLGATE_WORKERS unknown") {
		t.Errorf("inFlightLimits without workers =\n%s\nwant it to say they are unknown", got)
	}
}

func TestPeakFinishRate(t *testing.T) {
	t.Parallel()
	// 1 → 2.1 s: 240 in 1.1 s; 2.1 → 2.2 s would be 1000/s over a tenth
	// of a second, which does not count.
	samples := []InFlightSample{{T: 0}, {T: 1, Finished: 100}, {T: 2.1, Finished: 340}, {T: 2.2, Finished: 440}, {T: 3.2, Finished: 500}}
	if got, want := peakFinishRate(samples), 240/1.1; math.Abs(got-want) > 1e-9 {
		t.Errorf("peakFinishRate = %v, want %v", got, want)
	}
	if got := peakFinishRate(nil); got != 0 {
		t.Errorf("peakFinishRate(nil) = %v, want 0", got)
	}
}

func TestCounts(t *testing.T) {
	t.Parallel()
	if got := counts(nil); got != "-" {
		t.Errorf("counts(nil) = %q, want -", got)
	}
	if got, want := counts(map[string]int{"202": 3, "200": 10}), "200 10, 202 3"; got != want {
		t.Errorf("counts = %q, want %q", got, want)
	}
}

func TestSameTask(t *testing.T) {
	t.Parallel()
	body := []byte(`{"id":"f50e985b-8540-4d02-91fe-b15453fba912","status":"succeeded"}`)
	if !sameTask(body, "f50e985b-8540-4d02-91fe-b15453fba912") {
		t.Error("sameTask missed its own id")
	}
	if sameTask(body, "f50e985b") {
		t.Error("sameTask matched a prefix of the id")
	}
}
