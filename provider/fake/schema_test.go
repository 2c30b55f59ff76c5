package fake

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// validate fails t unless instance is valid against schema, formats
// asserted.
func validate(t *testing.T, schema, instance []byte) {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schema))
	if err != nil {
		t.Fatalf("schema %s: %v", schema, err)
	}
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	if err := c.AddResource("schema.json", doc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile("schema.json")
	if err != nil {
		t.Fatalf("compile %s: %v", schema, err)
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(instance))
	if err != nil {
		t.Fatalf("instance %s is not JSON: %v", instance, err)
	}
	if err := sch.Validate(inst); err != nil {
		t.Errorf("instance %s is not valid against %s: %v", instance, schema, err)
	}
}

func TestInstanceOf(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, schema, want string
	}{
		{"empty", `{}`, `{}`},
		{"no schema", ``, `{}`},
		{"true", `true`, `{}`},
		{"object, required only", `{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"integer"}},"required":["b"]}`, `{"b":0}`},
		{"object, all when none required", `{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"boolean"}}}`, `{"a":"fake","b":false}`},
		{"nested", `{"type":"object","properties":{"loc":{"type":"object","properties":{"lat":{"type":"number","minimum":-90},"tags":{"type":"array","items":{"type":"string","enum":["x","y"]}}},"required":["lat","tags"]}},"required":["loc"]}`,
			`{"loc":{"lat":-90,"tags":["x"]}}`},
		{"enum first", `{"type":"string","enum":["celsius","fahrenheit"]}`, `"celsius"`},
		{"const", `{"const":42}`, `42`},
		{"integer minimum", `{"type":"integer","minimum":3,"maximum":9}`, `3`},
		{"integer exclusive minimum", `{"type":"integer","exclusiveMinimum":3}`, `4`},
		{"negative maximum", `{"type":"integer","maximum":-5}`, `-5`},
		{"multiple of", `{"type":"integer","minimum":7,"multipleOf":5}`, `10`},
		{"number", `{"type":"number"}`, `0`},
		{"nullable type list", `{"type":["null","string"]}`, `"fake"`},
		{"null", `{"type":"null"}`, `null`},
		{"string lengths", `{"type":"string","minLength":6}`, `"fakexx"`},
		{"string max length", `{"type":"string","maxLength":2}`, `"fa"`},
		{"formats", `{"type":"object","properties":{"d":{"type":"string","format":"date-time"},"e":{"type":"string","format":"email"},"u":{"type":"string","format":"uuid"},"i":{"type":"string","format":"uri"},"day":{"type":"string","format":"date"}}}`,
			`{"d":"2026-01-01T00:00:00Z","day":"2026-01-01","e":"fake@example.com","i":"https://example.com/fake","u":"00000000-0000-4000-8000-000000000000"}`},
		{"array min items", `{"type":"array","items":{"type":"boolean"},"minItems":3}`, `[false,false,false]`},
		{"array max items zero", `{"type":"array","items":{"type":"boolean"},"maxItems":0}`, `[]`},
		{"prefix items", `{"type":"array","prefixItems":[{"type":"integer"},{"type":"string"}],"minItems":2}`, `[0,"fake"]`},
		{"anyOf", `{"anyOf":[{"type":"null"},{"type":"integer","minimum":1}]}`, `1`},
		{"oneOf", `{"oneOf":[{"type":"string","enum":["a"]},{"type":"integer"}]}`, `"a"`},
		{"allOf", `{"allOf":[{"type":"object","properties":{"a":{"type":"string"}},"required":["a"]},{"properties":{"b":{"type":"integer"}},"required":["b"]}]}`, `{"a":"fake","b":0}`},
		{"ref to defs", `{"type":"object","properties":{"p":{"$ref":"#/$defs/point"}},"required":["p"],"$defs":{"point":{"type":"object","properties":{"x":{"type":"integer"}},"required":["x"]}}}`, `{"p":{"x":0}}`},
		{"recursive ref", `{"$ref":"#/$defs/node","$defs":{"node":{"type":"object","properties":{"children":{"type":"array","items":{"$ref":"#/$defs/node"}}},"required":["children"]}}}`, ``},
		{"no type, properties", `{"properties":{"a":{"type":"integer"}},"required":["a"],"additionalProperties":false}`, `{"a":0}`},
		{"strict OpenAI schema", `{"type":"object","properties":{"city":{"type":"string"},"unit":{"type":["string","null"],"enum":["c","f",null]}},"required":["city","unit"],"additionalProperties":false}`, `{"city":"fake","unit":"c"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := instanceOf(json.RawMessage(tt.schema))
			if tt.want != "" && string(got) != tt.want {
				t.Errorf("instanceOf(%s) = %s, want %s", tt.schema, got, tt.want)
			}
			if again := instanceOf(json.RawMessage(tt.schema)); !bytes.Equal(again, got) {
				t.Errorf("second instance %s differs from the first %s", again, got)
			}
			schema := tt.schema
			if strings.TrimSpace(schema) == "" {
				schema = `{}`
			}
			validate(t, []byte(schema), got)
		})
	}
}

func TestFragments(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want []string
	}{
		{"", nil},
		{"{}", []string{"{}"}},
		{`{"city":"fake"}`, []string{`{"city":`, `"fake"}`}},
		{`{"é":"ééééé"}`, []string{`{"é":"`, `éééé`, `é"}`}},
	}
	for _, tt := range tests {
		got := fragments(tt.in, 8)
		if strings.Join(got, "") != tt.in || len(got) != len(tt.want) {
			t.Errorf("fragments(%q) = %q, want %q", tt.in, got, tt.want)
			continue
		}
		for i := range got {
			if got[i] != tt.want[i] {
				t.Errorf("fragments(%q) = %q, want %q", tt.in, got, tt.want)
				break
			}
		}
	}
}
