package routes

import (
	"encoding/json"
	"slices"
)

// Summary is what a client needs to know of a route to call it: its
// prompt version, the JSON Schema its input must meet, what it answers,
// and what happens when its model fails.
type Summary struct {
	Name          string `json:"name"`
	PromptVersion string `json:"prompt_version"`
	Model         string `json:"model"`
	// FallbackModels are the models tried after Model, in order.
	FallbackModels []string       `json:"fallback_models"`
	InputSchema    map[string]any `json:"input_schema"`
	Output         OutputSummary  `json:"output"`
	// OnFailure is "fallback" (Fallback is answered, same shape) or
	// "error".
	OnFailure string   `json:"on_failure"`
	Fallback  any      `json:"fallback"`
	Tools     []string `json:"tools"`
}

// OutputSummary is a route's output contract: text, or JSON valid
// against Schema.
type OutputSummary struct {
	Type      string          `json:"type"`
	MaxLength int             `json:"max_length,omitempty"`
	Schema    json.RawMessage `json:"schema,omitempty"`
}

// List describes every route, by name.
func (s *Service) List() []Summary {
	out := make([]Summary, 0, len(s.routes))
	for _, r := range s.routes {
		out = append(out, s.summary(r))
	}
	slices.SortFunc(out, func(a, b Summary) int {
		switch {
		case a.Name < b.Name:
			return -1
		case a.Name > b.Name:
			return 1
		}
		return 0
	})
	return out
}

func (s *Service) summary(r *Route) Summary {
	sum := Summary{Name: r.Name, PromptVersion: r.PromptVersion, Model: r.Model, FallbackModels: []string{},
		InputSchema: r.inputSchema(), OnFailure: r.OnFailure, Fallback: r.Fallback, Tools: []string{},
		Output: OutputSummary{Type: "text", MaxLength: r.MaxLength}}
	if r.OutputJSON {
		sum.Output.Type = "json"
		if raw, err := json.Marshal(r.schema); err == nil {
			sum.Output.Schema = raw
		}
	}
	if m, _, err := s.catalog.Resolve(r.Model); err == nil {
		for _, f := range s.catalog.Chain(m)[1:] {
			sum.FallbackModels = append(sum.FallbackModels, f.Name)
		}
	}
	for _, t := range r.chat.Tools {
		sum.Tools = append(sum.Tools, t.Function.Name)
	}
	return sum
}

// inputSchema is the route's input fields as the JSON Schema Prompt
// enforces: an object of those fields and no other.
func (r *Route) inputSchema() map[string]any {
	props := map[string]any{}
	required := []string{}
	for _, f := range r.Input {
		p := map[string]any{"type": f.Type}
		switch f.Type {
		case "string":
			if f.MinLength > 0 {
				p["minLength"] = f.MinLength
			}
			if f.MaxLength > 0 {
				p["maxLength"] = f.MaxLength
			}
		case "integer", "number":
			if f.Min != nil {
				p["minimum"] = *f.Min
			}
			if f.Max != nil {
				p["maximum"] = *f.Max
			}
		}
		props[f.Name] = p
		if f.Required == nil || *f.Required {
			required = append(required, f.Name)
		}
	}
	return map[string]any{"type": "object", "properties": props, "required": required, "additionalProperties": false}
}
