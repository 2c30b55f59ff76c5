// Package tokens reads the usage figures a model provider's JSON reports.
// The provider adapters and the Anthropic wire format share it, so that
// every answer's counts are read by one rule.
package tokens

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"math/big"
)

// Count is a usage figure as a provider's JSON reports it. Any JSON
// number is read: one beyond an int64 (20 digits, 1e30) saturates at the
// int64 bounds, a fraction is rounded towards zero, and null is zero. A
// figure no call can produce is then the caller's to judge (the tasks
// package caps the charge at the reservation and flags the attempt):
// refusing the whole answer over it would make a call that ran, and was
// billed, look failed, and be made again. It is written as the integer it
// holds.
type Count int64

// UnmarshalJSON reads any JSON number; anything else is an error.
func (n *Count) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if string(b) == "null" {
		*n = 0
		return nil
	}
	if len(b) == 0 || (b[0] != '-' && (b[0] < '0' || b[0] > '9')) || !json.Valid(b) {
		return errors.New("provider: a token count must be a JSON number")
	}
	f, _, err := big.ParseFloat(string(b), 10, 64, big.ToZero)
	if err != nil {
		// A valid JSON number whose exponent is beyond big.Float's:
		// vanishingly small, or beyond any bound.
		switch {
		case bytes.Contains(bytes.ToLower(b), []byte("e-")):
			*n = 0
		case b[0] == '-':
			*n = math.MinInt64
		default:
			*n = math.MaxInt64
		}
		return nil
	}
	i, _ := f.Int64() // truncated towards zero, saturated at the bounds
	*n = Count(i)
	return nil
}
