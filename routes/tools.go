package routes

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/tollgate/tollgate/catalog"
	"github.com/tollgate/tollgate/provider"
	"github.com/tollgate/tollgate/tasks"
)

// MaxTools bounds a route's tools, as a request's are bounded.
const MaxTools = tasks.MaxTools

// reasoningEfforts are the levels every provider kind that reasons can
// carry.
var reasoningEfforts = map[string]bool{"minimal": true, "low": true, "medium": true, "high": true}

// chat holds what a route fixes of the model call besides its messages:
// tools, tool choice, structured output and sampling. It is compiled once
// and copied into every call's request.
type chat struct {
	Tools             []provider.Tool
	ToolChoice        *provider.ToolChoice
	ParallelToolCalls *bool
	ResponseFormat    *provider.ResponseFormat
	Params            provider.Params
	// Reasoning: the route's model is a reasoning model, so the output
	// limit goes as max_completion_tokens.
	Reasoning bool
}

// compileChat validates the route's tools, tool choice and sampling, and
// decides its response_format. Its error names the field.
func compileChat(chain []catalog.Model, rc catalog.RouteConfig, outputSchema map[string]any) (chat, error) {
	m := chain[0]
	c := chat{ParallelToolCalls: rc.ParallelToolCalls, Reasoning: m.Reasoning}
	var err error
	if c.Tools, err = compileTools(rc.Tools); err != nil {
		return chat{}, err
	}
	if rc.ParallelToolCalls != nil && len(c.Tools) == 0 {
		return chat{}, errors.New("parallel_tool_calls: the route has no tools")
	}
	if c.ToolChoice, err = compileToolChoice(rc.ToolChoice, c.Tools); err != nil {
		return chat{}, err
	}
	if len(c.Tools) > 0 && !capable(chain, provider.Chat{Tools: c.Tools}) {
		return chat{}, fmt.Errorf("tools: neither the model %q nor its fallbacks declare the tools capability", m.Name)
	}
	if c.Params, err = compileParams(chain, rc); err != nil {
		return chat{}, err
	}
	// A JSON route whose model takes a schema asks for output valid
	// against the route's own schema, the one the output guard checks;
	// providers take only an object at the root. Otherwise the task's
	// JSON mode applies (tasks.Request.JSONMode).
	if outputSchema != nil && m.JSONSchema && outputSchema["type"] == "object" {
		raw, err := schemaJSON(outputSchema)
		if err != nil {
			return chat{}, fmt.Errorf("output.schema: %w", err)
		}
		c.ResponseFormat = &provider.ResponseFormat{Type: provider.FormatJSONSchema,
			JSONSchema: &provider.JSONSchema{Name: rc.Name, Schema: raw}}
	}
	return c, nil
}

// compileTools validates the route's function tools: unique names, a
// bounded description, and parameters that are an object schema.
func compileTools(tools []catalog.RouteTool) ([]provider.Tool, error) {
	if len(tools) > MaxTools {
		return nil, fmt.Errorf("tools: at most %d", MaxTools)
	}
	var out []provider.Tool
	names := map[string]bool{}
	for i, t := range tools {
		where := fmt.Sprintf("tools[%d]", i)
		switch {
		case !tasks.ValidToolName(t.Name):
			return nil, fmt.Errorf("%s.name: must be 1-64 letters, digits, '_' or '-'", where)
		case names[t.Name]:
			return nil, fmt.Errorf("%s.name: duplicate %q", where, t.Name)
		case len(t.Description) > 4096:
			return nil, fmt.Errorf("%s.description: at most 4096 characters", where)
		}
		names[t.Name] = true
		def := provider.FunctionDef{Name: t.Name, Description: t.Description, Strict: t.Strict}
		if t.Parameters != nil {
			raw, err := schemaJSON(t.Parameters)
			if err != nil {
				return nil, fmt.Errorf("%s.parameters: %w", where, err)
			}
			if t.Parameters["type"] != "object" {
				return nil, fmt.Errorf(`%s.parameters: must be an object schema (type: object)`, where)
			}
			def.Parameters = raw
		}
		out = append(out, provider.Tool{Type: "function", Function: def})
	}
	return out, nil
}

// compileToolChoice reads the route's tool_choice, nil without one: a
// mode, or one of tools by name.
func compileToolChoice(choice any, tools []provider.Tool) (*provider.ToolChoice, error) {
	if choice == nil {
		return nil, nil
	}
	raw, err := json.Marshal(choice)
	if err != nil {
		return nil, fmt.Errorf("tool_choice: %w", err)
	}
	var tc provider.ToolChoice
	if err := json.Unmarshal(raw, &tc); err != nil {
		return nil, fmt.Errorf("tool_choice: %w", err)
	}
	named := slices.ContainsFunc(tools, func(t provider.Tool) bool { return t.Function.Name == tc.Function })
	switch {
	case tc.Function != "" && !named:
		return nil, fmt.Errorf("tool_choice: %q is not one of the route's tools", tc.Function)
	case tc.Function == "" && !tasks.ValidToolChoiceMode(tc.Mode):
		return nil, errors.New(`tool_choice: must be "none", "auto", "required" or {type: function, function: {name: ...}}`)
	case len(tools) == 0:
		return nil, errors.New("tool_choice: the route has no tools")
	}
	return &tc, nil
}

// compileParams validates the sampling the route fixes; a reasoning
// effort needs a reasoning model in the chain.
func compileParams(chain []catalog.Model, rc catalog.RouteConfig) (provider.Params, error) {
	switch {
	case rc.Temperature != nil && (*rc.Temperature < 0 || *rc.Temperature > 2):
		return provider.Params{}, errors.New("temperature: must be 0-2")
	case rc.TopP != nil && (*rc.TopP < 0 || *rc.TopP > 1):
		return provider.Params{}, errors.New("top_p: must be 0-1")
	case len(rc.Stop) > 4:
		return provider.Params{}, errors.New("stop: at most 4 sequences")
	case rc.ReasoningEffort != "" && !reasoningEfforts[rc.ReasoningEffort]:
		return provider.Params{}, errors.New("reasoning_effort: must be minimal, low, medium or high")
	case rc.ReasoningEffort != "" && !capable(chain, provider.Chat{Params: provider.Params{ReasoningEffort: rc.ReasoningEffort}}):
		return provider.Params{}, fmt.Errorf("reasoning_effort: neither the model %q nor its fallbacks are reasoning models", chain[0].Name)
	}
	if i := slices.Index(rc.Stop, ""); i >= 0 {
		return provider.Params{}, fmt.Errorf("stop[%d]: must not be empty", i)
	}
	p := provider.Params{Temperature: rc.Temperature, TopP: rc.TopP, Seed: rc.Seed, ReasoningEffort: rc.ReasoningEffort}
	if rc.Stop != nil {
		p.Stop = provider.Stop(rc.Stop)
	}
	return p, nil
}

// capable reports whether a model of the chain can take c, as admission
// decides: a route no call of which could be admitted is refused at load.
func capable(chain []catalog.Model, c provider.Chat) bool {
	for _, m := range chain {
		if missing, _ := m.Missing(c); missing == "" {
			return true
		}
	}
	return false
}

// schemaJSON checks that v is a valid JSON Schema (draft 2020-12, no
// references outside itself) and returns it as canonical JSON.
func schemaJSON(v map[string]any) (json.RawMessage, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, errors.New("not representable as JSON")
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(noLoader{})
	const loc = "urn:tollgate:route-schema"
	if err := c.AddResource(loc, doc); err != nil {
		return nil, fmt.Errorf("not a valid JSON Schema: %w", err)
	}
	if _, err := c.Compile(loc); err != nil {
		return nil, fmt.Errorf("not a valid JSON Schema: %w", err)
	}
	return provider.CanonicalJSON(raw)
}

// noLoader refuses every external reference: a route's schema must be
// whole, and loading one must read no file and make no request.
type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("external reference %q: a route's schemas must be self-contained", url)
}
