package budget

import (
	"fmt"
	"math"
	"math/bits"
	"strconv"
	"strings"
)

// Price is what a model costs, in micro-units per one million tokens.
//
// Providers price some tokens apart: input read from their prompt cache
// (cheaper), input written to it (Anthropic charges a premium), and
// reasoning. A class without its own price (nil) costs what its total
// costs: cached input and cache writes the input price, reasoning the
// output price, as OpenAI bills reasoning tokens as output.
type Price struct {
	InputPerMTok       int64
	OutputPerMTok      int64
	CachedInputPerMTok *int64
	CacheWritePerMTok  *int64
	ReasoningPerMTok   *int64
}

// Tokens is one call's usage by class. Input and Output are the totals;
// CachedInput and CacheWrite are parts of Input, Reasoning a part of
// Output, as OpenAI reports prompt_tokens and completion_tokens.
type Tokens struct {
	Input       int64
	Output      int64
	CachedInput int64
	CacheWrite  int64
	Reasoning   int64
}

// Normalized returns t with every figure at least zero and each class
// within what is left of its total: a report whose classes exceed their
// total (a provider's error) is read as all of the total in those classes,
// cached input first, never as more tokens than the total.
func (t Tokens) Normalized() Tokens {
	t.Input, t.Output = max(t.Input, 0), max(t.Output, 0)
	t.CachedInput = min(max(t.CachedInput, 0), t.Input)
	t.CacheWrite = min(max(t.CacheWrite, 0), t.Input-t.CachedInput)
	t.Reasoning = min(max(t.Reasoning, 0), t.Output)
	return t
}

// classPrice is a class's own price, or its total's when it has none.
func classPrice(own *int64, total int64) int64 {
	if own == nil {
		return total
	}
	return *own
}

// DefaultPrice is charged for models with no configured price: deliberately
// high (10 units per million input and 30 per million output tokens), so an
// unpriced model over-reserves rather than overspends.
var DefaultPrice = Price{InputPerMTok: 10_000_000, OutputPerMTok: 30_000_000}

// ParsePrices reads "model=in:out,model2=in:out" (micros per 1M tokens), the
// form of the TOLLGATE_PRICES variable, the space around each part trimmed.
// It returns an error naming the bad entry, and one naming the model a
// second entry prices again (" gpt-4o=1:2" and "gpt-4o=3:4" are one
// model): a map would keep the last price and drop the other silently.
// What a model's name may hold is catalog.CheckModelName's to say.
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
		model = strings.TrimSpace(model)
		if _, twice := m[model]; twice {
			return nil, fmt.Errorf("budget: price %q: model %q is priced twice; give each model one price", entry, model)
		}
		m[model] = Price{InputPerMTok: pi, OutputPerMTok: po}
	}
	return m, nil
}

// Valid returns an error naming the bad figure unless every price given
// is within 0 and MaxPricePerMTok.
func (p Price) Valid() error {
	for _, x := range []struct {
		name string
		v    *int64
	}{{"input", &p.InputPerMTok}, {"output", &p.OutputPerMTok}, {"cached input", p.CachedInputPerMTok},
		{"cache write", p.CacheWritePerMTok}, {"reasoning", p.ReasoningPerMTok}} {
		if x.v != nil && (*x.v < 0 || *x.v > MaxPricePerMTok) {
			return invalid("%s price must be between 0 and %d micros per 1M tokens, got %d", x.name, MaxPricePerMTok, *x.v)
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
	return p.CostOf(Tokens{Input: inputTokens, Output: outputTokens})
}

// CostOf is Cost by class: the input outside the cache classes at the
// input price, cached input and cache writes at theirs, the output outside
// reasoning at the output price and reasoning at its own, the token counts
// normalized first (Tokens.Normalized). It is exact and saturates as Cost
// does: the input classes sum to at most Input and the output classes to
// at most Output, so the sum of products stays within 128 bits.
func (p Price) CostOf(t Tokens) int64 {
	t = t.Normalized()
	in, out := max(p.InputPerMTok, 0), max(p.OutputPerMTok, 0)
	var hi, lo uint64
	hi, lo = mulAdd128(hi, lo, t.Input-t.CachedInput-t.CacheWrite, in)
	hi, lo = mulAdd128(hi, lo, t.CachedInput, max(classPrice(p.CachedInputPerMTok, in), 0))
	hi, lo = mulAdd128(hi, lo, t.CacheWrite, max(classPrice(p.CacheWritePerMTok, in), 0))
	hi, lo = mulAdd128(hi, lo, t.Output-t.Reasoning, out)
	hi, lo = mulAdd128(hi, lo, t.Reasoning, max(classPrice(p.ReasoningPerMTok, out), 0))
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
