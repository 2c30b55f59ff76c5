package budget

import (
	"fmt"
	"strconv"
	"strings"
)

// Price is what a model costs, in micro-units per one million tokens.
type Price struct {
	InputPerMTok  int64
	OutputPerMTok int64
}

// DefaultPrice is charged for models with no configured price: deliberately
// high (10 units per million input and 30 per million output tokens), so an
// unpriced model over-reserves rather than overspends.
var DefaultPrice = Price{InputPerMTok: 10_000_000, OutputPerMTok: 30_000_000}

// ParsePrices reads "model=in:out,model2=in:out" (micros per 1M tokens), the
// form of the TOLLGATE_PRICES variable. It returns an error naming the bad
// entry.
func ParsePrices(s string) (map[string]Price, error) {
	m := map[string]Price{}
	for _, entry := range strings.Split(s, ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		model, rest, ok := strings.Cut(entry, "=")
		in, out, ok2 := strings.Cut(rest, ":")
		if !ok || !ok2 || strings.TrimSpace(model) == "" {
			return nil, fmt.Errorf("budget: price %q: want model=input_micros:output_micros", entry)
		}
		pi, err1 := strconv.ParseInt(strings.TrimSpace(in), 10, 64)
		po, err2 := strconv.ParseInt(strings.TrimSpace(out), 10, 64)
		if err1 != nil || err2 != nil || pi < 0 || po < 0 {
			return nil, fmt.Errorf("budget: price %q: amounts must be non-negative integers (micros per 1M tokens)", entry)
		}
		m[strings.TrimSpace(model)] = Price{InputPerMTok: pi, OutputPerMTok: po}
	}
	return m, nil
}

// Cost returns the cost of the given token counts, rounded up to the next
// micro so that rounding never favours the caller over the budget.
func (p Price) Cost(inputTokens, outputTokens int64) int64 {
	num := inputTokens*p.InputPerMTok + outputTokens*p.OutputPerMTok
	return (num + 999_999) / 1_000_000
}

// EstimateTokens estimates the token count of text at four bytes a token,
// rounded up: the usual rule of thumb for English with BPE tokenizers.
func EstimateTokens(text string) int64 {
	return (int64(len(text)) + 3) / 4
}
