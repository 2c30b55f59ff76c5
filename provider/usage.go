package provider

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"math/big"
)

// tokenCount is a usage figure as a provider's JSON reports it. Any JSON
// number is read: one beyond an int64 (20 digits, 1e30) saturates at the
// int64 bounds, a fraction is rounded towards zero, and null is zero. A
// figure no call can produce is then the caller's to judge (the tasks
// package caps the charge at the reservation and flags the attempt):
// refusing the whole answer over it would make a call that ran, and was
// billed, look failed, and be made again.
type tokenCount int64

// UnmarshalJSON reads any JSON number; anything else is an error.
func (n *tokenCount) UnmarshalJSON(b []byte) error {
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
	*n = tokenCount(i)
	return nil
}

// addTokens adds usage figures, saturating at the int64 bounds: a sum of
// cached and uncached prompt tokens must not wrap to a small or negative
// count.
func addTokens(xs ...tokenCount) int64 {
	var s int64
	for _, x := range xs {
		v := int64(x)
		switch {
		case v > 0 && s > math.MaxInt64-v:
			s = math.MaxInt64
		case v < 0 && s < math.MinInt64-v:
			s = math.MinInt64
		default:
			s += v
		}
	}
	return s
}

// openAIUsage is OpenAI's usage object; Workers AI reports its first two
// figures under the same names.
type openAIUsage struct {
	PromptTokens        tokenCount `json:"prompt_tokens"`
	CompletionTokens    tokenCount `json:"completion_tokens"`
	PromptTokensDetails *struct {
		CachedTokens tokenCount `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
	CompletionTokensDetails *struct {
		ReasoningTokens tokenCount `json:"reasoning_tokens"`
	} `json:"completion_tokens_details"`
}

// usage is u as a Usage, nil for nil. The totals stay totals: cached
// tokens are part of prompt_tokens and reasoning tokens part of
// completion_tokens, as Usage counts them.
func (u *openAIUsage) usage() *Usage {
	if u == nil {
		return nil
	}
	r := &Usage{InputTokens: int64(u.PromptTokens), OutputTokens: int64(u.CompletionTokens)}
	if d := u.PromptTokensDetails; d != nil {
		r.CachedInputTokens = int64(d.CachedTokens)
	}
	if d := u.CompletionTokensDetails; d != nil {
		r.ReasoningTokens = int64(d.ReasoningTokens)
	}
	return r
}
