package catalog_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/budget"
	"github.com/tollgate/tollgate/catalog"
	"github.com/tollgate/tollgate/provider"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestExampleFileLoads(t *testing.T) {
	t.Parallel()
	c, err := catalog.Load("../deploy/tollgate.example.yaml", env(map[string]string{"OPENAI_API_KEY": "sk-x"}))
	if err != nil {
		t.Fatal(err)
	}
	m, priced, err := c.Resolve("")
	if err != nil || !priced || m.Name != "gpt-4o-mini" {
		t.Fatalf("default model = %+v, %v, %v", m, priced, err)
	}
	var names []string
	for _, x := range c.Chain(m) {
		names = append(names, x.Name)
	}
	if got := strings.Join(names, ","); got != "gpt-4o-mini,claude-haiku,llama-small" {
		t.Errorf("chain = %s", got)
	}
	if p, _ := c.Provider("openai-main"); p.APIKey != "sk-x" {
		t.Error("credential not read from the named variable")
	}
	if _, _, err := c.Resolve("gpt-5-unlisted"); !errors.Is(err, catalog.ErrUnknownModel) {
		t.Errorf("unlisted model: %v, want ErrUnknownModel", err)
	}
}

func TestInvalidCatalogsNameTheProblem(t *testing.T) {
	t.Parallel()
	const okProvider = "providers: [{key: p, kind: openai}]\n"
	cases := []struct {
		name, yaml, want string
	}{
		{"no providers", "models: []\n", "at least one provider"},
		{"bad kind", "providers: [{key: p, kind: gemini}]\ndefault_model: m\npass_through: true\n", `providers[0] ("p"): kind`},
		{"bad key", "providers: [{key: P!, kind: openai}]\n", "key must be"},
		{"duplicate key", "providers: [{key: p, kind: openai}, {key: p, kind: openai}]\n", "duplicate key"},
		{"cloudflare without account", "providers: [{key: p, kind: cloudflare}]\n", "account_id"},
		{"model on unknown provider", okProvider + "models: [{name: m, provider: q}]\n", `models[0] ("m"): provider "q"`},
		{"negative price", okProvider + "models: [{name: m, provider: p, input_micros_per_mtok: -1}]\n", "prices"},
		// A price whose cost overflows an int64 collapsed a reservation to
		// one micro; above the bound it is refused at load.
		{"price above the bound", okProvider + "models: [{name: m, provider: p, output_micros_per_mtok: 1000000000001}]\n", "prices must be integers from 0 to 1000000000000"},
		{"price that overflows", okProvider + "models: [{name: m, provider: p, input_micros_per_mtok: 9223372036854775807}]\n", "prices must be"},
		{"default price above the bound", okProvider + "pass_through: true\ndefault_model: m\ndefault_output_micros_per_mtok: 9000000000000000000\n", "default prices"},
		{"unknown fallback", okProvider + "models: [{name: m, provider: p, fallback: [x]}]\n", `fallback "x"`},
		{"unknown field", okProvider + "modles: []\n", "modles"},
		{"default not listed", okProvider + "models: [{name: m, provider: p}]\ndefault_model: z\n", `default_model "z"`},
		{"duplicate model", okProvider + "models: [{name: m, provider: p}, {name: m, provider: p}]\n", `models[1] ("m"): duplicate name`},
		{"fallback to itself", okProvider + "models: [{name: m, provider: p, fallback: [m]}]\n", `model "m": fallback "m" is not another listed model`},
		{"no chat model for the default", okProvider + "models: [{name: e, provider: p, kind: embedding}]\n", "default_model is required"},
		{"no model and no default", okProvider + "pass_through: true\n", "default_model is required"},
		{"duplicate key after a good one", "providers: [{key: p, kind: openai}, {key: q, kind: anthropic}, {key: p, kind: anthropic}]\n", `providers[2] ("p"): duplicate key`},
		{"model error names its index", okProvider + "models: [{name: a, provider: p}, {name: b, provider: p, context_window: -1}]\n", `models[1] ("b"): context_window must be`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := catalog.Parse([]byte(c.yaml), env(nil))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("Parse error = %v, want one containing %q", err, c.want)
			}
		})
	}
}

func TestZeroConfigPassesModelsThrough(t *testing.T) {
	t.Parallel()
	c, err := catalog.FromEnv(env(map[string]string{"MODEL_PROVIDER": "anthropic", "MODEL_NAME": "claude-x"}),
		map[string]budget.Price{"claude-x": {InputPerMTok: 1, OutputPerMTok: 2}}, budget.DefaultPrice)
	if err != nil {
		t.Fatal(err)
	}
	if !c.UsesFake() {
		t.Error("no MODEL_BASE_URL should mean the in-process fake")
	}
	m, priced, err := c.Resolve("")
	if err != nil || !priced || m.Name != "claude-x" || m.Provider != "default" {
		t.Errorf("default = %+v %v %v", m, priced, err)
	}
	other, priced, err := c.Resolve("anything")
	if err != nil || priced || other.Price() != budget.DefaultPrice {
		t.Errorf("pass-through = %+v %v %v; want the default price, unpriced", other, priced, err)
	}
	if _, err := catalog.FromEnv(env(map[string]string{"MODEL_PROVIDER": "cloudflare"}), nil, budget.DefaultPrice); err == nil {
		t.Error("cloudflare without CLOUDFLARE_ACCOUNT_ID accepted")
	}
}

func TestCapabilityAndLimitSettingsAreValidated(t *testing.T) {
	t.Parallel()
	const okProvider = "providers: [{key: p, kind: openai}]\n"
	cases := []struct {
		name, yaml, want string
	}{
		{"negative max_output_tokens", okProvider + "models: [{name: m, provider: p, max_output_tokens: -1}]\n", "max_output_tokens must be"},
		{"output bound above the window", okProvider + "models: [{name: m, provider: p, context_window: 100, max_output_tokens: 101}]\n", "exceeds context_window"},
		{"window beyond any model", okProvider + "models: [{name: m, provider: p, context_window: 1000000001}]\n", "context_window must be"},
		{"negative class price", okProvider + "models: [{name: m, provider: p, cached_input_micros_per_mtok: -1}]\n", "prices must be"},
		{"class price above the bound", okProvider + "models: [{name: m, provider: p, reasoning_micros_per_mtok: 1000000000001}]\n", "prices must be"},
		{"unknown limit name", "providers: [{key: p, kind: openai, max_tokens_param: max_output}]\n", "max_tokens_param must be"},
		{"limit name on another kind", "providers: [{key: p, kind: anthropic, max_tokens_param: max_tokens}]\n", "kind openai only"},
		{"unknown Responses mode", "providers: [{key: p, kind: openai, responses: always}]\n", "responses must be native or chat"},
		{"Responses mode on another kind", "providers: [{key: p, kind: anthropic, responses: native}]\n", "responses applies to kind openai only"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := catalog.Parse([]byte(c.yaml), env(nil))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("Parse error = %v, want one containing %q", err, c.want)
			}
		})
	}
}

// Class prices are read as given; an absent one stays absent, so its
// class falls back to its total's price.
func TestClassPricesLoad(t *testing.T) {
	t.Parallel()
	c, err := catalog.Parse([]byte(`
providers: [{key: p, kind: openai, max_tokens_param: max_completion_tokens}]
models:
  - {name: m, provider: p, input_micros_per_mtok: 1000000, output_micros_per_mtok: 2000000, cached_input_micros_per_mtok: 0, reasoning_micros_per_mtok: 3000000}
`), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	m, _, _ := c.Resolve("m")
	p := m.Price()
	if p.CachedInputPerMTok == nil || *p.CachedInputPerMTok != 0 || p.CacheWritePerMTok != nil || p.ReasoningPerMTok == nil || *p.ReasoningPerMTok != 3_000_000 {
		t.Errorf("price = %+v", p)
	}
	if got := p.CostOf(budget.Tokens{Input: 10, CachedInput: 10, CacheWrite: 0, Output: 2, Reasoning: 1}); got != 5 {
		t.Errorf("cost = %d, want 5 (free cached input, 2 for output, 3 for reasoning)", got)
	}
}

func TestMissingNamesCapabilityAndField(t *testing.T) {
	t.Parallel()
	text := func(role, s string) provider.Message { return provider.Message{Role: role, Content: provider.Text(s)} }
	user := text("user", "hi")
	image := provider.Message{Role: "user", Content: provider.Content{Parts: []provider.Part{{Type: provider.PartText, Text: "see"},
		{Type: provider.PartImage, ImageURL: &provider.ImageURL{URL: "https://example.com/a.png"}}}}}
	call := provider.Message{Role: "assistant", ToolCalls: []provider.ToolCall{{ID: "c1", Type: "function", Function: provider.FunctionCall{Name: "f", Arguments: "{}"}}}}
	result := provider.Message{Role: "tool", ToolCallID: "c1", Content: provider.Text("42")}
	tools := []provider.Tool{{Type: "function", Function: provider.FunctionDef{Name: "f"}}}
	schema := &provider.ResponseFormat{Type: provider.FormatJSONSchema, JSONSchema: &provider.JSONSchema{Name: "s"}}
	plain := catalog.Model{Name: "plain"}
	all := catalog.Model{Name: "all", Tools: true, Vision: true, JSONSchema: true, Reasoning: true}
	cases := []struct {
		name              string
		model             catalog.Model
		chat              provider.Chat
		capability, field string
	}{
		{"plain text", plain, provider.Chat{Messages: []provider.Message{user}}, "", ""},
		{"tools", plain, provider.Chat{Messages: []provider.Message{user}, Tools: tools}, "tools", "tools"},
		{"tool_choice alone", plain, provider.Chat{Messages: []provider.Message{user}, ToolChoice: &provider.ToolChoice{Mode: "none"}}, "tools", "tool_choice"},
		{"a history with tool calls", plain, provider.Chat{Messages: []provider.Message{user, call, result}}, "tools", "messages[1].tool_calls"},
		{"a tool message", plain, provider.Chat{Messages: []provider.Message{user, result}}, "tools", "messages[1].tool_call_id"},
		{"an image", plain, provider.Chat{Messages: []provider.Message{user, image}}, "vision", "messages[1].content[1].image_url"},
		{"json_schema", plain, provider.Chat{Messages: []provider.Message{user}, ResponseFormat: schema}, "json_schema", "response_format"},
		{"json_object needs nothing", plain, provider.Chat{Messages: []provider.Message{user}, ResponseFormat: &provider.ResponseFormat{Type: provider.FormatJSONObject}}, "", ""},
		{"reasoning_effort", plain, provider.Chat{Messages: []provider.Message{user}, Params: provider.Params{ReasoningEffort: "low"}}, "reasoning", "reasoning_effort"},
		{"tools first", plain, provider.Chat{Messages: []provider.Message{image}, Tools: tools, ResponseFormat: schema}, "tools", "tools"},
		{"a capable model", all, provider.Chat{Messages: []provider.Message{image, call, result}, Tools: tools, ResponseFormat: schema,
			Params: provider.Params{ReasoningEffort: "high"}}, "", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			capability, field := c.model.Missing(c.chat)
			if capability != c.capability || field != c.field {
				t.Errorf("Missing = %q, %q; want %q, %q", capability, field, c.capability, c.field)
			}
		})
	}
	// A pass-through model lacks nothing: its provider decides.
	c, err := catalog.Parse([]byte("providers: [{key: p, kind: openai}]\npass_through: true\ndefault_model: x\n"), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	x, _, _ := c.Resolve("x")
	if capability, _ := x.Missing(provider.Chat{Messages: []provider.Message{image}, Tools: tools}); capability != "" || !x.PassThrough() {
		t.Errorf("pass-through model lacks %q", capability)
	}
}

func TestLimitParam(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		reasoning bool
		param     string
		want      string
	}{
		{false, "", catalog.MaxTokens},
		{true, "", catalog.MaxCompletionTokens},
		{false, catalog.MaxCompletionTokens, catalog.MaxCompletionTokens},
		{true, catalog.MaxTokens, catalog.MaxCompletionTokens}, // never max_tokens to a reasoning model
	} {
		if got := catalog.LimitParam(catalog.Model{Reasoning: c.reasoning}, catalog.Provider{MaxTokensParam: c.param}); got != c.want {
			t.Errorf("LimitParam(reasoning %v, %q) = %q, want %q", c.reasoning, c.param, got, c.want)
		}
	}
}
