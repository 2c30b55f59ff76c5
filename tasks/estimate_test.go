package tasks

import (
	"math"
	"testing"

	"github.com/tollgate/tollgate/budget"
	"github.com/tollgate/tollgate/catalog"
	"github.com/tollgate/tollgate/provider"
)

// A reservation never wraps (a price whose cost overflows an int64 would
// make one of one micro). Catalogs refuse such prices at load; should one
// get through, the reservation saturates above any budget and is refused.
func TestEstimateNeverCollapsesAReservation(t *testing.T) {
	t.Parallel()
	huge := catalog.Model{Name: "huge", Provider: "p", OutputMicrosPerMTok: math.MaxInt64}
	wraps := catalog.Model{Name: "wraps", Provider: "p", OutputMicrosPerMTok: 1 << 62} // × 4 tokens = 2^64, 0 when wrapped
	dear := catalog.Model{Name: "dear", Provider: "p", InputMicrosPerMTok: budget.MaxPricePerMTok, OutputMicrosPerMTok: budget.MaxPricePerMTok}
	cat := &catalog.Catalog{Providers: []catalog.Provider{{Key: "p", Kind: "openai"}}, Models: []catalog.Model{huge, wraps, dear}}
	cfg := Config{Catalog: cat, DefaultMaxTokens: 1024}
	s := &Service{cfg: cfg, fitting: newModelFit(cfg)}
	msg := []provider.Message{{Role: "user", Content: provider.Text("abcdefgh")}} // 2 + 4 tokens
	cases := []struct {
		name      string
		model     catalog.Model
		maxTokens int
		want      int64
	}{
		{"price of int64's maximum", huge, MaxMaxTokens, math.MaxInt64},
		{"a product that wrapped to zero", wraps, 4, 18_446_744_073_710},
		{"the largest price, the most tokens", dear, MaxMaxTokens, (6 + MaxMaxTokens) * 1_000_000},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, _ := s.fitting.estimate([]catalog.Model{c.model}, true, Request{Chat: provider.Chat{Model: c.model.Name, Messages: msg, MaxTokens: c.maxTokens}})
			if got != c.want {
				t.Errorf("reservation %d, want %d", got, c.want)
			}
			if got > budget.MaxTotalMicros && got != math.MaxInt64 {
				t.Errorf("reservation %d above every budget but not saturated", got)
			}
		})
	}
}

// An unknown model's refusal names the close matches the catalog found,
// and only those.
func TestUnknownModelNamesCloseMatches(t *testing.T) {
	t.Parallel()
	const base = "is not a model this service offers"
	cases := []struct {
		err  error
		want string
	}{
		{catalog.ErrUnknownModel, base},
		{&catalog.UnknownModelError{Name: "x"}, base},
		{&catalog.UnknownModelError{Name: "gpt-4o-mnii", Suggestions: []string{"gpt-4o-mini"}}, base + `; did you mean "gpt-4o-mini"`},
		{&catalog.UnknownModelError{Name: "claude-sonet", Suggestions: []string{"a", "b", "c"}}, base + `; did you mean "a", "b" or "c"`},
	}
	for _, c := range cases {
		got := unknownModel(c.err)
		if len(got.Fields) != 1 || got.Fields[0].Field != "model" || got.Fields[0].Message != c.want {
			t.Errorf("unknownModel(%v) = %+v, want model: %s", c.err, got.Fields, c.want)
		}
	}
}
