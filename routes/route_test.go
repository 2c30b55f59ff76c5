package routes_test

import (
	"strings"
	"testing"

	"github.com/tollgate/tollgate/catalog"
	"github.com/tollgate/tollgate/routes"
)

func TestExampleRoutesCompile(t *testing.T) {
	t.Parallel()
	cat, err := catalog.Load("../deploy/tollgate.example.yaml", func(string) string { return "x" })
	if err != nil {
		t.Fatal(err)
	}
	rs, err := routes.Compile(cat)
	if err != nil {
		t.Fatal(err)
	}
	if rs["draft-reply"] == nil || rs["classify-ticket"] == nil {
		t.Fatalf("routes = %v", rs)
	}
	_, user, _, err := rs["draft-reply"].Prompt(map[string]any{"message": "  hello  "})
	if err != nil || user != "Customer message:\nhello" {
		t.Errorf("prompt = %q, %v", user, err)
	}
}

// An invalid route fails start-up with a message naming the route and the
// field.
func TestInvalidRoutesNameRouteAndField(t *testing.T) {
	t.Parallel()
	const base = `
providers: [{key: p, kind: openai, base_url: fake}]
models: [{name: m, provider: p}]
routes:
  - name: r1
    prompt_version: "1"
    system_prompt: "s"
    user_template: "{{q}}"
    input: [{name: q, type: string, max_length: 10}]
    model: m
    max_tokens: 10
    deadline_ms: 1000
    output: {type: text, max_length: 100}
    fallback: "x"
    on_failure: fallback
`
	cases := []struct{ name, from, to, want string }{
		{"bad on_failure", "on_failure: fallback", "on_failure: maybe", `"r1"): on_failure`},
		{"unknown model", "model: m\n    max", "model: nope\n    max", `"r1"): model`},
		{"fallback of another shape", `fallback: "x"`, "fallback: {a: 1}", `"r1"): fallback`},
		{"template names no field", `user_template: "{{q}}"`, `user_template: "{{zz}}"`, `"r1"): user_template`},
		{"no prompt version", `prompt_version: "1"`, `prompt_version: ""`, `"r1"): prompt_version`},
		{"json output without schema", "output: {type: text, max_length: 100}", "output: {type: json}", `"r1"): output.schema`},
		{"deadline out of range", "deadline_ms: 1000", "deadline_ms: 5", `"r1"): deadline_ms`},
		{"bad input type", "type: string, max_length: 10", "type: date", `"r1"): input[0].type`},
		// A count must fit an integer column and a window a
		// time.Duration: beyond the bounds a route is refused.
		{"daily calls beyond the bound", "on_failure: fallback", "on_failure: fallback\n    guards: {daily_calls: 3000000000}", `"r1"): guards.daily_calls: must be 0-1000000000`},
		{"rate window beyond the bound", "on_failure: fallback", "on_failure: fallback\n    guards: {rate_limit: {requests: 5, window_s: 9300000000}}", `"r1"): guards.rate_limit`},
		{"bad name", "name: r1", "name: R1", `"R1"): name: must be`},
		{"blank system prompt", `system_prompt: "s"`, `system_prompt: "  "`, `"r1"): system_prompt: required`},
		{"max tokens out of range", "max_tokens: 10", "max_tokens: 0", `"r1"): max_tokens: must be 1-100000`},
		{"max retries out of range", "deadline_ms: 1000", "deadline_ms: 1000\n    max_retries: 6", `"r1"): max_retries: must be 0-5`},
		{"duplicate input name", "input: [{name: q, type: string, max_length: 10}]", "input: [{name: q, type: string}, {name: q, type: string}]", `"r1"): input[1].name: must be a unique identifier`},
		{"input name not an identifier", "input: [{name: q,", "input: [{name: 1q,", `"r1"): input[0].name`},
		{"inconsistent lengths", "max_length: 10}]", "min_length: 11, max_length: 10}]", `"r1"): input[0]: min_length and max_length are inconsistent`},
		{"no user template", `user_template: "{{q}}"`, `user_template: ""`, `"r1"): user_template: required`},
		{"text output without a bound", "output: {type: text, max_length: 100}", "output: {type: text}", `"r1"): output.max_length: required for text output`},
		{"unknown output type", "output: {type: text, max_length: 100}", "output: {type: xml}", `"r1"): output.type: must be text or json`},
		{"invalid output schema", "output: {type: text, max_length: 100}", "output: {type: json, schema: {type: 7}}", `"r1"): output.schema`},
		{"no fallback", `fallback: "x"`, `fallback: null`, `"r1"): fallback: required`},
		{"rate requests beyond the bound", "on_failure: fallback", "on_failure: fallback\n    guards: {rate_limit: {requests: 3000000000, window_s: 60}}", `"r1"): guards.rate_limit`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cat, err := catalog.Parse([]byte(strings.Replace(base, c.from, c.to, 1)), func(string) string { return "" })
			if err != nil {
				t.Fatal(err)
			}
			_, err = routes.Compile(cat)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("Compile error = %v, want one containing %s", err, c.want)
			}
		})
	}
}
