package tasks

import (
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tollgate/tollgate/budget"
	"github.com/tollgate/tollgate/catalog"
	"github.com/tollgate/tollgate/provider"
)

// A call's usage is priced by class; a plain report costs what it always
// did, classes beyond their totals and reports beyond any bound are
// recorded within them, and no report yields an estimate.
func TestUsageOf(t *testing.T) {
	t.Parallel()
	s := fitService(t)
	cached, reasoning := int64(100_000), int64(4_000_000)
	m := catalog.Model{Name: "m", Provider: "oa", InputMicrosPerMTok: 1_000_000, OutputMicrosPerMTok: 2_000_000,
		CachedInputMicrosPerMTok: &cached, ReasoningMicrosPerMTok: &reasoning}
	task := Task{Request: Request{Chat: provider.Chat{Messages: hello}}}
	answer := func(u *provider.Usage) *provider.Response {
		r := provider.TextResponse("abcdefghabcd", "stop")
		r.Usage = u
		return r
	}
	cases := []struct {
		name string
		resp *provider.Response
		want Usage
		cost int64
	}{
		{"plain", answer(&provider.Usage{InputTokens: 6, OutputTokens: 3}),
			Usage{InputTokens: 6, OutputTokens: 3, Source: budget.SourceReported}, 6 + 6},
		{"classes", answer(&provider.Usage{InputTokens: 1000, OutputTokens: 300, CachedInputTokens: 800, CacheWriteTokens: 100, ReasoningTokens: 200}),
			Usage{InputTokens: 1000, OutputTokens: 300, CachedInputTokens: 800, CacheWriteTokens: 100, ReasoningTokens: 200, Source: budget.SourceReported},
			100 + 80 + 100 + 200 + 800},
		{"classes beyond their totals", answer(&provider.Usage{InputTokens: 10, OutputTokens: 5, CachedInputTokens: 20, ReasoningTokens: 9}),
			Usage{InputTokens: 10, OutputTokens: 5, CachedInputTokens: 10, ReasoningTokens: 5, Source: budget.SourceReported}, 1 + 20},
		{"a report beyond any bound", answer(&provider.Usage{InputTokens: math.MaxInt64, OutputTokens: -3, CachedInputTokens: math.MaxInt64}),
			Usage{InputTokens: budget.MaxUsageTokens, CachedInputTokens: budget.MaxUsageTokens, Source: budget.SourceReported}, 100_000_000},
		{"no report", answer(nil), Usage{InputTokens: 6, OutputTokens: 3, Source: budget.SourceEstimated}, 6 + 6},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			u, cost := s.applier.usageOf(task, m, c.resp)
			if diff := cmp.Diff(c.want, u); diff != "" {
				t.Errorf("usage mismatch (-want +got):\n%s", diff)
			}
			if cost != c.cost {
				t.Errorf("cost %d, want %d", cost, c.cost)
			}
		})
	}
}
