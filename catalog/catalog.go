// Package catalog owns what Tollgate can call: provider accounts (each a
// provider key: a kind of wire format, an endpoint and a credential) and the
// models clients may name, with their prices, capabilities and fallbacks.
//
// It comes from a YAML file (TOLLGATE_CONFIG) or, with no file, from the
// zero-config environment path (MODEL_PROVIDER, MODEL_BASE_URL, ...), which
// yields one provider key named "default" that passes any model name
// through. Secrets never live in the file: a provider names the environment
// variable that holds its key. Loading validates everything and names the
// offending entry, so a bad file fails at start-up, not at the first call.
package catalog

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"os"
	"regexp"
	"slices"

	"go.yaml.in/yaml/v4"

	"github.com/tollgate/tollgate/budget"
	"github.com/tollgate/tollgate/provider"
)

// Provider is one provider account.
type Provider struct {
	Key       string `yaml:"key"`         // names the account: its queue, gate and breaker
	Kind      string `yaml:"kind"`        // openai, anthropic or cloudflare
	BaseURL   string `yaml:"base_url"`    // "" for the provider's public endpoint
	APIKeyEnv string `yaml:"api_key_env"` // environment variable holding the credential
	AccountID string `yaml:"account_id"`  // cloudflare only
	// MaxTokensParam is the name under which this provider expects
	// Tollgate's default output limit: max_tokens (the default) or
	// max_completion_tokens, for OpenAI-compatible providers that refuse
	// max_tokens. A reasoning model is always sent max_completion_tokens,
	// and a client's own limit always goes under the name the client used.
	MaxTokensParam string `yaml:"max_tokens_param"` // openai only
	// Responses says how a request made in OpenAI's Responses API goes
	// to this provider: "" (the default) carries natively to its
	// /responses what chat completions cannot say and translates the
	// rest to chat completions; native always carries natively; chat
	// never does, for a compatible server without /responses.
	Responses string `yaml:"responses"` // openai only
	// APIKey is resolved from APIKeyEnv at load; never logged.
	APIKey string `yaml:"-"`
}

// Model is a name clients may use, and where and at what price it runs.
type Model struct {
	Name          string `yaml:"name"`
	Provider      string `yaml:"provider"`       // a Provider.Key
	ProviderModel string `yaml:"provider_model"` // the provider's own name; defaults to Name
	// Prices in integer micro-units per million tokens.
	InputMicrosPerMTok  int64 `yaml:"input_micros_per_mtok"`
	OutputMicrosPerMTok int64 `yaml:"output_micros_per_mtok"`
	// Prices of the usage classes; absent, a class costs what its total
	// costs: cached input and cache writes the input price, reasoning the
	// output price (see budget.Price).
	CachedInputMicrosPerMTok *int64 `yaml:"cached_input_micros_per_mtok"`
	CacheWriteMicrosPerMTok  *int64 `yaml:"cache_write_micros_per_mtok"`
	ReasoningMicrosPerMTok   *int64 `yaml:"reasoning_micros_per_mtok"`
	// Capabilities. A request that needs one its model lacks is refused
	// at admission, unless a model of its fallback chain has it; chains
	// skip models that lack one. A pass-through model is assumed to have
	// them all: its provider decides.
	ContextWindow   int  `yaml:"context_window"`    // tokens, input plus output; 0 = unknown (no limit checked)
	MaxOutputTokens int  `yaml:"max_output_tokens"` // 0 = unknown
	JSONSchema      bool `yaml:"json_schema"`
	Tools           bool `yaml:"tools"`
	Vision          bool `yaml:"vision"`
	// Reasoning marks a reasoning model: a default output limit goes to it
	// as max_completion_tokens, never max_tokens.
	Reasoning bool `yaml:"reasoning"`
	// Kind is what the model does: chat (the default) or embedding. An
	// embedding model has an input price only and serves
	// POST /v1/embeddings alone; a chat model serves every other call.
	Kind string `yaml:"kind"`
	// passThrough: not listed, run on the pass-through provider.
	passThrough bool
	// set holds the keys the catalog file (or TOLLGATE_PRICES) gives:
	// what a price list may not change.
	set map[string]bool
	// Fallback lists models to try, in order, when this one is unavailable.
	Fallback []string `yaml:"fallback"`
}

// Price is the model's price.
func (m Model) Price() budget.Price {
	return budget.Price{InputPerMTok: m.InputMicrosPerMTok, OutputPerMTok: m.OutputMicrosPerMTok,
		CachedInputPerMTok: m.CachedInputMicrosPerMTok, CacheWritePerMTok: m.CacheWriteMicrosPerMTok, ReasoningPerMTok: m.ReasoningMicrosPerMTok}
}

// Model kinds.
const (
	KindChat      = "chat"
	KindEmbedding = "embedding"
)

// Serves reports whether m takes embeddings calls (embedding) or chat
// calls (!embedding). A pass-through model takes both: its provider
// decides.
func (m Model) Serves(embedding bool) bool {
	return m.passThrough || (m.Kind == KindEmbedding) == embedding
}

// PassThrough reports whether the model is not described by the catalog
// (an unlisted name, or a zero-config model): its provider decides what
// it can do.
func (m Model) PassThrough() bool { return m.passThrough }

// Fits reports whether a request of the given size fits the model's context
// window.
func (m Model) Fits(inputTokens, maxTokens int64) bool {
	return m.ContextWindow == 0 || budget.SaturatingAdd(inputTokens, maxTokens) <= int64(m.ContextWindow)
}

// Catalog is the whole configuration of providers and models.
type Catalog struct {
	Providers    []Provider `yaml:"providers"`
	Models       []Model    `yaml:"models"`
	DefaultModel string     `yaml:"default_model"`
	// PassThrough: models not listed run on the first provider at the
	// default price (the zero-config path). A file may enable it too.
	PassThrough bool `yaml:"pass_through"`
	// Routes are named, versioned prompts (see package routes, which
	// compiles and validates them).
	Routes []RouteConfig `yaml:"routes"`
	// DefaultPrice applies to pass-through models.
	DefaultInputMicrosPerMTok  int64 `yaml:"default_input_micros_per_mtok"`
	DefaultOutputMicrosPerMTok int64 `yaml:"default_output_micros_per_mtok"`
	// prices is the price list in use (UsePriceList), nil without one.
	prices *PriceList
	// implicitPassThrough: pass-through comes from the zero-config path,
	// not from the file, and a price list turns it off.
	implicitPassThrough bool
}

// RouteConfig is one route as written in the file.
type RouteConfig struct {
	Name          string       `yaml:"name"`
	PromptVersion string       `yaml:"prompt_version"`
	SystemPrompt  string       `yaml:"system_prompt"`
	UserTemplate  string       `yaml:"user_template"` // {{field}} placeholders from the input
	Input         []InputField `yaml:"input"`
	Model         string       `yaml:"model"` // its fallback chain comes from the model's entry
	MaxTokens     int          `yaml:"max_tokens"`
	DeadlineMS    int          `yaml:"deadline_ms"`
	MaxRetries    int          `yaml:"max_retries"` // transient failures only
	Output        RouteOutput  `yaml:"output"`
	Fallback      any          `yaml:"fallback"`
	OnFailure     string       `yaml:"on_failure"` // fallback or error
	Guards        RouteGuards  `yaml:"guards"`
	// Tools are the function tools the route's model may call; a call
	// that asks for them is answered with the tool calls, and the client
	// continues the conversation with their results.
	Tools []RouteTool `yaml:"tools"`
	// ToolChoice is OpenAI's: "none", "auto", "required", or
	// {type: function, function: {name: ...}} naming one of Tools.
	ToolChoice        any   `yaml:"tool_choice"`
	ParallelToolCalls *bool `yaml:"parallel_tool_calls"`
	// Sampling the route fixes; absent fields are not sent.
	Temperature     *float64 `yaml:"temperature"`
	TopP            *float64 `yaml:"top_p"`
	Seed            *int64   `yaml:"seed"`
	Stop            []string `yaml:"stop"`
	ReasoningEffort string   `yaml:"reasoning_effort"`
}

// RouteTool is one function tool of a route.
type RouteTool struct {
	Name        string `yaml:"name"`
	Description string `yaml:"description"`
	// Parameters is the JSON Schema of the call's arguments (an object
	// schema); absent means no arguments.
	Parameters map[string]any `yaml:"parameters"`
	Strict     *bool          `yaml:"strict"`
}

// InputField is one field of a route's input.
type InputField struct {
	Name      string   `yaml:"name"`
	Type      string   `yaml:"type"` // string, integer, number, boolean
	Required  *bool    `yaml:"required"`
	Trim      bool     `yaml:"trim"`
	MinLength int      `yaml:"min_length"`
	MaxLength int      `yaml:"max_length"`
	Min       *float64 `yaml:"min"`
	Max       *float64 `yaml:"max"`
}

// RouteOutput is a route's output contract.
type RouteOutput struct {
	Type      string         `yaml:"type"` // text or json
	MaxLength int            `yaml:"max_length"`
	Schema    map[string]any `yaml:"schema"` // JSON Schema for type json
}

// RouteGuards are a route's per-user limits.
type RouteGuards struct {
	RateLimit *struct {
		Requests int `yaml:"requests"`
		WindowS  int `yaml:"window_s"`
	} `yaml:"rate_limit"`
	DailyCalls int `yaml:"daily_calls"`
}

var keyFormat = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}$`)

// ErrUnknownModel is returned by Resolve for a model the catalog does not
// list when pass-through is off.
var ErrUnknownModel = errors.New("catalog: unknown model")

// Load reads and validates a catalog file. Provider credentials are read
// from the environment variables the file names, through getenv.
func Load(path string, getenv func(string) string) (*Catalog, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("catalog: %w", err)
	}
	return Parse(raw, getenv)
}

// Parse is Load for bytes already read.
func Parse(raw []byte, getenv func(string) string) (*Catalog, error) {
	var c Catalog
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil {
		return nil, fmt.Errorf("catalog: %w", err)
	}
	keys, err := modelKeys(raw)
	if err != nil {
		return nil, err
	}
	for i := range c.Models {
		if i < len(keys) {
			c.Models[i].set = keys[i]
		}
	}
	if err := c.resolve(getenv); err != nil {
		return nil, err
	}
	return &c, nil
}

// FromEnv builds the zero-config catalog: one provider key "default" of
// kind MODEL_PROVIDER (default openai), models passed through, prices from
// TOLLGATE_PRICES (given here already parsed as named prices).
func FromEnv(getenv func(string) string, prices map[string]budget.Price, deflt budget.Price) (*Catalog, error) {
	kind := getenv("MODEL_PROVIDER")
	if kind == "" {
		kind = "openai"
	}
	c := Catalog{
		Providers: []Provider{{
			Key: "default", Kind: kind, BaseURL: orFake(getenv("MODEL_BASE_URL")), APIKeyEnv: "MODEL_API_KEY",
			AccountID: getenv("CLOUDFLARE_ACCOUNT_ID"),
		}},
		DefaultModel:               getenv("MODEL_NAME"),
		PassThrough:                true,
		implicitPassThrough:        true,
		DefaultInputMicrosPerMTok:  deflt.InputPerMTok,
		DefaultOutputMicrosPerMTok: deflt.OutputPerMTok,
	}
	if c.DefaultModel == "" {
		c.DefaultModel = "gpt-4o-mini"
	}
	names := make([]string, 0, len(prices))
	for name := range prices {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		if err := CheckModelName(name); err != nil {
			return nil, fmt.Errorf("TOLLGATE_PRICES: model %q: %w", name, err)
		}
		p := prices[name]
		// Zero-config models are priced, not described: their provider
		// decides what they can do.
		c.Models = append(c.Models, Model{Name: name, Provider: "default", InputMicrosPerMTok: p.InputPerMTok, OutputMicrosPerMTok: p.OutputPerMTok, passThrough: true,
			set: map[string]bool{"input_micros_per_mtok": true, "output_micros_per_mtok": true}})
	}
	if err := c.resolve(getenv); err != nil {
		return nil, err
	}
	return &c, nil
}

// resolve validates c and fills what loading derives (credentials, provider
// model names, the default model and price), phase by phase, so that the
// first error names the first offending entry in file order.
func (c *Catalog) resolve(getenv func(string) string) error {
	kinds, err := c.resolveProviders(getenv)
	if err != nil {
		return err
	}
	names, err := c.resolveModels(kinds)
	if err != nil {
		return err
	}
	if err := c.checkFallbacks(names); err != nil {
		return err
	}
	if err := c.resolveDefaultModel(names); err != nil {
		return err
	}
	return c.resolveDefaultPrice()
}

// resolveProviders checks every provider, reads its credential and returns
// each key's kind.
func (c *Catalog) resolveProviders(getenv func(string) string) (map[string]string, error) {
	if len(c.Providers) == 0 {
		return nil, errors.New("catalog: at least one provider is required")
	}
	kinds := map[string]string{} // provider key -> kind
	for i := range c.Providers {
		p := &c.Providers[i]
		if err := p.check(kinds); err != nil {
			return nil, fmt.Errorf("catalog: providers[%d] (%q): %w", i, p.Key, err)
		}
		kinds[p.Key] = p.Kind
		if p.APIKeyEnv != "" {
			p.APIKey = getenv(p.APIKeyEnv)
		}
	}
	return kinds, nil
}

// check refuses a provider entry whose key is malformed or already in
// kinds, or whose kind and options do not go together.
func (p Provider) check(kinds map[string]string) error {
	_, dup := kinds[p.Key]
	switch {
	case !keyFormat.MatchString(p.Key):
		return errors.New("key must be 1-63 lowercase letters, digits, '_' or '-'")
	case dup:
		return errors.New("duplicate key")
	case p.Kind != "openai" && p.Kind != "anthropic" && p.Kind != "cloudflare":
		return fmt.Errorf("kind must be openai, anthropic or cloudflare, not %q", p.Kind)
	case p.Kind == "cloudflare" && p.AccountID == "":
		return errors.New("cloudflare needs account_id (CLOUDFLARE_ACCOUNT_ID on the zero-config path)")
	case p.MaxTokensParam != "" && p.MaxTokensParam != MaxTokens && p.MaxTokensParam != MaxCompletionTokens:
		return fmt.Errorf("max_tokens_param must be max_tokens or max_completion_tokens, not %q", p.MaxTokensParam)
	case p.MaxTokensParam != "" && p.Kind != "openai":
		return errors.New("max_tokens_param applies to kind openai only; other kinds have one name for the output limit")
	case p.Responses != "" && !slices.Contains(provider.ResponsesModes(), p.Responses):
		return fmt.Errorf("responses must be native or chat, not %q", p.Responses)
	case p.Responses != "" && p.Kind != "openai":
		return errors.New("responses applies to kind openai only: other kinds are never sent a Responses request as it came")
	}
	return nil
}

// resolveModels checks every model against the providers' kinds, defaults
// its provider-side name and returns the models by name.
func (c *Catalog) resolveModels(kinds map[string]string) (map[string]*Model, error) {
	names := map[string]*Model{}
	for i := range c.Models {
		m := &c.Models[i]
		if err := m.check(names, kinds); err != nil {
			return nil, fmt.Errorf("catalog: models[%d] (%q): %w", i, m.Name, err)
		}
		if m.ProviderModel == "" {
			m.ProviderModel = m.Name
		}
		names[m.Name] = m
	}
	return names, nil
}

// check refuses a model entry: bad names, a name already in names, a
// provider not in kinds, limits out of range, or a kind its provider or
// its other settings rule out.
func (m Model) check(names map[string]*Model, kinds map[string]string) error {
	if err := m.checkNames(); err != nil {
		return err
	}
	providerKind, known := kinds[m.Provider]
	switch {
	case names[m.Name] != nil:
		return errors.New("duplicate name")
	case !known:
		return fmt.Errorf("provider %q is not a provider key", m.Provider)
	}
	if err := m.checkLimits(); err != nil {
		return err
	}
	return m.checkKind(providerKind)
}

// checkLimits refuses prices and token limits a cost or a reservation
// cannot hold, and an output limit beyond the context window.
func (m Model) checkLimits() error {
	switch {
	case m.Price().Valid() != nil:
		return fmt.Errorf("prices must be integers from 0 to %d micros per 1M tokens (larger ones overflow a cost)", budget.MaxPricePerMTok)
	case m.ContextWindow < 0 || int64(m.ContextWindow) > budget.MaxUsageTokens:
		return fmt.Errorf("context_window must be from 0 (unknown) to %d tokens", budget.MaxUsageTokens)
	case m.MaxOutputTokens < 0 || int64(m.MaxOutputTokens) > budget.MaxUsageTokens:
		return fmt.Errorf("max_output_tokens must be from 0 (unknown) to %d tokens", budget.MaxUsageTokens)
	case m.ContextWindow > 0 && m.MaxOutputTokens > m.ContextWindow:
		return fmt.Errorf("max_output_tokens (%d) exceeds context_window (%d)", m.MaxOutputTokens, m.ContextWindow)
	}
	return nil
}

// checkFallbacks refuses a fallback that is not another listed model of
// the same kind.
func (c *Catalog) checkFallbacks(names map[string]*Model) error {
	for _, m := range c.Models {
		for _, f := range m.Fallback {
			if names[f] == nil || f == m.Name {
				return fmt.Errorf("catalog: model %q: fallback %q is not another listed model", m.Name, f)
			}
			if names[f].kind() != m.kind() {
				return fmt.Errorf("catalog: model %q: fallback %q is of kind %s, not %s", m.Name, f, names[f].kind(), m.kind())
			}
		}
	}
	return nil
}

// resolveDefaultModel makes the first chat model the default when the
// file names none, and refuses a default that cannot serve chat calls.
func (c *Catalog) resolveDefaultModel(names map[string]*Model) error {
	if c.DefaultModel == "" {
		if i := slices.IndexFunc(c.Models, func(m Model) bool { return m.kind() == KindChat }); i >= 0 {
			c.DefaultModel = c.Models[i].Name
		}
	}
	if c.DefaultModel == "" {
		return errors.New("catalog: default_model is required")
	}
	if err := CheckModelName(c.DefaultModel); err != nil {
		return fmt.Errorf("catalog: default_model %q: %w", c.DefaultModel, err)
	}
	m := names[c.DefaultModel]
	if m == nil && !c.PassThrough {
		return fmt.Errorf("catalog: default_model %q is not a listed model", c.DefaultModel)
	}
	if m != nil && m.kind() != KindChat {
		return fmt.Errorf("catalog: default_model %q is an embedding model; the default serves chat calls", c.DefaultModel)
	}
	return nil
}

// resolveDefaultPrice sets Tollgate's default price when the file gives
// none, and refuses one out of range.
func (c *Catalog) resolveDefaultPrice() error {
	if c.DefaultInputMicrosPerMTok == 0 && c.DefaultOutputMicrosPerMTok == 0 {
		c.DefaultInputMicrosPerMTok, c.DefaultOutputMicrosPerMTok = budget.DefaultPrice.InputPerMTok, budget.DefaultPrice.OutputPerMTok
	}
	if (budget.Price{InputPerMTok: c.DefaultInputMicrosPerMTok, OutputPerMTok: c.DefaultOutputMicrosPerMTok}).Valid() != nil {
		return fmt.Errorf("catalog: default prices must be integers from 0 to %d micros per 1M tokens", budget.MaxPricePerMTok)
	}
	return nil
}

// Resolve returns the model a client's name refers to ("" for the default):
// a catalog model, else, with a price list (UsePriceList), a model of the
// list. Any other name is served on the first provider at the default
// price when pass-through is on, and is ErrUnknownModel otherwise (an
// *UnknownModelError naming close matches when a price list is in use).
// priced reports whether the price is configured rather than the default.
func (c *Catalog) Resolve(name string) (m Model, priced bool, err error) {
	if name == "" {
		name = c.DefaultModel
	}
	for _, x := range c.Models {
		if x.Name == name {
			return x, true, nil
		}
	}
	if m, ok := c.listed(name); ok {
		return m, true, nil
	}
	if !c.PassThrough && c.prices != nil {
		return Model{}, false, &UnknownModelError{Name: name, Suggestions: c.closeMatches(name)}
	}
	if !c.PassThrough {
		return Model{}, false, fmt.Errorf("%w: %q", ErrUnknownModel, name)
	}
	return Model{
		Name: name, Provider: c.Providers[0].Key, ProviderModel: name, passThrough: true,
		InputMicrosPerMTok: c.DefaultInputMicrosPerMTok, OutputMicrosPerMTok: c.DefaultOutputMicrosPerMTok,
	}, false, nil
}

// Provider returns the provider with the key.
func (c *Catalog) Provider(key string) (Provider, bool) {
	for _, p := range c.Providers {
		if p.Key == key {
			return p, true
		}
	}
	return Provider{}, false
}

// ProviderKeys returns the providers' keys, in catalog order: the keys
// whose queues and gates status and metrics report.
func (c *Catalog) ProviderKeys() []string {
	keys := make([]string, 0, len(c.Providers))
	for _, p := range c.Providers {
		keys = append(keys, p.Key)
	}
	return keys
}

// Chain returns the model followed by its fallbacks, depth first, each model
// once: the order in which a task may try them.
func (c *Catalog) Chain(m Model) []Model {
	out := []Model{m}
	seen := map[string]bool{m.Name: true}
	var walk func(Model)
	walk = func(x Model) {
		for _, f := range x.Fallback {
			if seen[f] {
				continue
			}
			seen[f] = true
			fm, _, err := c.Resolve(f)
			if err != nil {
				continue
			}
			out = append(out, fm)
			walk(fm)
		}
	}
	walk(m)
	return out
}

// FakeBaseURL is the base_url that points a provider at the in-process fake
// provider: for demos and tests, never for real traffic.
const FakeBaseURL = "fake"

// UsesFake reports whether any provider points at the in-process fake.
func (c *Catalog) UsesFake() bool {
	for _, p := range c.Providers {
		if p.BaseURL == FakeBaseURL {
			return true
		}
	}
	return false
}

// Clients builds one client per provider key. fakeRoot is the root URL of
// the in-process fake provider (http://host:port), used by providers whose
// base_url is "fake".
func (c *Catalog) Clients(hc *http.Client, fakeRoot string) (map[string]provider.Client, error) {
	out := make(map[string]provider.Client, len(c.Providers))
	for _, p := range c.Providers {
		base := p.BaseURL
		if base == FakeBaseURL {
			if fakeRoot == "" {
				return nil, fmt.Errorf("catalog: provider %q uses the fake provider, but none is running", p.Key)
			}
			base = fakeRoot
			if p.Kind == provider.KindOpenAI {
				base += "/v1"
			}
		}
		client, err := provider.New(p.Kind, provider.Options{BaseURL: base, APIKey: p.APIKey, AccountID: p.AccountID, HTTPClient: hc, Responses: p.Responses})
		if err != nil {
			return nil, fmt.Errorf("catalog: provider %q: %w", p.Key, err)
		}
		out[p.Key] = client
	}
	return out, nil
}

func orFake(base string) string {
	if base == "" {
		return FakeBaseURL
	}
	return base
}

// Output limit names, as OpenAI's chat completions API spells them.
const (
	MaxTokens           = "max_tokens"
	MaxCompletionTokens = "max_completion_tokens"
)

// LimitParam is the name under which Tollgate's default output limit goes
// to m on p: max_completion_tokens for a reasoning model (OpenAI refuses
// max_tokens for them) or when p asks for it, max_tokens otherwise.
func LimitParam(m Model, p Provider) string {
	if m.Reasoning || p.MaxTokensParam == MaxCompletionTokens {
		return MaxCompletionTokens
	}
	return MaxTokens
}

// Capability names, as refusals name them.
const (
	CapabilityTools      = "tools"
	CapabilityVision     = "vision"
	CapabilityJSONSchema = "json_schema"
	CapabilityReasoning  = "reasoning"
)

// Missing returns the first capability c needs that m lacks (tools,
// vision, json_schema, reasoning, in that order) and the field of c that
// needs it, or "" for both. Tools are needed by tools, tool_choice, an
// assistant message's tool_calls and a tool message; vision by an image
// part; json_schema by a json_schema response_format; reasoning by
// reasoning_effort. A pass-through model lacks nothing.
func (m Model) Missing(c provider.Chat) (capability, field string) {
	if m.passThrough {
		return "", ""
	}
	if !m.Tools {
		if f := toolField(c); f != "" {
			return CapabilityTools, f
		}
	}
	if !m.Vision {
		if f := imageField(c.Messages); f != "" {
			return CapabilityVision, f
		}
	}
	if !m.JSONSchema && c.ResponseFormat != nil && c.ResponseFormat.Type == provider.FormatJSONSchema {
		return CapabilityJSONSchema, "response_format"
	}
	if !m.Reasoning && c.ReasoningEffort != "" {
		return CapabilityReasoning, "reasoning_effort"
	}
	if !m.Reasoning && c.Thinking.Asks() {
		return CapabilityReasoning, "thinking"
	}
	return "", ""
}

// toolField is the first field of c that asks for tools, or "".
func toolField(c provider.Chat) string {
	switch {
	case len(c.Tools) > 0:
		return "tools"
	case c.ToolChoice != nil:
		return "tool_choice"
	}
	for i, msg := range c.Messages {
		switch {
		case len(msg.ToolCalls) > 0:
			return fmt.Sprintf("messages[%d].tool_calls", i)
		case msg.Role == "tool":
			return fmt.Sprintf("messages[%d].tool_call_id", i)
		}
	}
	return ""
}

// imageField is the first image part of msgs, or "".
func imageField(msgs []provider.Message) string {
	for i, msg := range msgs {
		for j, p := range msg.Content.Parts {
			if p.Type == provider.PartImage {
				return fmt.Sprintf("messages[%d].content[%d].image_url", i, j)
			}
		}
	}
	return ""
}

// checkNames refuses a name or provider-side name CheckModelName refuses.
func (m Model) checkNames() error {
	if err := CheckModelName(m.Name); err != nil {
		return fmt.Errorf("name: %w", err)
	}
	if m.ProviderModel == "" {
		return nil // the name, checked
	}
	if err := CheckModelName(m.ProviderModel); err != nil {
		return fmt.Errorf("provider_model %q: %w", m.ProviderModel, err)
	}
	return nil
}

// kind is m's kind, chat when unset.
func (m Model) kind() string {
	if m.Kind == "" {
		return KindChat
	}
	return m.Kind
}

// checkKind refuses a kind Tollgate does not know and an embedding model
// described with what only a chat model has: an output price, an output
// limit, a capability, or a provider without embeddings (providerKind).
func (m Model) checkKind(providerKind string) error {
	switch {
	case m.Kind != "" && m.Kind != KindChat && m.Kind != KindEmbedding:
		return fmt.Errorf("kind must be chat or embedding, not %q", m.Kind)
	case m.Kind != KindEmbedding:
		return nil
	case providerKind == provider.KindAnthropic:
		return errors.New("kind embedding needs a provider with embeddings (openai or cloudflare); anthropic has none")
	case m.OutputMicrosPerMTok != 0 || m.CachedInputMicrosPerMTok != nil || m.CacheWriteMicrosPerMTok != nil || m.ReasoningMicrosPerMTok != nil:
		return errors.New("an embedding model has an input price only (input_micros_per_mtok)")
	case m.MaxOutputTokens != 0 || m.Tools || m.Vision || m.JSONSchema || m.Reasoning:
		return errors.New("an embedding model writes no output: max_output_tokens, tools, vision, json_schema and reasoning do not apply")
	}
	return nil
}
