package fake

import (
	"encoding/json"
	"math"
	"slices"
	"strings"
)

// Recursive schemas ($ref cycles) end because, below softDepth, objects
// keep their required properties only and arrays their minimum number of
// items; below hardDepth (a cycle of required objects, which no finite
// instance satisfies) the smallest value of the type is returned.
const (
	softDepth = 12
	hardDepth = 64
)

// instanceOf returns a JSON value valid against schema, the same for the
// same schema every time, so that tests can predict tool arguments and
// structured outputs. An empty or unreadable schema gives {}: tool
// parameters default to an empty object.
func instanceOf(schema json.RawMessage) json.RawMessage {
	var root any
	if len(schema) == 0 || json.Unmarshal(schema, &root) != nil {
		return json.RawMessage(`{}`)
	}
	g := generator{root: root}
	v := g.value(root, 0)
	if v == nil {
		if m, ok := root.(map[string]any); ok && len(m) == 0 {
			v = map[string]any{}
		}
	}
	out, _ := json.Marshal(v) // cannot fail: values decoded from JSON
	return out
}

type generator struct{ root any }

// value generates an instance of s; nil stands for JSON null.
func (g generator) value(s any, depth int) any {
	m, ok := s.(map[string]any)
	if !ok { // true, false, or not a schema at all
		return map[string]any{}
	}
	if depth > hardDepth {
		return shallow(m)
	}
	if ref, ok := m["$ref"].(string); ok {
		if target, ok := g.resolve(ref); ok {
			return g.value(target, depth+1)
		}
	}
	if c, ok := m["const"]; ok {
		return c
	}
	if e, ok := m["enum"].([]any); ok && len(e) > 0 {
		return e[0]
	}
	for _, k := range []string{"anyOf", "oneOf"} {
		if alts, ok := m[k].([]any); ok && len(alts) > 0 {
			return g.value(firstNonNull(alts), depth+1)
		}
	}
	if all, ok := m["allOf"].([]any); ok && len(all) > 0 {
		return g.value(merge(m, all), depth+1)
	}
	switch typeOf(m) {
	case "object":
		return g.object(m, depth)
	case "array":
		return g.array(m, depth)
	case "string":
		return str(m)
	case "integer":
		return integer(m)
	case "number":
		return number(m)
	case "boolean":
		return false
	case "null":
		return nil
	}
	return map[string]any{}
}

// object fills the required properties, or every property when none is
// listed as required.
func (g generator) object(m map[string]any, depth int) any {
	props, _ := m["properties"].(map[string]any)
	out := map[string]any{}
	var names []string
	if req, ok := m["required"].([]any); ok {
		for _, r := range req {
			if n, ok := r.(string); ok {
				names = append(names, n)
			}
		}
	} else if depth <= softDepth {
		for n := range props {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	for _, n := range names {
		out[n] = g.value(props[n], depth+1) // a required name without a schema gets {}
	}
	return out
}

func (g generator) array(m map[string]any, depth int) any {
	n := 1
	if depth > softDepth {
		n = 0
	}
	if v, ok := num(m["minItems"]); ok && (int(v) > n || depth > softDepth) {
		n = int(v)
	}
	if v, ok := num(m["maxItems"]); ok && int(v) < n {
		n = int(v)
	}
	out := make([]any, 0, n)
	prefix, _ := m["prefixItems"].([]any)
	for i := range n {
		switch {
		case i < len(prefix):
			out = append(out, g.value(prefix[i], depth+1))
		case m["items"] != nil:
			out = append(out, g.value(m["items"], depth+1))
		default:
			out = append(out, "fake")
		}
	}
	return out
}

func str(m map[string]any) string {
	s := "fake"
	switch m["format"] {
	case "date-time":
		s = "2026-01-01T00:00:00Z"
	case "date":
		s = "2026-01-01"
	case "time":
		s = "00:00:00Z"
	case "email":
		s = "fake@example.com"
	case "uri", "url":
		s = "https://example.com/fake"
	case "uuid":
		s = "00000000-0000-4000-8000-000000000000"
	case "ipv4":
		s = "192.0.2.1"
	}
	if v, ok := num(m["minLength"]); ok && len(s) < int(v) {
		s += strings.Repeat("x", int(v)-len(s))
	}
	if v, ok := num(m["maxLength"]); ok && len(s) > int(v) {
		s = s[:int(v)]
	}
	return s
}

func integer(m map[string]any) any {
	lo, hi := bounds(m, 1)
	v := 0.0
	switch {
	case !math.IsInf(lo, -1):
		v = math.Ceil(lo)
	case hi < 0:
		v = math.Floor(hi)
	}
	if step, ok := num(m["multipleOf"]); ok && step > 0 {
		v = math.Ceil(v/step) * step
	}
	return int64(v)
}

func number(m map[string]any) any {
	lo, hi := bounds(m, 1)
	v := 0.0
	switch {
	case !math.IsInf(lo, -1):
		v = lo
	case hi < 0:
		v = hi
	}
	if step, ok := num(m["multipleOf"]); ok && step > 0 {
		v = math.Ceil(v/step) * step
	}
	return v
}

// bounds returns the inclusive range of a numeric schema; an exclusive
// bound is moved inwards by gap.
func bounds(m map[string]any, gap float64) (lo, hi float64) {
	lo, hi = math.Inf(-1), math.Inf(1)
	if v, ok := num(m["minimum"]); ok {
		lo = v
	}
	if v, ok := num(m["exclusiveMinimum"]); ok {
		lo = max(lo, v+gap)
	}
	if v, ok := num(m["maximum"]); ok {
		hi = v
	}
	if v, ok := num(m["exclusiveMaximum"]); ok {
		hi = min(hi, v-gap)
	}
	return lo, hi
}

func num(v any) (float64, bool) {
	f, ok := v.(float64)
	return f, ok
}

// typeOf reads "type", a name or a list (the first that is not "null"), and
// guesses from the keywords when it is absent.
func typeOf(m map[string]any) string {
	switch t := m["type"].(type) {
	case string:
		return t
	case []any:
		var first string
		for _, x := range t {
			if s, ok := x.(string); ok {
				if first == "" {
					first = s
				}
				if s != "null" {
					return s
				}
			}
		}
		return first
	}
	switch {
	case m["properties"] != nil || m["required"] != nil:
		return "object"
	case m["items"] != nil || m["prefixItems"] != nil:
		return "array"
	}
	return ""
}

func firstNonNull(alts []any) any {
	for _, a := range alts {
		if m, ok := a.(map[string]any); !ok || m["type"] != "null" {
			return a
		}
	}
	return alts[0]
}

// merge folds allOf into one schema: properties and required lists are
// united, other keywords of later members win.
func merge(m map[string]any, all []any) map[string]any {
	out := map[string]any{}
	props := map[string]any{}
	var req []any
	for _, s := range append([]any{m}, all...) {
		sm, ok := s.(map[string]any)
		if !ok {
			continue
		}
		for k, v := range sm {
			switch k {
			case "allOf":
			case "properties":
				if p, ok := v.(map[string]any); ok {
					for n, ps := range p {
						props[n] = ps
					}
				}
			case "required":
				if r, ok := v.([]any); ok {
					req = append(req, r...)
				}
			default:
				out[k] = v
			}
		}
	}
	if len(props) > 0 {
		out["properties"] = props
	}
	if req != nil {
		out["required"] = req
	}
	return out
}

// shallow is the smallest instance of m's type, for schemas nested too
// deep.
func shallow(m map[string]any) any {
	switch typeOf(m) {
	case "array":
		return []any{}
	case "string":
		return str(m)
	case "integer":
		return integer(m)
	case "number":
		return number(m)
	case "boolean":
		return false
	case "null":
		return nil
	}
	return map[string]any{}
}

// resolve follows a local JSON pointer ("#", "#/$defs/x",
// "#/definitions/x"); remote references are not followed.
func (g generator) resolve(ref string) (any, bool) {
	if !strings.HasPrefix(ref, "#") {
		return nil, false
	}
	cur := g.root
	for _, tok := range strings.Split(strings.TrimPrefix(ref[1:], "/"), "/") {
		if tok == "" {
			continue
		}
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = m[tok]; !ok {
			return nil, false
		}
	}
	return cur, true
}
