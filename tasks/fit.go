package tasks

import (
	"errors"
	"fmt"
	"sync"

	"github.com/tollgate/tollgate/budget"
	"github.com/tollgate/tollgate/catalog"
	"github.com/tollgate/tollgate/provider"
)

// Refusal codes: why no model of a request's chain can take it. They are
// stable; clients may branch on them.
const (
	CodeModelLacksTools       = "model_lacks_tools"
	CodeModelLacksVision      = "model_lacks_vision"
	CodeModelLacksJSONSchema  = "model_lacks_json_schema"
	CodeModelLacksReasoning   = "model_lacks_reasoning"
	CodeContextWindowExceeded = "context_window_exceeded"
	CodeOutputLimitExceeded   = "output_limit_exceeded"
	CodeUnsupportedField      = "unsupported_field"
)

// RefusedError is a request refused at admission because the model it
// names cannot take it, nor can any model of that model's fallback chain:
// a capability the catalog says it lacks, a context window or output
// limit too small, or a field its provider's adapter cannot carry. Nothing
// was written and no provider was called; the idempotency key stays free.
type RefusedError struct {
	Field   string // the request's JSON path, e.g. "tools" or "messages[2].content[0].image_url"
	Code    string // one of the Code* constants above
	Message string // says which model and why; never request content
}

func (e *RefusedError) Error() string { return "tasks: refused: " + e.Field + ": " + e.Message }

// modelFit decides, from the catalog, the provider adapters and the
// default output limit alone, which models can take a request, what is
// sent to them, and what a request reserves and may be charged: no
// database, no clock, so admission, the run and settlement ask it the
// same questions and get the same answers.
type modelFit struct {
	catalog          *catalog.Catalog
	clients          map[string]provider.Client
	defaultMaxTokens int
	// least is leastReservation, figured once: the catalog does not
	// change while the service runs.
	least struct {
		once   sync.Once
		micros int64
	}
}

// newModelFit is the model fit of cfg's catalog, provider adapters and
// default output limit.
func newModelFit(cfg Config) *modelFit {
	return &modelFit{catalog: cfg.Catalog, clients: cfg.Clients, defaultMaxTokens: cfg.DefaultMaxTokens}
}

// fit returns the models of asked's chain that can take req, in the
// chain's order: the first runs it, the others are its fallbacks. With
// none, it returns the asked model's refusal (the chain's first).
func (f *modelFit) fit(asked catalog.Model, req Request) ([]catalog.Model, error) {
	chain := f.catalog.Chain(asked)
	var fitting []catalog.Model
	var first *RefusedError
	for _, m := range chain {
		err := f.fits(m, req)
		if err == nil {
			fitting = append(fitting, m)
		} else if first == nil {
			first = err
		}
	}
	if len(fitting) == 0 {
		if len(chain) > 1 {
			first.Message += ", nor can any model of its fallback chain"
		}
		return nil, first
	}
	return fitting, nil
}

// fits returns nil when m can take req, else why not: the capabilities
// req needs (catalog.Model.Missing), the client's output limit against
// m's max_output_tokens, the input estimate plus the output limit against
// m's context window, and what m's provider adapter can carry
// (provider.Checker).
func (f *modelFit) fits(m catalog.Model, req Request) *RefusedError {
	if req.Embedding != nil {
		return f.fitsEmbedding(m, req)
	}
	if r := refuseChatOn(m); r != nil {
		return r
	}
	if r := f.refuseNativeOn(m, req); r != nil {
		return r
	}
	if capability, field := m.Missing(req.Chat); capability != "" {
		return &RefusedError{Field: field, Code: "model_lacks_" + capability,
			Message: fmt.Sprintf("model %s does not support %s", m.Name, capability)}
	}
	if limit := req.OutputLimit(); limit > 0 && m.MaxOutputTokens > 0 && limit > m.MaxOutputTokens {
		field := catalog.MaxTokens
		if req.MaxCompletionTokens > 0 {
			field = catalog.MaxCompletionTokens
		}
		return &RefusedError{Field: field, Code: CodeOutputLimitExceeded,
			Message: fmt.Sprintf("model %s writes at most %d output tokens, fewer than the %d asked", m.Name, m.MaxOutputTokens, limit)}
	}
	in, out := f.inputTokens(m, req.Chat), int64(f.outputLimit(m, req))
	if !m.Fits(in, out) {
		// The words clients detect a context overflow by, OpenAI's
		// ("maximum context length") and Anthropic's ("prompt is too
		// long"), as a provider's refusal is answered (server).
		return &RefusedError{Field: "messages", Code: CodeContextWindowExceeded,
			Message: fmt.Sprintf("prompt is too long for model %s: its maximum context length is %d tokens; this request needs about %d input tokens plus %d output",
				m.Name, m.ContextWindow, in, out)}
	}
	if err := f.check(m, req); err != nil {
		r := &RefusedError{Code: CodeUnsupportedField, Message: fmt.Sprintf("model %s's provider cannot carry this request", m.Name)}
		var u *provider.Unsupported
		if errors.As(err, &u) {
			r.Field, r.Message = u.Field, fmt.Sprintf("model %s's provider cannot carry %s: %s", m.Name, u.Field, u.Reason)
		}
		return r
	}
	return nil
}

// check is what m's provider adapter says of the chat sent to it (a
// native body it cannot be given is refused before, refuseNativeOn).
func (f *modelFit) check(m catalog.Model, req Request) error {
	client, chat := f.clients[m.Provider], f.chatFor(m, req)
	if c, ok := client.(provider.Checker); ok {
		return c.Check(chat)
	}
	return nil
}

// outputLimit is the output limit of one choice of req on m: the
// client's, or else Tollgate's default, clamped to m's max_output_tokens.
// A client's limit above that bound is refused (fits), never clamped: the
// client asked for it.
func (f *modelFit) outputLimit(m catalog.Model, req Request) int {
	if n := req.OutputLimit(); n > 0 {
		return n
	}
	if m.MaxOutputTokens > 0 {
		return min(f.defaultMaxTokens, m.MaxOutputTokens)
	}
	return f.defaultMaxTokens
}

// chatFor is the chat sent to m for raw: on the provider's model name,
// with Tollgate's default output limit when the client set none, under
// the name m's provider expects (catalog.LimitParam: never max_tokens for
// a reasoning model). A client's limit keeps the name the client used.
func (f *modelFit) chatFor(m catalog.Model, raw Request) provider.Chat {
	c := raw.Chat
	c.Model = m.ProviderModel
	if c.OutputLimit() == 0 {
		p, _ := f.catalog.Provider(m.Provider)
		if catalog.LimitParam(m, p) == catalog.MaxCompletionTokens {
			c.MaxCompletionTokens = f.outputLimit(m, raw)
		} else {
			c.MaxTokens = f.outputLimit(m, raw)
		}
	}
	if raw.JSONMode && c.ResponseFormat == nil {
		c.ResponseFormat = &provider.ResponseFormat{Type: provider.FormatJSONObject}
	}
	return c
}

// inputTokens is the input estimate of c on m's provider (see
// estimateInput and imageTokens).
func (f *modelFit) inputTokens(m catalog.Model, c provider.Chat) int64 {
	kind := ""
	if p, ok := f.catalog.Provider(m.Provider); ok {
		kind = p.Kind
	}
	text, images := estimateInput(c)
	return budget.SaturatingAdd(text, budget.SaturatingMul(images, imageTokens(kind)))
}

// reservedTokens is the reservation's token figures for req on m: the
// input estimate, and the output limit times the choices asked for.
func (f *modelFit) reservedTokens(m catalog.Model, req Request) (in, out int64) {
	if req.Embedding != nil {
		return estimateEmbedding(*req.Embedding), 0 // an embedding writes no output
	}
	return f.inputTokens(m, req.Chat), budget.SaturatingMul(int64(f.outputLimit(m, req)), int64(req.Choices()))
}

// Per-image input figures, per provider kind: what one image may cost at
// most, whatever its size or detail, so a reservation never falls short
// for images. Tollgate does not fetch or decode images to count exactly.
//
//   - OpenAI: tile-priced models (GPT-4o) charge 85 tokens plus 170 per
//     512-pixel tile, at most 8 tiles once an image is scaled to fit
//     2048 × 768: 1,445; patch-priced models (GPT-4.1 mini, o4-mini) cap
//     an image at 1,536 patches. The larger, 1,536.
//   - Anthropic: about width × height / 750 tokens, images scaled down
//     past about 1.15 megapixels: at most about 1,600.
//   - Workers AI (Llama 3.2 Vision): up to 4 tiles of 560 × 560 pixels at
//     1,601 tokens each: 6,404.
//   - Unknown kinds: the largest of these.
const (
	imageTokensOpenAI     = 1536
	imageTokensAnthropic  = 1600
	imageTokensCloudflare = 6404
)

// imageTokens is the per-image input figure of a provider kind.
func imageTokens(kind string) int64 {
	switch kind {
	case provider.KindOpenAI:
		return imageTokensOpenAI
	case provider.KindAnthropic:
		return imageTokensAnthropic
	}
	return imageTokensCloudflare
}

// Per-item framing, in tokens: what chat formats add around each message
// and each tool definition beyond their text.
const (
	messageFraming = 4
	toolFraming    = 8
)

// estimateInput estimates c's prompt tokens, at four bytes a token
// (budget.EstimateTokens), images apart: the whole history (every
// message's text, name, tool calls with their arguments, tool call ids
// and refusals, thinking passed back (its text, or a redacted block's
// data; a signature is not prompt), plus framing), the tool definitions (names, descriptions,
// parameter schemas), the tool choice and the response format's schema.
// images is the number of image parts, each priced by imageTokens; an
// image's URL or inline data is not counted as text. Sums saturate.
func estimateInput(c provider.Chat) (text, images int64) {
	var n int64
	add := func(s string) { n = budget.SaturatingAdd(n, budget.EstimateTokens(s)) }
	for _, m := range c.Messages {
		n = budget.SaturatingAdd(n, messageFraming)
		add(m.Name)
		add(m.ToolCallID)
		add(m.Refusal)
		if m.Content.Parts == nil {
			add(m.Content.Text)
		}
		for _, p := range m.Content.Parts {
			switch p.Type {
			case provider.PartImage:
				images++
			case provider.PartThinking:
				add(p.Thinking)
			case provider.PartRedactedThinking:
				add(p.Data)
			default:
				add(p.Text)
			}
		}
		for _, tc := range m.ToolCalls {
			add(tc.ID)
			add(tc.Function.Name)
			add(tc.Function.Arguments)
		}
	}
	for _, t := range c.Tools {
		n = budget.SaturatingAdd(n, toolFraming)
		add(t.Function.Name)
		add(t.Function.Description)
		add(string(t.Function.Parameters))
	}
	if c.ToolChoice != nil {
		add(c.ToolChoice.Function)
	}
	if f := c.ResponseFormat; f != nil && f.JSONSchema != nil {
		add(f.JSONSchema.Name)
		add(f.JSONSchema.Description)
		add(string(f.JSONSchema.Schema))
	}
	return n, images
}

// estimateOutput estimates the output tokens of an answer whose usage the
// provider did not report: every choice's text, refusal and tool calls.
func estimateOutput(resp *provider.Response) int64 {
	var n int64
	add := func(s string) { n = budget.SaturatingAdd(n, budget.EstimateTokens(s)) }
	if resp == nil {
		return 0
	}
	for _, c := range resp.Choices {
		add(c.Message.Content.String())
		add(c.Message.Refusal)
		for _, tc := range c.Message.ToolCalls {
			add(tc.Function.Name)
			add(tc.Function.Arguments)
		}
	}
	return n
}

// providerRequest is the call begun makes: the raw request as chatFor
// sends it to the attempt's model.
func (f *modelFit) providerRequest(begun *begunAttempt) provider.Request {
	return provider.Request{Chat: f.chatFor(begun.model, begun.raw), IdempotencyKey: begun.providerKey()}
}
