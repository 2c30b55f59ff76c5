package provider

import (
	"math"

	"github.com/tollgate/tollgate/internal/tokens"
)

// tokenCount is a usage figure as a provider's JSON reports it (see
// tokens.Count).
type tokenCount = tokens.Count

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
