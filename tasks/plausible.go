package tasks

import (
	"github.com/tollgate/tollgate/budget"
	"github.com/tollgate/tollgate/provider"
)

// usageBound is the most usage a call of one request can truthfully
// report. A report beyond it is a lie the request rules out: charged at
// most the reservation, the rest recorded as shortfall, the attempt
// flagged (queueSuccessEnd).
type usageBound struct {
	// input bounds the prompt, cached and cache-write classes included:
	// a token stands for at least one byte of text under every
	// byte-level tokenizer, so it is twice the request's text bytes
	// (estimateInput's figure is a quarter of them), each image at its
	// provider kind's most, plus inputSlack for what providers add
	// themselves.
	input int64
	// output bounds the answer, reasoning included: the output limit
	// actually sent times the choices asked for; 0 for an embedding.
	output int64
}

// inputSlack is the input a provider may add to any request: its own
// system prompt for tool use (Anthropic documents a few hundred tokens)
// and chat-template framing.
const inputSlack = 8192

// usageBoundOf is the bound of b's call, on the request as it was sent
// (chatFor: Tollgate's default limit when the client set none).
func (f *modelFit) usageBoundOf(b *begunAttempt) usageBound {
	if e := b.raw.Embedding; e != nil {
		return usageBound{input: budget.SaturatingAdd(budget.SaturatingMul(estimateEmbedding(*e), 8), inputSlack)}
	}
	sent := f.chatFor(b.model, b.raw)
	text, images := estimateInput(sent)
	for _, v := range sent.Extra {
		text = budget.SaturatingAdd(text, budget.EstimateTokens(string(v)))
	}
	in := budget.SaturatingAdd(budget.SaturatingMul(text, 8), budget.SaturatingMul(images, imageTokens(b.prov.Kind)))
	return usageBound{
		input:  budget.SaturatingAdd(in, inputSlack),
		output: budget.SaturatingMul(int64(sent.OutputLimit()), int64(sent.Choices())),
	}
}

// admits reports whether u is a report the request allows: within the
// bound, and within any sane bound (budget.PlausibleUsage). A missing
// report is admitted: it is estimated, never believed.
func (ub usageBound) admits(u *provider.Usage) bool {
	if u == nil {
		return true
	}
	return budget.PlausibleUsage(u.InputTokens, u.OutputTokens) && u.InputTokens <= ub.input && u.OutputTokens <= ub.output
}
