package tasks

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/tollgate/tollgate/budget"
	"github.com/tollgate/tollgate/catalog"
	"github.com/tollgate/tollgate/provider"
	"github.com/tollgate/tollgate/replay"
)

// An embeddings request is a task like a chat: the same admission and
// reservation, queue, classified failures, settlement and replay record.
// What differs is kept here: its checks, its fit to a model (an embedding
// model whose provider computes embeddings), its reservation (input tokens
// at the model's input price, no output), its call (provider.Embedder) and
// its answer, whose vectors are sealed beside the result as a chat's text
// is, the result row and the replay record holding only their count,
// length and SHA-256.

// Refusal codes of a request on a model of the other kind.
const (
	// CodeModelLacksEmbeddings: an embeddings request on a chat model, or
	// on a model whose provider has no embeddings (Anthropic).
	CodeModelLacksEmbeddings = "model_lacks_embeddings"
	// CodeModelLacksChat: a chat request on an embedding model.
	CodeModelLacksChat = "model_lacks_chat"
)

// EmbeddingResult is an embeddings task's answer as its result holds it.
type EmbeddingResult struct {
	Count      int `json:"count"`
	Dimensions int `json:"dimensions"`
	// SHA256 is the hex SHA-256 of the vectors as little-endian float32
	// values, one after the other (VectorsSHA256): it identifies an answer
	// without holding it.
	SHA256 string `json:"sha256"`
	// Vectors are opened from the sealed answer for the owner's reads;
	// the stored result never holds them.
	Vectors [][]float32 `json:"vectors,omitempty"`
}

// VectorsSHA256 is the hex SHA-256 of vectors as little-endian float32
// values, in order: the digest the replay record and the result keep.
func VectorsSHA256(vectors [][]float32) string {
	h := sha256.New()
	for _, v := range vectors {
		h.Write(provider.EncodeVector(v))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// embeddingResultOf describes vectors, which it keeps for sealing.
func embeddingResultOf(vectors [][]float32) *EmbeddingResult {
	r := &EmbeddingResult{Count: len(vectors), SHA256: VectorsSHA256(vectors), Vectors: vectors}
	if len(vectors) > 0 {
		r.Dimensions = len(vectors[0])
	}
	return r
}

// sealedVectors is the vectors as answer_sealed holds them: little-endian
// float32, one vector after the other.
func sealedVectors(vectors [][]float32) []byte {
	var b []byte
	for _, v := range vectors {
		b = append(b, provider.EncodeVector(v)...)
	}
	return b
}

// openVectors reverses sealedVectors for vectors of dims values; nil when
// the bytes do not hold whole vectors of that length.
func openVectors(b []byte, dims int) [][]float32 {
	if dims <= 0 || len(b)%(4*dims) != 0 {
		return nil
	}
	all := provider.DecodeVector(b)
	out := make([][]float32, len(all)/dims)
	for i := range out {
		out[i] = all[i*dims : (i+1)*dims : (i+1)*dims]
	}
	return out
}

// validateEmbedding is Validate for an embeddings request: a model named,
// no chat field, and an input of 1 to provider.MaxEmbeddingInputs
// non-empty strings of valid UTF-8 without NUL; dimensions and
// encoding_format within OpenAI's bounds.
func (r Request) validateEmbedding() error {
	var fe []FieldError
	e := *r.Embedding
	switch {
	case r.Model == "":
		fe = append(fe, FieldError{"model", "must name an embedding model"})
	case len(r.Model) > MaxModelLength:
		fe = append(fe, FieldError{"model", fmt.Sprintf("must be at most %d characters", MaxModelLength)})
	}
	chat := r.Chat
	chat.Model, chat.Messages = "", nil
	if len(r.Messages) > 0 {
		fe = append(fe, FieldError{"messages", "must be absent from an embeddings request"})
	}
	b, _ := json.Marshal(chat)
	zero, _ := json.Marshal(provider.Chat{})
	if string(b) != string(zero) || r.JSONMode {
		fe = append(fe, FieldError{"embedding", "an embeddings request carries no chat parameter"})
	}
	switch {
	case len(e.Input) == 0:
		fe = append(fe, FieldError{"input", "must hold at least one string"})
	case len(e.Input) > provider.MaxEmbeddingInputs:
		fe = append(fe, FieldError{"input", fmt.Sprintf("must hold at most %d strings", provider.MaxEmbeddingInputs)})
	}
	for i, in := range e.Input {
		if msg := textProblem(in); msg != "" || in == "" {
			if in == "" {
				msg = "must not be empty"
			}
			fe = append(fe, FieldError{fmt.Sprintf("input[%d]", i), msg})
			break // the first is named: thousands of inputs could be wrong
		}
	}
	if e.Dimensions < 0 || e.Dimensions > provider.MaxEmbeddingDimensions {
		fe = append(fe, FieldError{"dimensions", fmt.Sprintf("must be between 1 and %d", provider.MaxEmbeddingDimensions)})
	}
	switch e.EncodingFormat {
	case "", provider.EncodingFloat, provider.EncodingBase64:
	default:
		fe = append(fe, FieldError{"encoding_format", "must be float or base64"})
	}
	if msg := textProblem(e.User); msg != "" {
		fe = append(fe, FieldError{"user", msg})
	}
	if r.DeadlineS < 0 || r.DeadlineS > MaxDeadlineS {
		fe = append(fe, FieldError{"deadline_s", fmt.Sprintf("must be between 1 and %d seconds", MaxDeadlineS)})
	}
	if fe != nil {
		return &ValidationError{Fields: fe}
	}
	return nil
}

// textProblem says what keeps s from being stored, or "".
func textProblem(s string) string {
	switch {
	case !utf8.ValidString(s):
		return "must be valid UTF-8"
	case strings.IndexByte(s, 0) >= 0:
		return "must not contain a NUL character"
	}
	return ""
}

// canonicalEmbedding is e as hashed and stored: encoding_format float,
// the default, as unset.
func canonicalEmbedding(e provider.Embedding) *provider.Embedding {
	if e.EncodingFormat == provider.EncodingFloat {
		e.EncodingFormat = ""
	}
	return &e
}

// fitsEmbedding is fits for an embeddings request: m's provider computes
// embeddings, m is an embedding model, each input's estimate is within
// m's context window (an embedding model's limit per input), and m's
// provider can carry the request's fields.
func (f *modelFit) fitsEmbedding(m catalog.Model, req Request) *RefusedError {
	client := f.clients[m.Provider]
	if _, ok := client.(provider.Embedder); !ok {
		kind := "its provider"
		if p, ok := f.catalog.Provider(m.Provider); ok {
			kind += " (" + p.Kind + ")"
		}
		return &RefusedError{Field: "model", Code: CodeModelLacksEmbeddings,
			Message: fmt.Sprintf("model %s cannot embed: %s has no embeddings", m.Name, kind)}
	}
	if !m.Serves(true) {
		return &RefusedError{Field: "model", Code: CodeModelLacksEmbeddings,
			Message: fmt.Sprintf("model %s is a chat model, not an embedding model", m.Name)}
	}
	if m.ContextWindow > 0 {
		for i, in := range req.Embedding.Input {
			if n := budget.EstimateTokens(in); n > int64(m.ContextWindow) {
				return &RefusedError{Field: fmt.Sprintf("input[%d]", i), Code: CodeContextWindowExceeded,
					Message: fmt.Sprintf("model %s embeds at most %d tokens per input; this input is about %d", m.Name, m.ContextWindow, n)}
			}
		}
	}
	if c, ok := client.(provider.EmbeddingChecker); ok {
		if err := c.CheckEmbedding(*req.Embedding); err != nil {
			r := &RefusedError{Code: CodeUnsupportedField, Message: fmt.Sprintf("model %s's provider cannot carry this request", m.Name)}
			var u *provider.Unsupported
			if errors.As(err, &u) {
				r.Field, r.Message = u.Field, fmt.Sprintf("model %s's provider cannot carry %s: %s", m.Name, u.Field, u.Reason)
			}
			return r
		}
	}
	return nil
}

// refuseChatOn refuses a chat request on an embedding model.
func refuseChatOn(m catalog.Model) *RefusedError {
	if m.Serves(false) {
		return nil
	}
	return &RefusedError{Field: "model", Code: CodeModelLacksChat,
		Message: fmt.Sprintf("model %s is an embedding model; send its calls to POST /v1/embeddings", m.Name)}
}

// estimateEmbedding is the input estimate of e: every input at four bytes
// a token (budget.EstimateTokens), summed, saturating.
func estimateEmbedding(e provider.Embedding) int64 {
	var n int64
	for _, in := range e.Input {
		n = budget.SaturatingAdd(n, budget.EstimateTokens(in))
	}
	return n
}

// inputTokensOf is the input estimate of req on m, whatever its kind.
func (f *modelFit) inputTokensOf(m catalog.Model, req Request) int64 {
	if req.Embedding != nil {
		return estimateEmbedding(*req.Embedding)
	}
	return f.inputTokens(m, req.Chat)
}

// callProvider makes b's call: Complete for a chat, Embed for an
// embeddings request, whose answer comes back as a provider.Response
// holding the vectors. A provider without embeddings (the catalog changed
// since admission) is rejected without a call.
func (s *runner) callProvider(ctx context.Context, b *begunAttempt) (*provider.Response, error) {
	client := s.cfg.Clients[b.model.Provider]
	if b.raw.Embedding == nil {
		return client.Complete(ctx, s.fitting.providerRequest(b))
	}
	e, ok := client.(provider.Embedder)
	if !ok {
		return nil, &provider.Error{Class: provider.ClassRejected, Code: provider.CodeInvalidRequest}
	}
	resp, err := e.Embed(ctx, provider.EmbeddingRequest{Model: b.model.ProviderModel, Embedding: *b.raw.Embedding,
		IdempotencyKey: b.providerKey()})
	if err != nil {
		return nil, err
	}
	return resp.Response(), nil
}

// embedding is an embeddings request as it may be stored: each input and
// the user through the policy, as a prompt's texts.
func (p *privacy) embedding(e *provider.Embedding) *provider.Embedding {
	if e == nil {
		return nil
	}
	out := *e
	out.Input = make([]string, len(e.Input))
	for i, in := range e.Input {
		out.Input[i] = p.text(in)
	}
	out.User = p.text(e.User)
	return &out
}

// embeddingRecord is what a replay record keeps of an answer's vectors:
// their count, length and digest, never the vectors.
func embeddingRecord(vectors [][]float32) *replay.Embedding {
	if vectors == nil {
		return nil
	}
	r := embeddingResultOf(vectors)
	return &replay.Embedding{Count: r.Count, Dimensions: r.Dimensions, SHA256: r.SHA256}
}

// embeddingParameters is what an embeddings attempt of t on m sends
// beyond the stored request, for its replay record.
func embeddingParameters(t Task, m catalog.Model) replay.Parameters {
	e := t.Request.Embedding
	return replay.Parameters{Model: m.Name, Inputs: len(e.Input), Dimensions: e.Dimensions, EncodingFormat: e.EncodingFormat}
}
