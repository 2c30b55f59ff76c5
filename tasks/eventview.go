package tasks

import (
	"context"

	"github.com/tollgate/tollgate/provider"
	"github.com/tollgate/tollgate/redact"
)

// EventView returns the owner's task as a webhook event carries it, or
// ErrNotFound as Get does. An event leaves the server for a URL, so its
// model output follows the privacy policy the task was created under, as
// the replay record does (eventView); the rest is Get's.
func (s *Service) EventView(ctx context.Context, owner, id string) (Task, error) {
	return s.reader.event(ctx, owner, id)
}

// event carries out Service.EventView.
func (s *reader) event(ctx context.Context, owner, id string) (Task, error) {
	t, err := s.read(ctx, clientViewColumns, owner, id)
	if err != nil {
		return Task{}, err
	}
	var raw *Request
	if redact.Policy(t.policy) == redact.PolicyRedact {
		if r, err := s.guard.rawRequest(t); err == nil {
			raw = &r
		}
	}
	return s.eventView(t, raw), nil
}

// eventView is t's result under its policy: full, as Get shows it;
// redact, every text with the rules applied in one session primed with
// the raw request (when it can still be opened), so placeholders are the
// replay record's; hash-only, no text at all: digests in place of each
// text, only ids, status, cost, usage counts and digests readable. Under
// both, logprobs (their bytes spell the text) and embedding vectors are
// left out; the embedding's count, dimensions and SHA-256 stay.
//
// Every field of Result and provider.Message is decided here:
// TestEventViewDecidesEveryField fails when one is added.
func (s *reader) eventView(t Task, raw *Request) Task {
	policy := redact.Policy(t.policy)
	if policy == redact.PolicyFull || t.Result == nil {
		return t
	}
	p := s.guard.privacyFor(policy)
	if raw != nil {
		_ = p.request(*raw)
	}
	r := *t.Result
	r.Output = p.text(r.Output)
	r.Message = p.answerMessage(r.Message)
	if r.Choices != nil {
		r.Choices = make([]Choice, len(t.Result.Choices))
		for i, c := range t.Result.Choices {
			m := p.answerMessage(&c.Message)
			r.Choices[i] = Choice{Index: c.Index, Message: *m, FinishReason: c.FinishReason, StopReason: c.StopReason,
				StopSequence: p.text(c.StopSequence)}
		}
	}
	r.Logprobs = nil
	// The provider's own answer bytes hold its texts unredacted; an event
	// carries the answer through the fields above only.
	r.Native = nil
	r.StopSequence = p.text(r.StopSequence)
	if e := r.Embedding; e != nil {
		r.Embedding = &EmbeddingResult{Count: e.Count, Dimensions: e.Dimensions, SHA256: e.SHA256}
	}
	t.Result = &r
	return t
}

// answerMessage is an answer's message under p: its role and flags as
// they are, every text (content and parts, thinking and its signature,
// name, tool calls, refusal) through the policy. Images an answer may
// carry are described as a request's are.
func (p *privacy) answerMessage(m *provider.Message) *provider.Message {
	if m == nil {
		return nil
	}
	out := p.message(0, *m)
	return &out
}
