package tasks

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"time"

	"github.com/tollgate/tollgate/catalog"
	"github.com/tollgate/tollgate/provider"
	"github.com/tollgate/tollgate/redact"
	"github.com/tollgate/tollgate/replay"
)

// replayAttempt is the replay record of an attempt of t on m, as it
// starts; its outcome is filled in by the caller.
func (s *recording) replayAttempt(t Task, m catalog.Model, prov catalog.Provider, attempt int, start time.Time, traceID string) replay.Attempt {
	return replay.Attempt{
		TaskID: t.ID, OwnerID: t.OwnerID, Attempt: attempt,
		Provider: prov.Kind + ":" + prov.Key, ProviderModel: m.ProviderModel,
		Parameters: s.parameters(t, m, prov),
		TimeoutMS:  int(s.cfg.RequestTimeout / time.Millisecond),
		StartedAt:  start, TraceID: traceID, BuildVersion: s.cfg.BuildVersion,
	}
}

// outcomeRecord is the replay record of c's outcome on t, its answer or
// cut stream redacted as stored.
func (s *recording) outcomeRecord(t Task, c *finishedCall, state string) replay.Attempt {
	b, pe, resp := c.b, c.err, c.resp
	latencyMS := int(c.latency / time.Millisecond)
	rec := s.replayAttempt(t, b.model, b.prov, b.attempt, b.startAt, c.r.traceID)
	now := b.startAt.Add(c.latency)
	rec.FinishedAt, rec.LatencyMS = &now, &latencyMS
	if pe != nil {
		rec.Error = &replay.Failure{Class: string(pe.Class), Code: pe.Code, ProviderStatus: pe.Status}
	}
	rec.State = state
	rec.Stream = b.stream
	if pe == nil || resp != nil && len(choicesOf(resp)) > 0 && (resp.Text() != "" || richAnswer(choicesOf(resp))) {
		// An answer, or a cut stream's part that arrived: redacted like
		// any answer.
		rec.Response, rec.Redactions = s.storedAnswer(t, b.raw, resp)
		if pe != nil {
			rec.Response.Usage = nil
		}
	}
	return rec
}

// storedAnswer is the provider's answer as the replay record may hold it:
// one redaction session over the request then the answer, so a value in
// both gets one placeholder (the request part reproduces what was stored
// at creation).
func (s *recording) storedAnswer(t Task, raw Request, resp *provider.Response) (*replay.Response, map[string]int) {
	p := s.guard.privacyFor(redact.Policy(t.policy))
	_ = p.request(raw)
	return p.answer(resp), p.counts()
}

// parameters is what an attempt of t on m sends beyond the stored
// request, for its replay record (t.Request is the raw request): the
// output limit as sent, the tool list's digest, the response format and
// the images, described as the stored request describes them.
func (s *recording) parameters(t Task, m catalog.Model, prov catalog.Provider) replay.Parameters {
	if t.Request.Embedding != nil {
		return embeddingParameters(t, m)
	}
	sent := s.fitting.providerRequest(&begunAttempt{task: t, model: m, prov: prov, raw: t.Request})
	out := replay.Parameters{Model: m.Name, MaxTokens: sent.OutputLimit(), OutputLimitParam: "max_tokens"}
	if sent.MaxCompletionTokens > 0 {
		out.OutputLimitParam = "max_completion_tokens"
	}
	if sent.N > 1 {
		out.Choices = sent.N
	}
	if len(sent.Tools) > 0 {
		out.Tools, out.ToolsSHA256 = len(sent.Tools), ToolsSHA256(sent.Tools)
	}
	if f := sent.ResponseFormat; f != nil {
		out.ResponseFormat = f.Type
	}
	if !hasImages(t.Request.Messages) && (sent.ResponseFormat == nil || sent.ResponseFormat.JSONSchema == nil) {
		return out
	}
	// Described under the owner's policy, as in the stored request: the
	// same session, so the same placeholders.
	p := s.guard.privacyFor(redact.Policy(t.policy))
	stored := p.request(t.Request)
	out.Images = p.images
	if f := stored.ResponseFormat; f != nil && f.JSONSchema != nil {
		out.SchemaName = f.JSONSchema.Name
	}
	return out
}

// ToolsSHA256 is the hex SHA-256 of the canonical JSON of a tool list (keys
// sorted, no insignificant space): equal lists, however their keys were
// ordered, have one digest, and any change to a name, description, schema
// or strict flag gives another.
func ToolsSHA256(tools []provider.Tool) string {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(tools); err != nil {
		panic("tasks: encode tools: " + err.Error()) // decoded tools always re-encode
	}
	canonical, err := provider.CanonicalJSON(buf.Bytes())
	if err != nil {
		panic("tasks: canonical tools: " + err.Error())
	}
	sum := sha256.Sum256(canonical)
	return hex.EncodeToString(sum[:])
}

func hasImages(msgs []provider.Message) bool {
	for _, m := range msgs {
		for _, part := range m.Content.Parts {
			if part.ImageURL != nil {
				return true
			}
		}
	}
	return false
}
