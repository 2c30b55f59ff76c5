package budget

import (
	"errors"
	"fmt"
	"math/big"
	"strconv"
	"strings"
)

// maxDecimalLen bounds the text of a per-token price: a longer one is not
// a price anyone writes, and the bound keeps the arithmetic small.
const maxDecimalLen = 64

// ErrInexact is returned by ParseDollarsPerToken for a price that is not a
// whole number of micros per million tokens.
var ErrInexact = errors.New("budget: not a whole number of micros per 1M tokens")

// ParseDollarsPerToken converts a price in dollars (units) per token,
// written as a plain decimal ("0.0000025") or in exponent form ("2.5e-06",
// as JSON numbers are often written), to micros per million tokens:
// exactly, in decimal, never through a float. It returns ErrInexact for a
// price finer than one micro per million tokens (1e-12 a token) and
// ErrInvalid for anything else it cannot take: a sign, NaN or Infinity, a
// malformed number, a price above MaxPricePerMTok.
func ParseDollarsPerToken(s string) (int64, error) {
	digits, exp, err := splitDecimal(s)
	if err != nil {
		return 0, err
	}
	// The value is digits × 10^exp dollars a token, so digits × 10^(exp+12)
	// micros per million tokens.
	shift := exp + 12
	if shift < 0 {
		keep := max(len(digits)+shift, 0)
		if strings.Trim(digits[keep:], "0") != "" {
			return 0, fmt.Errorf("%w: %q", ErrInexact, s)
		}
		digits, shift = digits[:keep], 0
	}
	digits = strings.TrimLeft(digits, "0")
	if digits == "" {
		return 0, nil
	}
	// Beyond the bound at once: 10^12 has 13 digits.
	if len(digits)+shift > 13 {
		return 0, invalid("%q is above %d micros per 1M tokens", s, MaxPricePerMTok)
	}
	n, ok := new(big.Int).SetString(digits+strings.Repeat("0", shift), 10)
	if !ok || !n.IsInt64() || n.Int64() > MaxPricePerMTok {
		return 0, invalid("%q is above %d micros per 1M tokens", s, MaxPricePerMTok)
	}
	return n.Int64(), nil
}

// splitDecimal reads s, an unsigned decimal with an optional fraction and
// exponent, as all its digits and the power of ten they are scaled by.
func splitDecimal(s string) (digits string, exp int, err error) {
	bad := func(why string) (string, int, error) {
		return "", 0, invalid("%q: %s", s, why)
	}
	switch {
	case s == "" || len(s) > maxDecimalLen:
		return bad(fmt.Sprintf("want a decimal number of 1 to %d characters", maxDecimalLen))
	case s[0] == '-':
		return bad("must not be negative")
	}
	mant, expText, hasExp := strings.Cut(strings.ToLower(s), "e")
	whole, frac, _ := strings.Cut(mant, ".")
	if whole == "" || !allDigits(whole) || !allDigits(frac) || strings.HasSuffix(mant, ".") {
		return bad("want digits, an optional fraction and an optional exponent (2.5e-06)")
	}
	if hasExp {
		e, perr := strconv.Atoi(expText)
		if perr != nil || e < -40 || e > 40 {
			return bad("the exponent must be a whole number from -40 to 40")
		}
		exp = e
	}
	return whole + frac, exp - len(frac), nil
}

func allDigits(s string) bool {
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}
