package limits_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tollgate/tollgate/limits"
)

func ptr(v int64) *int64 { return &v }

func TestDecide(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 12, 6, 1, 2, 10, 500_000_000, time.UTC) // 49.5 s left in the minute
	reset := 49500 * time.Millisecond
	cases := []struct {
		name    string
		windows []limits.Window
		tokens  int64
		want    limits.Decision
	}{
		{"no limit applies", nil, 10, limits.Decision{Allowed: true}},
		{"within the requests limit", []limits.Window{{RequestsPerMinute: ptr(5), Requests: 3, Tokens: 30}}, 10,
			limits.Decision{Allowed: true, Requests: &limits.State{Limit: 5, Remaining: 2, Reset: reset}}},
		{"the last request that fits", []limits.Window{{RequestsPerMinute: ptr(5), Requests: 5}}, 10,
			limits.Decision{Allowed: true, Requests: &limits.State{Limit: 5, Remaining: 0, Reset: reset}}},
		{"one request over: reported without it", []limits.Window{{RequestsPerMinute: ptr(5), Requests: 6, Tokens: 60}}, 10,
			limits.Decision{Exceeded: limits.KindRequests, RetryAfter: 50 * time.Second, Requests: &limits.State{Limit: 5, Remaining: 0, Reset: reset}}},
		{"tokens over", []limits.Window{{TokensPerMinute: ptr(100), Requests: 2, Tokens: 130}}, 50,
			limits.Decision{Exceeded: limits.KindTokens, RetryAfter: 50 * time.Second, Tokens: &limits.State{Limit: 100, Remaining: 20, Reset: reset}}},
		{"the workload's limit refuses, the owner's has room", []limits.Window{
			{RequestsPerMinute: ptr(100), Requests: 10},
			{Workload: "batch", RequestsPerMinute: ptr(2), Requests: 3},
		}, 1, limits.Decision{Exceeded: limits.KindRequests, Workload: "batch", RetryAfter: 50 * time.Second,
			Requests: &limits.State{Limit: 2, Remaining: 0, Reset: reset}}},
		{"the tightest of both is reported", []limits.Window{
			{RequestsPerMinute: ptr(100), TokensPerMinute: ptr(1000), Requests: 10, Tokens: 900},
			{Workload: "batch", RequestsPerMinute: ptr(20), TokensPerMinute: ptr(5000), Requests: 4, Tokens: 800},
		}, 1, limits.Decision{Allowed: true, Requests: &limits.State{Limit: 20, Remaining: 16, Reset: reset},
			Tokens: &limits.State{Limit: 1000, Remaining: 100, Reset: reset}}},
		{"an estimate above the whole limit", []limits.Window{{TokensPerMinute: ptr(100), Requests: 1, Tokens: 5000}}, 5000,
			limits.Decision{Exceeded: limits.KindTokens, RetryAfter: 50 * time.Second, Tokens: &limits.State{Limit: 100, Remaining: 100, Reset: reset}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := limits.Decide(c.windows, c.tokens, at)
			if diff := cmp.Diff(c.want, got); diff != "" {
				t.Errorf("mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRetryAfterIsAtLeastOneSecond(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 12, 6, 1, 2, 59, 999_000_000, time.UTC)
	d := limits.Decide([]limits.Window{{RequestsPerMinute: ptr(0), Requests: 1}}, 0, at)
	if d.Allowed || d.RetryAfter != time.Second {
		t.Errorf("got %+v, want refused with 1 s", d)
	}
}

func TestValidate(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		l    limits.Limits
		ok   bool
	}{
		{"unlimited", limits.Limits{OwnerID: "a"}, true},
		{"zero", limits.Limits{OwnerID: "a", Limit: limits.Limit{RequestsPerMinute: ptr(0)}}, true},
		{"the bound", limits.Limits{OwnerID: "a", Limit: limits.Limit{TokensPerMinute: ptr(limits.MaxPerMinute)}}, true},
		{"above the bound", limits.Limits{OwnerID: "a", Limit: limits.Limit{TokensPerMinute: ptr(limits.MaxPerMinute + 1)}}, false},
		{"negative", limits.Limits{OwnerID: "a", Limit: limits.Limit{RequestsPerMinute: ptr(-1)}}, false},
		{"workload negative", limits.Limits{OwnerID: "a", Workloads: map[string]limits.Limit{"w": {TokensPerMinute: ptr(-1)}}}, false},
		{"workload without a name", limits.Limits{OwnerID: "a", Workloads: map[string]limits.Limit{"": {}}}, false},
		{"workload name with a space", limits.Limits{OwnerID: "a", Workloads: map[string]limits.Limit{"a b": {}}}, false},
	}
	for _, c := range cases {
		if err := c.l.Validate(); (err == nil) != c.ok {
			t.Errorf("%s: %v, want ok=%v", c.name, err, c.ok)
		}
	}
}
