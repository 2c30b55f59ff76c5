package tasks

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/tollgate/tollgate/provider"
	"github.com/tollgate/tollgate/redact"
	"github.com/tollgate/tollgate/replay"
)

// privacy applies an owner's redaction policy to the texts of one task,
// request first and then response, through one redaction session, so a
// value appearing in both gets the same placeholder.
type privacy struct {
	policy   redact.Policy
	session  *redact.Session
	redactor *redact.Redactor
	key      []byte
	// images are the images the last request() met, described for the
	// replay record.
	images []replay.Image
}

func (s *guard) privacyFor(policy redact.Policy) *privacy {
	return &privacy{policy: policy, session: s.cfg.Redactor.RecordPolicy(policy), redactor: s.cfg.Redactor, key: s.digestKey}
}

// identifier is a name the provider chose (the answer's model, a finish
// or stop reason, a system fingerprint) as it may be stored and shown: as
// is when it is a plain identifier (redact.PlainIdentifier) in which the
// credential rules find nothing, so a replay stays readable; anything
// else is the provider's text, and goes through the policy as client text
// does. One rule for every such field, wherever it is kept.
func (p *privacy) identifier(in string) string {
	if in == "" {
		return ""
	}
	if redact.PlainIdentifier(in) && p.redactor.RecordPolicy(redact.PolicyRedact).Text(in) == in {
		return in
	}
	return p.text(in)
}

// identifiers applies identifier to the provider-named fields of a
// result: its finish reason and system fingerprint, and every choice's
// finish and stop reasons; a native answer naming anything else is not
// kept (nativeNames).
func (p *privacy) identifiers(r *Result) {
	r.FinishReason, r.SystemFingerprint, r.StopReason = p.identifier(r.FinishReason), p.identifier(r.SystemFingerprint), p.identifier(r.StopReason)
	for i := range r.Choices {
		c := &r.Choices[i]
		c.FinishReason, c.StopReason = p.identifier(c.FinishReason), p.identifier(c.StopReason)
	}
	p.nativeNames(r)
}

// text is one text as it may be stored. Under hash-only the text still
// goes through the session, so the record's counts say what was there.
func (p *privacy) text(in string) string {
	if in == "" {
		return ""
	}
	out := p.session.Text(in)
	if p.policy == redact.PolicyHashOnly {
		return "[DIGEST:" + redact.Digest(p.key, in) + "]"
	}
	return out
}

// request is the request as it may be stored: every string a client
// produced goes through the policy (message texts and text parts, names,
// tool calls and their arguments, tool results, refusals, thinking passed
// back, tool and schema definitions, stop sequences, user identifiers,
// anthropic-beta values, pass-through fields, metadata keys and values); images are described, never kept (see
// image). Structure, roles, the model and the numeric parameters stay, so
// a replay remains readable. The images met are listed in p.images.
func (p *privacy) request(r Request) Request {
	out := r
	p.images = nil
	out.Messages = make([]provider.Message, len(r.Messages))
	for i, m := range r.Messages {
		out.Messages[i] = p.message(i, m)
	}
	if r.Tools != nil {
		out.Tools = make([]provider.Tool, len(r.Tools))
		for i, t := range r.Tools {
			f := t.Function
			out.Tools[i] = provider.Tool{Type: t.Type, CacheControl: t.CacheControl, Function: provider.FunctionDef{
				Name: p.text(f.Name), Description: p.text(f.Description), Parameters: p.json(f.Parameters), Strict: f.Strict}}
		}
	}
	if r.ToolChoice != nil && r.ToolChoice.Function != "" {
		out.ToolChoice = &provider.ToolChoice{Function: p.text(r.ToolChoice.Function)}
	}
	if f := r.ResponseFormat; f != nil && f.JSONSchema != nil {
		js := *f.JSONSchema
		js.Name, js.Description, js.Schema = p.text(js.Name), p.text(js.Description), p.json(js.Schema)
		out.ResponseFormat = &provider.ResponseFormat{Type: f.Type, JSONSchema: &js}
	}
	if r.Stop != nil {
		out.Stop = make(provider.Stop, len(r.Stop))
		for i, st := range r.Stop {
			out.Stop[i] = p.text(st)
		}
	}
	out.User, out.SafetyIdentifier = p.text(r.User), p.text(r.SafetyIdentifier)
	if r.Betas != nil {
		out.Betas = make([]string, len(r.Betas))
		for i, b := range r.Betas {
			out.Betas[i] = p.text(b)
		}
	}
	if r.Extra != nil {
		out.Extra = make(map[string]json.RawMessage, len(r.Extra))
		for k, v := range r.Extra {
			out.Extra[k] = p.json(v) // the names are OpenAI's fields
		}
	}
	if r.Metadata != nil {
		out.Metadata, _ = p.value(r.Metadata).(map[string]any)
	}
	out.Embedding = p.embedding(r.Embedding)
	out.Native = p.native(r.Native)
	return out
}

// message is one message as it may be stored; i is its index. Thinking
// passed back (its text, signature and redacted data) is text like any
// other.
func (p *privacy) message(i int, m provider.Message) provider.Message {
	out := provider.Message{Role: m.Role, Name: p.text(m.Name), ToolCallID: p.text(m.ToolCallID), Refusal: p.text(m.Refusal),
		ToolCalls: p.toolCalls(m.ToolCalls), IsError: m.IsError, CacheControl: m.CacheControl}
	if m.Content.Parts == nil {
		out.Content = provider.Text(p.text(m.Content.Text))
		return out
	}
	parts := make([]provider.Part, len(m.Content.Parts))
	for j, part := range m.Content.Parts {
		parts[j] = provider.Part{Type: part.Type, Text: p.text(part.Text), Thinking: p.text(part.Thinking),
			Signature: p.text(part.Signature), Data: p.text(part.Data), CacheControl: part.CacheControl}
		if part.ImageURL != nil {
			parts[j].ImageURL = &provider.ImageURL{URL: p.image(i, part.ImageURL), Detail: part.ImageURL.Detail}
		}
	}
	out.Content = provider.Content{Parts: parts}
	return out
}

func (p *privacy) toolCalls(calls []provider.ToolCall) []provider.ToolCall {
	if calls == nil {
		return nil
	}
	out := make([]provider.ToolCall, len(calls))
	for i, c := range calls {
		out[i] = provider.ToolCall{ID: p.text(c.ID), Type: c.Type, CacheControl: c.CacheControl,
			Function: provider.FunctionCall{Name: p.text(c.Function.Name), Arguments: p.text(c.Function.Arguments)}}
	}
	return out
}

// image is an image URL as it may be stored, the image of message i: a
// data URL becomes its description (media type, size, SHA-256), its bytes
// kept only sealed with the raw request; a URL loses its query string,
// where signed URLs carry their secrets, and the rest goes through the
// policy. Each image met is added to p.images for the replay record.
func (p *privacy) image(i int, img *provider.ImageURL) string {
	rec := replay.Image{Message: i, Detail: img.Detail}
	var stored string
	if mediaType, data, ok := dataURL(img.URL); ok {
		sum := sha256.Sum256(data)
		rec.MediaType, rec.Bytes, rec.SHA256 = mediaType, len(data), hex.EncodeToString(sum[:])
		stored = fmt.Sprintf("[IMAGE %s, %d bytes, sha256:%s]", mediaType, len(data), rec.SHA256)
	} else if kept, ok := redact.URLWithoutSecrets(img.URL); ok {
		stored = p.text(kept)
		rec.URL = stored
	} else {
		stored = p.text(img.URL)
		rec.URL = stored
	}
	p.images = append(p.images, rec)
	return stored
}

// dataURL reads a data URL: its media type and its bytes (base64-decoded
// when it says base64 and decodes, else as written).
func dataURL(u string) (mediaType string, data []byte, ok bool) {
	rest, found := strings.CutPrefix(u, "data:")
	if !found {
		return "", nil, false
	}
	meta, payload, found := strings.Cut(rest, ",")
	if !found {
		return "", nil, false
	}
	params := strings.Split(meta, ";")
	mediaType = params[0]
	if mediaType == "" {
		mediaType = "text/plain"
	}
	data = []byte(payload)
	if slices.Contains(params[1:], "base64") {
		if b, err := base64.StdEncoding.DecodeString(payload); err == nil {
			data = b
		}
	}
	return mediaType, data, true
}

// json is a JSON value (a schema, a pass-through field) as it may be
// stored: every key and string (and number, as metadata's) through the
// policy, re-encoded canonically. A value that is not JSON is stored as
// its text through the policy.
func (p *privacy) json(raw json.RawMessage) json.RawMessage {
	if raw == nil {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		b, _ := json.Marshal(p.text(string(raw)))
		return b
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(p.value(v)); err != nil {
		b, _ := json.Marshal(p.text(string(raw)))
		return b
	}
	return bytes.TrimRight(buf.Bytes(), "\n")
}

// answer is a provider's answer as the replay record may hold it, every
// text through the policy.
func (p *privacy) answer(resp *provider.Response) *replay.Response {
	out := &replay.Response{FinishReason: p.identifier(resp.FinishReason()), Model: p.identifier(resp.Model), SystemFingerprint: p.identifier(resp.SystemFingerprint)}
	choices := make([]replay.Choice, len(resp.Choices))
	for i, c := range resp.Choices {
		choices[i] = replay.Choice{Index: c.Index, Content: p.text(c.Message.Content.String()), Refusal: p.text(c.Message.Refusal),
			FinishReason: p.identifier(c.FinishReason)}
		for _, tc := range p.toolCalls(c.Message.ToolCalls) {
			choices[i].ToolCalls = append(choices[i].ToolCalls, replay.ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments})
		}
	}
	if len(choices) > 0 {
		out.Content, out.ToolCalls, out.Refusal = choices[0].Content, choices[0].ToolCalls, choices[0].Refusal
	}
	if len(choices) > 1 {
		out.Choices = choices
	}
	out.Embedding = embeddingRecord(resp.Embeddings)
	if u := resp.Usage; u != nil {
		out.Usage = &replay.Usage{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens, CachedInputTokens: u.CachedInputTokens,
			CacheWriteTokens: u.CacheWriteTokens, ReasoningTokens: u.ReasoningTokens}
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
