package routes_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tollgate/tollgate/catalog"
	"github.com/tollgate/tollgate/routes"
)

const promptCatalog = `
providers: [{key: p, kind: openai, base_url: fake}]
models: [{name: m, provider: p}]
routes:
  - name: r
    prompt_version: "1"
    system_prompt: "s"
    user_template: "{{ s }}|{{n}}|{{i}}|{{b}}|{{opt}}"
    input:
      - {name: s, type: string, trim: true, min_length: 2, max_length: 5}
      - {name: n, type: number, min: 0, max: 1}
      - {name: i, type: integer, max: 10}
      - {name: b, type: boolean}
      - {name: opt, type: string, required: false}
    model: m
    max_tokens: 10
    deadline_ms: 1000
    output: {type: text, max_length: 100}
    fallback: "x"
    on_failure: fallback
`

// Prompt checks each field by its type, collects every problem, and
// renders only what passed.
func TestPromptValidatesInput(t *testing.T) {
	t.Parallel()
	cat, err := catalog.Parse([]byte(promptCatalog), func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	rs, err := routes.Compile(cat)
	if err != nil {
		t.Fatal(err)
	}
	r := rs["r"]
	good := func(change map[string]any) map[string]any {
		in := map[string]any{"s": "  abc ", "n": 0.5, "i": 3, "b": true}
		for k, v := range change {
			if v == nil {
				delete(in, k)
			} else {
				in[k] = v
			}
		}
		return in
	}
	cases := []struct {
		name  string
		input map[string]any
		user  string
		want  []routes.FieldError
	}{
		{"all good", good(nil), "abc|0.5|3|true|", nil},
		{"optional given", good(map[string]any{"opt": "o"}), "abc|0.5|3|true|o", nil},
		{"optional null", map[string]any{"s": "abc", "n": 0.5, "i": 3, "b": true, "opt": nil}, "abc|0.5|3|true|", nil},
		{"required missing", good(map[string]any{"s": nil}), "", []routes.FieldError{{Field: "input.s", Message: "is required"}}},
		{"string of another type", good(map[string]any{"s": 1}), "", []routes.FieldError{{Field: "input.s", Message: "must be a string"}}},
		{"string too short once trimmed", good(map[string]any{"s": " a  "}), "", []routes.FieldError{{Field: "input.s", Message: "must be 2-5 characters"}}},
		{"string too long", good(map[string]any{"s": "abcdef"}), "", []routes.FieldError{{Field: "input.s", Message: "must be 2-5 characters"}}},
		{"number of another type", good(map[string]any{"n": "1"}), "", []routes.FieldError{{Field: "input.n", Message: "must be a number"}}},
		{"number out of range", good(map[string]any{"n": 1.5}), "", []routes.FieldError{{Field: "input.n", Message: "is out of range"}}},
		{"integer with a fraction", good(map[string]any{"i": 2.5}), "", []routes.FieldError{{Field: "input.i", Message: "must be a integer"}}},
		{"integer out of range", good(map[string]any{"i": 11}), "", []routes.FieldError{{Field: "input.i", Message: "is out of range"}}},
		{"boolean of another type", good(map[string]any{"b": "yes"}), "", []routes.FieldError{{Field: "input.b", Message: "must be a boolean"}}},
		{"unknown field", good(map[string]any{"zz": 1}), "", []routes.FieldError{{Field: "input.zz", Message: "is not a field of this route"}}},
		{"every problem at once", map[string]any{"s": 1, "n": 2.0, "b": 0}, "", []routes.FieldError{
			{Field: "input.s", Message: "must be a string"}, {Field: "input.n", Message: "is out of range"},
			{Field: "input.i", Message: "is required"}, {Field: "input.b", Message: "must be a boolean"}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			system, user, _, err := r.Prompt(c.input)
			var got []routes.FieldError
			if ie, ok := err.(*routes.InputError); ok {
				got = ie.Fields
			} else if err != nil {
				t.Fatalf("error = %v, want an *InputError", err)
			}
			if diff := cmp.Diff(c.want, got); diff != "" {
				t.Errorf("fields mismatch (-want +got):\n%s", diff)
			}
			if c.want == nil && (system != "s" || user != c.user) {
				t.Errorf("prompt = %q, %q; want %q, %q", system, user, "s", c.user)
			}
			if c.want != nil && !strings.Contains(err.Error(), "invalid input") {
				t.Errorf("error = %v", err)
			}
		})
	}
}
