package tasks

import (
	"encoding/json"
	"strconv"

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

// request is the request as it may be stored: message texts, metadata keys
// and metadata values, strings and numbers alike, go through the policy;
// structure, roles and the model stay, so a replay remains readable.
func (p *privacy) request(r Request) Request {
	out := r
	out.Messages = make([]provider.Message, len(r.Messages))
	for i, m := range r.Messages {
		out.Messages[i] = provider.Message{Role: m.Role, Content: provider.Text(p.text(m.Content.String()))}
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
			m[p.text(k)] = p.value(val)
		}
		return m
	case []any:
		a := make([]any, len(x))
		for i, val := range x {
			a[i] = p.value(val)
		}
		return a
	case float64:
		return p.number(v, strconv.FormatFloat(x, 'f', -1, 64))
	case json.Number:
		return p.number(v, x.String())
	}
	return v // booleans and null carry no text
}

// number is a metadata number as it may be stored: a card number or a
// phone number is as personal written without quotes. It stays a number
// when its text needs no redaction and the policy keeps text.
func (p *privacy) number(v any, text string) any {
	if out := p.text(text); out != text {
		return out
	}
	return v
}

// counts says what the session found, for the replay record.
func (p *privacy) counts() map[string]int { return p.session.Counts() }
