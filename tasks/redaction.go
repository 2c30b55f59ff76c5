package tasks

import (
	"github.com/tollgate/tollgate/provider"
	"github.com/tollgate/tollgate/redact"
)

// privacy applies an owner's redaction policy to the texts of one task,
// request first and then response, through one redaction session, so a
// value appearing in both gets the same placeholder.
type privacy struct {
	policy  redact.Policy
	session *redact.Session
	key     []byte
}

func (s *Service) privacyFor(policy redact.Policy) *privacy {
	return &privacy{policy: policy, session: s.cfg.Redactor.RecordPolicy(policy), key: s.digestKey}
}

// text is one text as it may be stored. Under hash-only the text still
// goes through the session, so the record's counts say what was there.
func (p *privacy) text(in string) string {
	out := p.session.Text(in)
	if p.policy == redact.PolicyHashOnly {
		return "[DIGEST:" + redact.Digest(p.key, in) + "]"
	}
	return out
}

// request is the request as it may be stored: message texts and string
// metadata values go through the policy; structure, roles, model and
// numbers stay, so a replay remains readable.
func (p *privacy) request(r Request) Request {
	out := r
	out.Messages = make([]provider.Message, len(r.Messages))
	for i, m := range r.Messages {
		out.Messages[i] = provider.Message{Role: m.Role, Content: p.text(m.Content)}
	}
	if r.Metadata != nil {
		out.Metadata, _ = p.value(r.Metadata).(map[string]any)
	}
	return out
}

func (p *privacy) value(v any) any {
	switch x := v.(type) {
	case string:
		return p.text(x)
	case map[string]any:
		m := make(map[string]any, len(x))
		for k, val := range x {
			m[k] = p.value(val)
		}
		return m
	case []any:
		a := make([]any, len(x))
		for i, val := range x {
			a[i] = p.value(val)
		}
		return a
	}
	return v // numbers, booleans and null carry no text
}

// counts says what the session found, for the replay record.
func (p *privacy) counts() map[string]int { return p.session.Counts() }
