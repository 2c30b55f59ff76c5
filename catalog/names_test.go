package catalog_test

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/tollgate/tollgate/budget"
	"github.com/tollgate/tollgate/catalog"
)

// Real model names, every provider's shape, are names.
func TestRealModelNamesAreNames(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"gpt-4o-2024-08-06", "claude-sonnet-4-5-20250929", "@cf/meta/llama-3.1-8b-instruct",
		"@hf/thebloke/zephyr-7b-beta-awq", "cloudflare/@cf/meta/llama-3.1-8b-instruct", "accounts/fireworks/models/x",
		"anthropic/claude-3-5-haiku-latest", "ft:gpt-4o-mini:org:custom:abc123", "Qwen/Qwen2.5-72B-Instruct", "mistral.mistral-7b-instruct-v0:2",
		"vertex_ai/gemini-1.5-pro@001", "modèle-français"} {
		if err := catalog.CheckModelName(name); err != nil {
			t.Errorf("CheckModelName(%q) = %v, want nil", name, err)
		}
	}
}

// badNames are names refused wherever a name enters the catalog, with a
// word of the reason each refusal gives.
var badNames = []struct{ name, want string }{
	{"gpt\x004o", "control"},
	{"gpt-4o\n", "control"},
	{"gpt\t4o", "control"},
	{"gpt-4o\x1b[31m", "control"},
	{"gpt\u0085", "control"},
	{"gpt\u202e4o", "format"},
	{"gpt\u200b-4o", "format"},
	{"\ufeffgpt-4o", "format"},
	{"=HYPERLINK(\"http://x\")", "formula"},
	{"+cmd", "formula"},
	{"-2+3", "formula"},
	{"@SUM(A1)", "formula"},
	{"@cf/", "formula"},
	{"@cf/=1", "formula"},
	{" gpt-4o", "space"},
	{"gpt-4o\u00a0", "space"},
	{"", "1-200"},
	{strings.Repeat("m", 201), "1-200"},
	{"gpt\xff", "UTF-8"},
}

// A bad name is refused, quoted (%q: its control characters never reach
// a log raw), whether the catalog file, TOLLGATE_PRICES, the default
// model or a price list brings it.
func TestBadModelNamesAreRefusedEverywhere(t *testing.T) {
	t.Parallel()
	for _, c := range badNames {
		quoted := strings.Trim(strconvQuote(c.name), `"`)
		check := func(where string, err error) {
			t.Helper()
			switch {
			case err == nil:
				t.Errorf("%s: %q loaded, want a refusal", where, c.name)
			case !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), quoted):
				t.Errorf("%s: %q: err = %v, want one naming the model and saying %q", where, c.name, err, c.want)
			case strings.ContainsAny(err.Error(), "\x00\n\t\x1b\u202e\u200b\ufeff\u0085"):
				t.Errorf("%s: %q: the error holds the name raw: %q", where, c.name, err)
			}
		}
		check("CheckModelName", errNamed(c.name, catalog.CheckModelName(c.name)))
		if utf8.ValidString(c.name) { // YAML and JSON text cannot carry invalid bytes
			_, err := catalog.Parse([]byte("providers: [{key: p, kind: openai}]\nmodels: [{name: "+yamlString(c.name)+", provider: p}]\n"), env(nil))
			check("catalog file", err)
		}
		if utf8.ValidString(c.name) && c.name != "" { // an empty provider_model is the name
			_, err := catalog.Parse([]byte("providers: [{key: p, kind: openai}]\nmodels: [{name: m, provider: p, provider_model: "+yamlString(c.name)+"}]\n"), env(nil))
			check("provider_model", err)
		}
		_, err := catalog.FromEnv(env(nil), map[string]budget.Price{c.name: {InputPerMTok: 1, OutputPerMTok: 1}}, budget.DefaultPrice)
		check("TOLLGATE_PRICES", err)
		_, err = catalog.FromEnv(env(map[string]string{"MODEL_NAME": c.name}), nil, budget.DefaultPrice)
		if c.name != "" { // an empty MODEL_NAME is the default's
			check("MODEL_NAME", err)
		}
		if utf8.ValidString(c.name) {
			_, err = catalog.ParsePriceList([]byte(`{` + jsonString(c.name) + `: {"input_cost_per_token": 1e-6, "mode": "chat"}}`))
			check("price list", err)
		}
	}
}

// No price is dropped silently: a model a price list gives twice (also
// spelled with an escape), a field given twice within an entry, and a
// field Tollgate reads spelled in another case are refused, naming the
// model.
func TestPriceListRefusesWhatWouldBeDropped(t *testing.T) {
	t.Parallel()
	const e = `{"input_cost_per_token": 1e-6, "output_cost_per_token": 2e-6, "mode": "chat"}`
	cases := []struct{ name, list, want string }{
		{"a model twice", `{"gpt-4o": ` + e + `, "other": ` + e + `, "gpt-4o": {"input_cost_per_token": 9e-6}}`, `model "gpt-4o" is listed twice`},
		{"a model twice, once escaped", `{"gpt-4o": ` + e + `, "gpt\u002d4o": ` + e + `}`, `model "gpt-4o" is listed twice`},
		{"a cost twice", `{"m": {"input_cost_per_token": 1e-6, "input_cost_per_token": 2e-6}}`, `model "m": "input_cost_per_token" is given twice`},
		{"a nested key twice", `{"m": {"search_context_cost_per_query": {"low": 0, "low": 1}}}`, `model "m": "search_context_cost_per_query.low" is given twice`},
		{"a cost in another case", `{"m": {"Input_Cost_Per_Token": 1e-6}}`, `model "m": field "Input_Cost_Per_Token": write it "input_cost_per_token"`},
		{"a field with a space", `{"m": {"mode ": "chat"}}`, `model "m": field "mode ": write it "mode"`},
		{"invalid UTF-8", "{\"a\xff\": " + e + ", \"a\xfe\": " + e + "}", "not valid UTF-8"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			_, err := catalog.ParsePriceList([]byte(c.list))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want one containing %q", err, c.want)
			}
		})
	}
	// Distinct names stay distinct: lookups are exact, so a case variant
	// is another model and loses nothing.
	l, err := catalog.ParsePriceList([]byte(`{"GPT-4o": ` + e + `, "gpt-4o": {"input_cost_per_token": 3e-6}, "openai/gpt-4o": ` + e + `}`))
	if err != nil || l.Len() != 3 {
		t.Fatalf("case variants and a prefixed name: %v, %d models, want 3", err, l.Len())
	}
}

func strconvQuote(s string) string { return fmt.Sprintf("%q", s) }

// errNamed words a CheckModelName error as its callers do.
func errNamed(name string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("model %q: %w", name, err)
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// yamlString is s as a YAML double-quoted scalar, every character outside
// printable ASCII escaped (YAML reads raw line breaks such as U+0085 as
// spaces).
func yamlString(s string) string { return strconv.QuoteToASCII(s) }
