package budget

import (
	"math"
	"math/bits"
)

// Bounds at the edges. Every amount that enters from outside (a budget
// total, a top-up, a price, a provider's usage report) is checked against
// one of these, so that the arithmetic inside, in Go and in SQL, has
// headroom: reserved + spent <= total <= MaxTotalMicros, and a sum of up to
// nine such amounts still fits an int64 (and a bigint). What no bound
// covers is computed checked or saturating here, or in numeric in SQL.
const (
	// MaxTotalMicros is the largest budget total, also after top-ups:
	// 10^18 micros, a trillion units. It is the way to say "unlimited":
	// no real spend reaches it. A larger total or a top-up past it is
	// refused (ErrInvalid) naming the field.
	MaxTotalMicros int64 = 1_000_000_000_000_000_000
	// Unlimited is the total that stands for no limit: MaxTotalMicros.
	Unlimited = MaxTotalMicros
	// MaxPricePerMTok is the largest price a model may have, in micros per
	// million tokens: 10^12, one unit a token, a thousand times the
	// dearest model sold today. Catalogs with a larger price do not load.
	MaxPricePerMTok int64 = 1_000_000_000_000
	// MaxUsageTokens is the most tokens one call may plausibly report, per
	// figure (input, output): 10^9, a hundred times the largest context
	// window offered today. A report beyond it is a lie, never a reason to
	// call again: the report's charge is capped at the reservation
	// (Settlement.ChargeCapMicros), the rest is recorded as shortfall and
	// the attempt flagged.
	MaxUsageTokens int64 = 1_000_000_000
)

// addMicros returns a + b, or false when the sum does not fit an int64.
func addMicros(a, b int64) (int64, bool) {
	s := a + b
	if (b > 0 && s < a) || (b < 0 && s > a) {
		return 0, false
	}
	return s, true
}

// mulMicros returns a × b, or false when the product does not fit an int64.
func mulMicros(a, b int64) (int64, bool) {
	if a == 0 || b == 0 {
		return 0, true
	}
	p := a * b
	if p/b != a || (a == -1 && b == math.MinInt64) || (b == -1 && a == math.MinInt64) {
		return 0, false
	}
	return p, true
}

// SaturatingAdd is a + b saturated at the int64 bounds: for amounts,
// math.MaxInt64 when the sum does not fit, more than any budget can hold
// (MaxTotalMicros).
func SaturatingAdd(a, b int64) int64 {
	if s, ok := addMicros(a, b); ok {
		return s
	}
	if b > 0 {
		return math.MaxInt64
	}
	return math.MinInt64
}

// SaturatingMul is a × b saturated at the int64 bounds: for amounts,
// math.MaxInt64 when the product does not fit.
func SaturatingMul(a, b int64) int64 {
	if p, ok := mulMicros(a, b); ok {
		return p
	}
	if (a < 0) != (b < 0) {
		return math.MinInt64
	}
	return math.MaxInt64
}

// checkTotal returns ErrInvalid naming field unless 0 <= v <= MaxTotalMicros.
func checkTotal(field string, v int64) error {
	if v < 0 || v > MaxTotalMicros {
		return invalid("%s must be between 0 and %d (the maximum, which stands for unlimited), got %d", field, MaxTotalMicros, v)
	}
	return nil
}

// PlausibleUsage reports whether a provider's token counts are within
// MaxUsageTokens each and not negative.
func PlausibleUsage(inputTokens, outputTokens int64) bool {
	return inputTokens >= 0 && outputTokens >= 0 && inputTokens <= MaxUsageTokens && outputTokens <= MaxUsageTokens
}

// mulAdd128 is hi:lo + a × b in 128 bits, a and b non-negative.
func mulAdd128(hi, lo uint64, a, b int64) (uint64, uint64) {
	ph, pl := bits.Mul64(uint64(a), uint64(b))
	lo, c := bits.Add64(lo, pl, 0)
	hi, _ = bits.Add64(hi, ph, c)
	return hi, lo
}
