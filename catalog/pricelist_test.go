package catalog_test

import (
	"bytes"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tollgate/tollgate/budget"
	"github.com/tollgate/tollgate/catalog"
)

func ptr(v int64) *int64 { return &v }

// Costs convert exactly, whether written as strings or numbers, plain or
// in exponent form.
func TestPriceListConvertsCostsExactly(t *testing.T) {
	t.Parallel()
	l, err := catalog.ParsePriceList([]byte(`{
		"sample_spec": {"input_cost_per_token": "documentation, skipped", "max_tokens": "LEGACY"},
		"a": {"input_cost_per_token": "0.0000025", "output_cost_per_token": 2.5e-06,
		      "cache_read_input_token_cost": 1e-7, "cache_creation_input_token_cost": "3.75e-06",
		      "output_cost_per_reasoning_token": 0.00001, "litellm_provider": "openai", "mode": "chat",
		      "max_input_tokens": 128000, "max_output_tokens": 16384, "max_tokens": 16384,
		      "supports_function_calling": true, "supports_vision": false, "supports_response_schema": true,
		      "supports_reasoning": true, "supports_prompt_caching": true, "source": "extra keys are allowed",
		      "search_context_cost_per_query": {"search_context_size_low": 0.0}},
		"legacy": {"input_cost_per_token": 0, "max_tokens": 4096, "max_input_tokens": 2048},
		"picture": {"output_cost_per_image": 0.04, "mode": "image_generation"},
		"embed": {"input_cost_per_token": 2e-08, "output_cost_per_token": 0.0, "mode": "embedding", "max_input_tokens": 8191}
	}`))
	if err != nil {
		t.Fatal(err)
	}
	if l.Len() != 3 {
		t.Errorf("Len = %d, want 3 (sample_spec and the image model left out)", l.Len())
	}
	want := map[string]catalog.Listed{
		"a": {Key: "a", Provider: "openai", Kind: catalog.KindChat,
			Input: ptr(2_500_000), Output: ptr(2_500_000), CachedInput: ptr(100_000), CacheWrite: ptr(3_750_000), Reasoning: ptr(10_000_000),
			ContextWindow: 128000, MaxOutputTokens: 16384, Tools: true, JSONSchema: true, ReasoningModel: true},
		"legacy": {Key: "legacy", Kind: catalog.KindChat, Input: ptr(0), ContextWindow: 2048, MaxOutputTokens: 2048},
		"embed":  {Key: "embed", Kind: catalog.KindEmbedding, Input: ptr(20_000), Output: ptr(0), ContextWindow: 8191},
	}
	for key, w := range want {
		got, ok := l.Lookup(key)
		if !ok {
			t.Errorf("%s not listed", key)
			continue
		}
		if diff := cmp.Diff(w, got); diff != "" {
			t.Errorf("%s mismatch (-want +got):\n%s", key, diff)
		}
	}
}

// A value that cannot be taken exactly refuses the file, naming the model
// and the field.
func TestPriceListRefusesWhatItCannotConvert(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, entry, want string
	}{
		{"finer than a micro per 1M tokens", `{"input_cost_per_token": 1.23456789e-13}`, `model "m": input_cost_per_token`},
		{"finer, as a string", `{"output_cost_per_token": "0.0000000000001"}`, `model "m": output_cost_per_token`},
		{"negative", `{"cache_read_input_token_cost": -1e-7}`, `model "m": cache_read_input_token_cost`},
		{"NaN", `{"cache_creation_input_token_cost": "NaN"}`, `model "m": cache_creation_input_token_cost`},
		{"Infinity", `{"output_cost_per_reasoning_token": "Infinity"}`, `model "m": output_cost_per_reasoning_token`},
		{"huge", `{"input_cost_per_token": 1e300}`, `model "m": input_cost_per_token`},
		{"above the bound", `{"input_cost_per_token": "2"}`, `model "m": input_cost_per_token`},
		{"a bool for a cost", `{"input_cost_per_token": true}`, `model "m": input_cost_per_token`},
		{"a string for a limit", `{"max_input_tokens": "128000"}`, `model "m": max_input_tokens`},
		{"a fraction for a limit", `{"max_output_tokens": 1.5}`, `model "m": max_output_tokens`},
		{"a negative limit", `{"max_tokens": -1}`, `model "m": max_tokens`},
		{"a huge limit", `{"max_input_tokens": 100000000000}`, `model "m": max_input_tokens`},
		{"a string for a flag", `{"supports_vision": "yes"}`, `model "m": supports_vision`},
		{"a number for a flag", `{"supports_function_calling": 1}`, `model "m": supports_function_calling`},
		{"a number for the provider", `{"litellm_provider": 7}`, `model "m": litellm_provider`},
		{"a list for the mode", `{"mode": ["chat"]}`, `model "m": mode`},
		{"not an object", `[1]`, `model "m": want an object`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			_, err := catalog.ParsePriceList([]byte(`{"m": ` + c.entry + `}`))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want one containing %q", err, c.want)
			}
		})
	}
	for _, raw := range []string{`[]`, `null`, `{"a": {}} {}`, `{`, ``} {
		if _, err := catalog.ParsePriceList([]byte(raw)); err == nil {
			t.Errorf("%q loaded", raw)
		}
	}
}

const listForCatalog = `{
	"gpt-4o-mini": {"input_cost_per_token": 1.5e-07, "output_cost_per_token": 6e-07, "cache_read_input_token_cost": 7.5e-08,
		"litellm_provider": "openai", "mode": "chat", "max_input_tokens": 128000, "max_output_tokens": 16384,
		"supports_function_calling": true, "supports_vision": true, "supports_response_schema": true},
	"claude-3-5-haiku-latest": {"input_cost_per_token": 8e-07, "output_cost_per_token": 4e-06, "cache_read_input_token_cost": 8e-08,
		"cache_creation_input_token_cost": 1e-06, "litellm_provider": "anthropic", "mode": "chat",
		"max_input_tokens": 200000, "max_output_tokens": 8192, "supports_function_calling": true, "supports_vision": true},
	"anthropic/claude-sonnet-4-5": {"input_cost_per_token": 3e-06, "output_cost_per_token": 1.5e-05, "litellm_provider": "anthropic",
		"mode": "chat", "max_input_tokens": 200000, "max_output_tokens": 64000, "supports_reasoning": true},
	"cloudflare/@cf/meta/llama-3.1-8b-instruct": {"input_cost_per_token": 2.82e-07, "output_cost_per_token": 8.27e-07,
		"litellm_provider": "cloudflare", "mode": "chat", "max_input_tokens": 7968, "max_output_tokens": 2048},
	"text-embedding-3-small": {"input_cost_per_token": 2e-08, "output_cost_per_token": 0, "litellm_provider": "openai", "mode": "embedding"}
}`

const catalogForList = `providers:
  - {key: oa, kind: openai}
  - {key: an, kind: anthropic}
  - {key: cf, kind: cloudflare, account_id: x}
models:
  - {name: mini, provider: oa, provider_model: gpt-4o-mini, input_micros_per_mtok: 1, tools: false, context_window: 1000}
  - {name: haiku, provider: an, provider_model: claude-3-5-haiku-latest}
  - {name: llama, provider: cf, provider_model: "@cf/meta/llama-3.1-8b-instruct", output_micros_per_mtok: 5}
  - {name: mine, provider: oa, input_micros_per_mtok: 7, output_micros_per_mtok: 8}
`

func loadWithList(t *testing.T, yaml string, passThrough bool) *catalog.Catalog {
	t.Helper()
	c, err := catalog.Parse([]byte(yaml), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	l, err := catalog.ParsePriceList([]byte(listForCatalog))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.UsePriceList(l, passThrough); err != nil {
		t.Fatal(err)
	}
	return c
}

// The list fills what the catalog file leaves unsaid; what it says wins.
func TestPriceListFillsCatalogModels(t *testing.T) {
	t.Parallel()
	c := loadWithList(t, catalogForList, false)
	type view struct {
		Price                      budget.Price
		Window, MaxOut             int
		Tools, Vision, Schema, Rsn bool
		PassThrough                bool
	}
	cases := []struct {
		name string
		want view
	}{
		{"mini", view{Price: budget.Price{InputPerMTok: 1, OutputPerMTok: 600_000, CachedInputPerMTok: ptr(75_000)},
			Window: 1000, MaxOut: 1000, Tools: false, Vision: true, Schema: true}},
		{"haiku", view{Price: budget.Price{InputPerMTok: 800_000, OutputPerMTok: 4_000_000, CachedInputPerMTok: ptr(80_000), CacheWritePerMTok: ptr(1_000_000)},
			Window: 200000, MaxOut: 8192, Tools: true, Vision: true}},
		{"llama", view{Price: budget.Price{InputPerMTok: 282_000, OutputPerMTok: 5}, Window: 7968, MaxOut: 2048}},
		{"mine", view{Price: budget.Price{InputPerMTok: 7, OutputPerMTok: 8}}},
	}
	for _, cs := range cases {
		m, priced, err := c.Resolve(cs.name)
		if err != nil || !priced {
			t.Fatalf("Resolve(%s) = %v, %v", cs.name, priced, err)
		}
		got := view{m.Price(), m.ContextWindow, m.MaxOutputTokens, m.Tools, m.Vision, m.JSONSchema, m.Reasoning, m.PassThrough()}
		if diff := cmp.Diff(cs.want, got); diff != "" {
			t.Errorf("%s mismatch (-want +got):\n%s", cs.name, diff)
		}
	}
}

// A name no catalog model has is a model of the list: on the provider of
// its kind, under its provider-side name, at the list's prices.
func TestPriceListNamesResolve(t *testing.T) {
	t.Parallel()
	c := loadWithList(t, catalogForList, false)
	cases := []struct {
		name, provider, providerModel string
		price                         budget.Price
		kind                          string
	}{
		{"gpt-4o-mini", "oa", "gpt-4o-mini", budget.Price{InputPerMTok: 150_000, OutputPerMTok: 600_000, CachedInputPerMTok: ptr(75_000)}, catalog.KindChat},
		{"anthropic/claude-sonnet-4-5", "an", "claude-sonnet-4-5", budget.Price{InputPerMTok: 3_000_000, OutputPerMTok: 15_000_000}, catalog.KindChat},
		{"claude-sonnet-4-5", "an", "claude-sonnet-4-5", budget.Price{InputPerMTok: 3_000_000, OutputPerMTok: 15_000_000}, catalog.KindChat},
		{"@cf/meta/llama-3.1-8b-instruct", "cf", "@cf/meta/llama-3.1-8b-instruct", budget.Price{InputPerMTok: 282_000, OutputPerMTok: 827_000}, catalog.KindChat},
		{"text-embedding-3-small", "oa", "text-embedding-3-small", budget.Price{InputPerMTok: 20_000}, catalog.KindEmbedding},
	}
	for _, cs := range cases {
		m, priced, err := c.Resolve(cs.name)
		if err != nil || !priced {
			t.Errorf("Resolve(%s) = %v, %v; want priced", cs.name, priced, err)
			continue
		}
		if m.Name != cs.name || m.Provider != cs.provider || m.ProviderModel != cs.providerModel || m.PassThrough() || m.Serves(cs.kind == catalog.KindChat) {
			t.Errorf("Resolve(%s) = %+v", cs.name, m)
		}
		if diff := cmp.Diff(cs.price, m.Price()); diff != "" {
			t.Errorf("%s price mismatch (-want +got):\n%s", cs.name, diff)
		}
	}
}

// With a list, a name neither has is refused naming close matches, unless
// pass-through is switched on; then it runs at the default price, unpriced.
func TestPriceListRefusesTyposWithCloseMatches(t *testing.T) {
	t.Parallel()
	c := loadWithList(t, catalogForList, false)
	cases := []struct {
		name string
		want []string
	}{
		{"gpt-4o-mnii", []string{"gpt-4o-mini"}},
		{"haiku-", []string{"haiku"}},
		{"claude-sonnet-4", []string{"claude-sonnet-4-5"}},
		{"completely-different-name", nil},
		{strings.Repeat("x", 150), nil},
	}
	for _, cs := range cases {
		_, _, err := c.Resolve(cs.name)
		var unknown *catalog.UnknownModelError
		if !errors.Is(err, catalog.ErrUnknownModel) || !errors.As(err, &unknown) {
			t.Fatalf("Resolve(%s): %v, want an UnknownModelError", cs.name, err)
		}
		if diff := cmp.Diff(cs.want, unknown.Suggestions); diff != "" {
			t.Errorf("%s suggestions mismatch (-want +got):\n%s", cs.name, diff)
		}
	}

	open := loadWithList(t, catalogForList, true)
	m, priced, err := open.Resolve("gpt-4o-mnii")
	if err != nil || priced || !m.PassThrough() || m.Price().InputPerMTok != budget.DefaultPrice.InputPerMTok {
		t.Errorf("with pass-through: %+v, priced %v, %v; want the default price, unpriced", m, priced, err)
	}
}

// Without a price list nothing changes: the zero-config path passes any
// name through; a file without pass_through refuses without suggestions.
func TestNoPriceListKeepsPassThrough(t *testing.T) {
	t.Parallel()
	c, err := catalog.FromEnv(env(nil), nil, budget.DefaultPrice)
	if err != nil {
		t.Fatal(err)
	}
	if _, priced, err := c.Resolve("gpt-4o-mnii"); err != nil || priced {
		t.Errorf("zero-config without a list: priced %v, %v; want passed through", priced, err)
	}
	f, err := catalog.Parse([]byte(catalogForList), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = f.Resolve("gpt-4o-mini")
	var unknown *catalog.UnknownModelError
	if !errors.Is(err, catalog.ErrUnknownModel) || errors.As(err, &unknown) {
		t.Errorf("file without a list: %v, want a plain ErrUnknownModel", err)
	}
}

// The zero-config path with a list: pass-through is off unless switched
// on, TOLLGATE_PRICES's own figures win, the default model must resolve.
func TestPriceListOnTheZeroConfigPath(t *testing.T) {
	t.Parallel()
	l, err := catalog.ParsePriceList([]byte(listForCatalog))
	if err != nil {
		t.Fatal(err)
	}
	c, err := catalog.FromEnv(env(nil), map[string]budget.Price{"gpt-4o-mini": {InputPerMTok: 1, OutputPerMTok: 2}}, budget.DefaultPrice)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.UsePriceList(l, false); err != nil {
		t.Fatal(err)
	}
	m, priced, err := c.Resolve("")
	want := budget.Price{InputPerMTok: 1, OutputPerMTok: 2, CachedInputPerMTok: ptr(75_000)}
	if err != nil || !priced || m.PassThrough() || !m.Vision || cmp.Diff(want, m.Price()) != "" {
		t.Errorf("default model = %+v, %v, %v", m, priced, err)
	}
	if _, _, err := c.Resolve("gpt-4o-mnii"); !errors.Is(err, catalog.ErrUnknownModel) {
		t.Errorf("typo: %v, want ErrUnknownModel", err)
	}
	other, err := catalog.FromEnv(env(map[string]string{"MODEL_NAME": "private-model"}), nil, budget.DefaultPrice)
	if err != nil {
		t.Fatal(err)
	}
	if err := other.UsePriceList(l, false); err == nil || !strings.Contains(err.Error(), `"private-model"`) {
		t.Errorf("unlisted default model: %v, want a refusal naming it", err)
	}
	if err := other.UsePriceList(l, true); err != nil {
		t.Errorf("unlisted default model with pass-through: %v", err)
	}
	embed, err := catalog.FromEnv(env(map[string]string{"MODEL_NAME": "text-embedding-3-small"}), nil, budget.DefaultPrice)
	if err != nil {
		t.Fatal(err)
	}
	if err := embed.UsePriceList(l, false); err == nil || !strings.Contains(err.Error(), "embedding model") {
		t.Errorf("an embedding default model: %v, want a refusal", err)
	}
}

// The built-in price list loads, and knows every model of the example
// catalog and of the zero-config defaults, and OpenAI's reasoning models
// as reasoning models (never sent max_tokens).
func TestShippedPriceListLoads(t *testing.T) {
	t.Parallel()
	l, err := catalog.EmbeddedPriceList()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"gpt-4o-mini", "gpt-4o", "gpt-4.1-mini", "o4-mini", "claude-3-5-haiku-latest",
		"cloudflare/@cf/meta/llama-3.1-8b-instruct", "text-embedding-3-small"} {
		if _, ok := l.Lookup(name); !ok {
			t.Errorf("%s is not in the built-in list", name)
		}
	}
	for _, name := range []string{"o1", "o3", "o3-mini", "o4-mini", "gpt-5", "gpt-5-mini", "gpt-5-nano"} {
		if m, ok := l.Lookup(name); !ok || !m.ReasoningModel || m.ContextWindow == 0 {
			t.Errorf("%s = %+v, %v; want a reasoning model with its context window", name, m, ok)
		}
	}
	c, err := catalog.Load("../deploy/tollgate.example.yaml", env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.UsePriceList(l, false); err != nil {
		t.Fatal(err)
	}
	for _, m := range c.Models {
		if !m.PassThrough() && m.Kind != catalog.KindEmbedding && m.MaxOutputTokens == 0 {
			t.Errorf("%s: no output limit after the list", m.Name)
		}
	}
}

// The list makes a catalog model an embedding model only when the file
// says nothing only a chat model has; the result always loads as valid.
func TestPriceListKindOfCatalogModels(t *testing.T) {
	t.Parallel()
	c := loadWithList(t, `providers: [{key: oa, kind: openai}]
models:
  - {name: chat, provider: oa, input_micros_per_mtok: 1}
  - {name: embed, provider: oa, provider_model: text-embedding-3-small}
  - {name: embed-priced, provider: oa, provider_model: text-embedding-3-small, input_micros_per_mtok: 5}
  - {name: embed-as-chat, provider: oa, provider_model: text-embedding-3-small, output_micros_per_mtok: 5}
`, false)
	cases := []struct {
		name  string
		kind  string
		price budget.Price
	}{
		{"embed", catalog.KindEmbedding, budget.Price{InputPerMTok: 20_000}},
		{"embed-priced", catalog.KindEmbedding, budget.Price{InputPerMTok: 5}},
		{"embed-as-chat", "", budget.Price{InputPerMTok: 20_000, OutputPerMTok: 5}},
	}
	for _, cs := range cases {
		m, _, err := c.Resolve(cs.name)
		if err != nil || m.Kind != cs.kind || cmp.Diff(cs.price, m.Price()) != "" {
			t.Errorf("%s = kind %q, price %+v, %v; want kind %q, price %+v", cs.name, m.Kind, m.Price(), err, cs.kind, cs.price)
		}
	}
}

// deploy/prices/model_prices.json, the copy operators start from, is the
// list built in, byte for byte.
func TestEmbeddedPriceListIsShipped(t *testing.T) {
	t.Parallel()
	built, err := os.ReadFile("model_prices.json")
	if err != nil {
		t.Fatal(err)
	}
	shipped, err := os.ReadFile("../deploy/prices/model_prices.json")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(built, shipped) {
		t.Errorf("deploy/prices/model_prices.json differs from catalog/model_prices.json, the list built in; copy the one you edited over the other")
	}
}
