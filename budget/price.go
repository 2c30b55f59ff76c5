package budget

import (
	"fmt"
	"math"
	"math/bits"
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
		if err1 != nil || err2 != nil || pi < 0 || po < 0 || pi > MaxPricePerMTok || po > MaxPricePerMTok {
			return nil, fmt.Errorf("budget: price %q: amounts must be integers from 0 to %d (micros per 1M tokens)", entry, MaxPricePerMTok)
		}
		m[strings.TrimSpace(model)] = Price{InputPerMTok: pi, OutputPerMTok: po}
	}
	return m, nil
}

// Valid returns an error naming the bad figure unless both prices are
// within 0 and MaxPricePerMTok.
func (p Price) Valid() error {
	for _, x := range []struct {
		name string
		v    int64
	}{{"input", p.InputPerMTok}, {"output", p.OutputPerMTok}} {
		if x.v < 0 || x.v > MaxPricePerMTok {
			return fmt.Errorf("%w: %s price must be between 0 and %d micros per 1M tokens, got %d", ErrInvalid, x.name, MaxPricePerMTok, x.v)
		}
	}
	return nil
}

// Cost returns the cost of the given token counts, rounded up to the next
// micro so that rounding never favours the caller over the budget. It is
// computed exactly, in 128 bits, and saturates: a cost that does not fit an
// int64 is math.MaxInt64, more than any budget holds (MaxTotalMicros), so
// a reservation of it is refused and never wraps to a small amount.
// Negative counts or prices count as zero.
func (p Price) Cost(inputTokens, outputTokens int64) int64 {
	var hi, lo uint64
	hi, lo = mulAdd128(hi, lo, max(inputTokens, 0), max(p.InputPerMTok, 0))
	hi, lo = mulAdd128(hi, lo, max(outputTokens, 0), max(p.OutputPerMTok, 0))
	lo, c := bits.Add64(lo, 999_999, 0)
	hi += c
	if hi >= 1_000_000 {
		return math.MaxInt64 // the quotient needs more than 64 bits
	}
	q, _ := bits.Div64(hi, lo, 1_000_000)
	if q > math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(q)
}

// EstimateTokens estimates the token count of text at four bytes a token,
// rounded up: the usual rule of thumb for English with BPE tokenizers.
func EstimateTokens(text string) int64 {
	return (int64(len(text)) + 3) / 4
}
