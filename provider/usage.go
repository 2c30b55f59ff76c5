package provider

import "math"

// MaxReportedTokens caps each token figure a parser returns. A provider's
// figure is believed up to here and never wraps: two capped figures still
// add up without overflowing int64, so a caller's total is never negative.
// A figure this large is a lie the caller deals with (it is far beyond any
// context window); the parser's job is only never to garble it.
const MaxReportedTokens = math.MaxInt64 / 2

// tokenSum adds the token figures a provider reported for one side of a
// call (Anthropic reports cached prompt tokens apart), saturating at
// MaxReportedTokens. It reports false when a figure is negative: negative
// usage would credit the budget, and no provider means it.
func tokenSum(figures ...int64) (int64, bool) {
	var sum int64
	for _, n := range figures {
		if n < 0 {
			return 0, false
		}
		if n > MaxReportedTokens-sum {
			return MaxReportedTokens, true
		}
		sum += n
	}
	return sum, true
}

// usageOf is a Usage from the input and output figures a provider
// reported, or false when either is negative.
func usageOf(input, output int64) (*Usage, bool) {
	in, ok1 := tokenSum(input)
	out, ok2 := tokenSum(output)
	if !ok1 || !ok2 {
		return nil, false
	}
	return &Usage{InputTokens: in, OutputTokens: out}, true
}
