package catalog_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/budget"
	"github.com/tollgate/tollgate/catalog"
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
