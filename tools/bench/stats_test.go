package bench

import (
	"math"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tollgate/tollgate/tools/bench/stats"
)

// The step warm-up's admissions (the replanning after ANALYZE) count only
// arrivals that went out and were admitted: a refused or dropped arrival
// has no admission time to report.
func TestAdmissionsCountOnlyAdmitted(t *testing.T) {
	t.Parallel()
	ms := func(v int) time.Duration { return time.Duration(v) * time.Millisecond }
	tests := []struct {
		name     string
		outcomes []outcome
		want     stats.Summary
	}{
		{"none", nil, stats.Summary{}},
		{"admitted only", []outcome{
			{sent: true, admitted: true, admission: ms(10)},
			{sent: true, admitted: false, admission: ms(900), err: shedError},
			{sent: false, admission: ms(800)},
			{sent: true, admitted: true, admission: ms(30)},
		}, stats.Summarize([]time.Duration{ms(10), ms(30)})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if diff := cmp.Diff(tt.want, admissions(tt.outcomes)); diff != "" {
				t.Errorf("admissions mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// Each step warms up 2 s after its VACUUM unless told otherwise; a
// negative duration turns the warm-up off and is kept as given.
func TestStepWarmupDefault(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		given, want time.Duration
	}{
		{0, 2 * time.Second},
		{5 * time.Second, 5 * time.Second},
		{-1, -1},
	} {
		c := Config{BaseURL: "http://127.0.0.1:1", APIKey: "k", Rates: []float64{10}, StepWarmup: tt.given}
		if err := c.defaults(); err != nil {
			t.Fatal(err)
		}
		if c.StepWarmup != tt.want {
			t.Errorf("StepWarmup %v: got %v, want %v", tt.given, c.StepWarmup, tt.want)
		}
	}
}

func TestGCBetween(t *testing.T) {
	if got := gcBetween(gcCounters{10, 0.002}, gcCounters{60, 0.0125}); got.Cycles != 50 || math.Abs(got.PauseMS-10.5) > 1e-9 {
		t.Errorf("gcBetween = %+v, want 50 cycles, 10.5 ms", got)
	}
	if got := gcBetween(gcCounters{60, 1}, gcCounters{5, 0.1}); got != (ServerGC{}) {
		t.Errorf("a restarted server: %+v, want zero", got)
	}
}
