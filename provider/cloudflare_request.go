package provider

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Workers AI's text-generation input (developers.cloudflare.com/workers-ai,
// the model schemas): messages of role and content, tools in OpenAI's
// shape, response_format for JSON mode, max_tokens, temperature, top_p,
// seed, frequency_penalty and presence_penalty. It has no tool_choice, no
// stop sequences, no logprobs, no logit_bias, one answer per call, and no
// field for a tool call in the history: Cloudflare's own tool loop
// (@cloudflare/ai-utils runWithTools) writes each call as an assistant
// message whose content is the call's JSON {"name", "arguments"}, and each
// result as a tool message named after the function, which is the
// translation used here.

type workersAIRequest struct {
	Messages       []workersAIMessage `json:"messages"`
	Tools          []workersAITool    `json:"tools,omitempty"`
	ResponseFormat *workersAIFormat   `json:"response_format,omitempty"`
	MaxTokens      int                `json:"max_tokens,omitempty"`
	Temperature    *float64           `json:"temperature,omitempty"`
	TopP           *float64           `json:"top_p,omitempty"`
	TopK           *int               `json:"top_k,omitempty"`
	Seed           *int64             `json:"seed,omitempty"`
	// Penalties take OpenAI's -2..2 on some models and 0..2 on others;
	// the model's own validation answers for its range.
	FrequencyPenalty *float64 `json:"frequency_penalty,omitempty"`
	PresencePenalty  *float64 `json:"presence_penalty,omitempty"`
	Stream           bool     `json:"stream,omitempty"`
}

type workersAIMessage struct {
	Role string `json:"role"`
	// Content is a string, or parts when the message holds an image.
	Content Content `json:"content"`
	// Name, on a tool message, is the function whose result it carries.
	Name string `json:"name,omitempty"`
}

type workersAITool struct {
	Type     string               `json:"type"`
	Function workersAIFunctionDef `json:"function"`
}

// workersAIFunctionDef is FunctionDef with description and parameters
// always present, as Workers AI requires them.
type workersAIFunctionDef struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
}

// workersAIFormat is Workers AI's JSON mode: its json_schema is the schema
// itself, not OpenAI's {name, schema, strict} wrapper.
type workersAIFormat struct {
	Type       string          `json:"type"`
	JSONSchema json.RawMessage `json:"json_schema,omitempty"`
}

// Seeds Workers AI accepts.
const (
	workersAIMinSeed = 1
	workersAIMaxSeed = 9_999_999_999
)

// emptyParameters stands for a function that takes no arguments.
var emptyParameters = json.RawMessage(`{"type":"object","properties":{}}`)

// Check returns an *Unsupported for the first field of c that Workers AI
// cannot carry, or nil. Fields are taken in the order of Chat's JSON:
// messages (each message's name, content parts, refusal, tool calls,
// is_error and cache_control), tools, tool_choice, parallel_tool_calls,
// response_format, then the sampling and control parameters (top_k is
// carried), thinking (unless disabled), cache_control and anthropic_beta,
// then the passthrough fields in key order. What it accepts, Complete
// translates:
//   - developer messages become system messages;
//   - an image part is carried only as a base64 data URL, with no detail
//     but "auto";
//   - an assistant's tool calls become one assistant message each, whose
//     content is {"name": ..., "arguments": {...}}; a refusal in the
//     history becomes the assistant's content; a tool message carries,
//     as name, the function of the call its tool_call_id names;
//   - tool_choice "none" sends no tools; "auto" and parallel tool calls are
//     what Workers AI does anyway;
//   - a json_schema format sends its schema (its name is a label, not
//     sent), json_object as is;
//   - the output limit goes as max_tokens.
//
// Whether a model takes tools, images or JSON mode at all is the
// catalog's to say; the model answers for what it refuses.
func (c *Cloudflare) Check(chat Chat) error {
	_, err := workersAIBody(chat)
	return err
}

func unsupported(field, reason string) *Unsupported {
	return &Unsupported{Field: field, Reason: reason}
}

// workersAIBody translates chat into Workers AI's input, or returns the
// *Unsupported for the first field it cannot carry: the messages, the
// tools, the response format, then the parameters.
func workersAIBody(chat Chat) (*workersAIRequest, error) {
	msgs, err := workersAIMessages(chat.Messages)
	if err != nil {
		return nil, err
	}
	body := &workersAIRequest{Messages: msgs, MaxTokens: chat.OutputLimit()}
	if body.Tools, err = workersAITools(chat); err != nil {
		return nil, err
	}
	if body.ResponseFormat, err = workersAIResponseFormat(chat.ResponseFormat); err != nil {
		return nil, err
	}
	p := chat.Params
	body.Temperature, body.TopP, body.FrequencyPenalty, body.PresencePenalty = p.Temperature, p.TopP, p.FrequencyPenalty, p.PresencePenalty
	body.TopK = p.TopK
	if p.Seed != nil {
		if *p.Seed < workersAIMinSeed || *p.Seed > workersAIMaxSeed {
			return nil, unsupported("seed", "Workers AI takes a seed from 1 to 9999999999")
		}
		body.Seed = p.Seed
	}
	if err := workersAIUnsupported(chat); err != nil {
		return nil, err
	}
	return body, nil
}

// workersAITools translates chat's function tools, none when its tool
// choice is none; Workers AI can neither force a call nor limit the model
// to one.
func workersAITools(chat Chat) ([]workersAITool, error) {
	var tools []workersAITool
	for i, t := range chat.Tools {
		if t.Type != "function" {
			return nil, unsupported(fmt.Sprintf("tools[%d].type", i), "Workers AI takes only function tools")
		}
		if t.CacheControl != nil {
			return nil, unsupported(fmt.Sprintf("tools[%d].cache_control", i), "Workers AI has no cache_control")
		}
		if t.Function.Strict != nil && *t.Function.Strict {
			return nil, unsupported(fmt.Sprintf("tools[%d].function.strict", i), "Workers AI has no strict tool schemas")
		}
		params := t.Function.Parameters
		if !hasJSON(params) {
			params = emptyParameters
		}
		tools = append(tools, workersAITool{Type: "function",
			Function: workersAIFunctionDef{Name: t.Function.Name, Description: t.Function.Description, Parameters: params}})
	}
	if tc := chat.ToolChoice; tc != nil {
		switch {
		case tc.Function != "" || tc.Mode == ToolChoiceRequired:
			return nil, unsupported("tool_choice", "Workers AI cannot force a tool call")
		case tc.Mode == ToolChoiceNone:
			tools = nil
		}
	}
	if p := chat.ParallelToolCalls; p != nil && !*p {
		return nil, unsupported("parallel_tool_calls", "Workers AI cannot limit the model to one tool call")
	}
	return tools, nil
}

// workersAIResponseFormat translates a response format, nil for text.
func workersAIResponseFormat(f *ResponseFormat) (*workersAIFormat, error) {
	if f == nil {
		return nil, nil
	}
	switch f.Type {
	case FormatText, "":
		return nil, nil
	case FormatJSONObject:
		return &workersAIFormat{Type: FormatJSONObject}, nil
	case FormatJSONSchema:
		s := f.JSONSchema
		switch {
		case s != nil && s.Description != "":
			return nil, unsupported("response_format.json_schema.description", "Workers AI takes no description of a JSON schema")
		case s == nil || !hasJSON(s.Schema):
			// A json_schema without a schema asks for any JSON.
			return &workersAIFormat{Type: FormatJSONObject}, nil
		}
		return &workersAIFormat{Type: FormatJSONSchema, JSONSchema: s.Schema}, nil
	}
	return nil, unsupported("response_format.type", "Workers AI has no response format "+f.Type)
}

// workersAIUnsupported refuses the first field of chat Workers AI has no
// counterpart for, in the order of the table, then the first pass-through
// field by name.
func workersAIUnsupported(chat Chat) error {
	p := chat.Params
	for _, f := range []struct {
		asks          bool
		field, reason string
	}{
		{len(p.Stop) > 0, "stop", "Workers AI has no stop sequences"},
		{len(p.LogitBias) > 0, "logit_bias", "Workers AI has no logit_bias"},
		{p.Logprobs != nil && *p.Logprobs, "logprobs", "Workers AI returns no logprobs"},
		{p.TopLogprobs != nil, "top_logprobs", "Workers AI returns no logprobs"},
		{p.N > 1, "n", "Workers AI answers one choice per call"},
		{p.User != "", "user", "Workers AI has no user"},
		{p.SafetyIdentifier != "", "safety_identifier", "Workers AI has no safety_identifier"},
		{p.ReasoningEffort != "", "reasoning_effort", "Workers AI has no reasoning_effort"},
		{p.Verbosity != "", "verbosity", "Workers AI has no verbosity"},
		{chat.Thinking.Asks(), "thinking", "Workers AI has no extended thinking"},
		{chat.CacheControl != nil, "cache_control", "Workers AI has no cache_control"},
		{len(chat.Betas) > 0, "anthropic_beta", "Workers AI has no anthropic-beta"},
	} {
		if f.asks {
			return unsupported(f.field, f.reason)
		}
	}
	if keys := slices.Sorted(maps.Keys(chat.Extra)); len(keys) > 0 {
		return unsupported(keys[0], "Workers AI has no "+keys[0])
	}
	return nil
}

// workersAIMessages translates the history, as Check describes.
func workersAIMessages(in []Message) ([]workersAIMessage, error) {
	out := make([]workersAIMessage, 0, len(in))
	// calls maps a tool call's id to its function, the latest call of an
	// id winning: Workers AI's own ids (see parseWorkersAI) repeat from
	// one answer to the next.
	calls := map[string]string{}
	for i, m := range in {
		at := func(suffix string) string { return fmt.Sprintf("messages[%d]%s", i, suffix) }
		role := m.Role
		if role == "developer" {
			role = "system"
		}
		switch {
		case m.Name != "":
			return nil, unsupported(at(".name"), "Workers AI messages carry no name")
		case m.IsError:
			return nil, unsupported(at(".is_error"), "Workers AI tool messages have no is_error")
		case m.CacheControl != nil:
			return nil, unsupported(at(".cache_control"), "Workers AI has no cache_control")
		}
		content, err := workersAIContent(m.Content, role == "tool", at)
		if err != nil {
			return nil, err
		}
		if m.Refusal != "" {
			if !content.IsZero() {
				return nil, unsupported(at(".refusal"), "Workers AI has no refusal beside an assistant's content")
			}
			content = Text(m.Refusal)
		}
		switch {
		case role == "tool":
			out = append(out, workersAIMessage{Role: role, Content: content, Name: calls[m.ToolCallID]})
		case len(m.ToolCalls) > 0:
			if !content.IsZero() {
				out = append(out, workersAIMessage{Role: role, Content: content})
			}
			for j, tc := range m.ToolCalls {
				if tc.Type != "" && tc.Type != "function" {
					return nil, unsupported(fmt.Sprintf("messages[%d].tool_calls[%d].type", i, j), "Workers AI takes only function calls")
				}
				if tc.CacheControl != nil {
					return nil, unsupported(fmt.Sprintf("messages[%d].tool_calls[%d].cache_control", i, j), "Workers AI has no cache_control")
				}
				calls[tc.ID] = tc.Function.Name
				b, err := marshalNoEscape(struct {
					Name      string          `json:"name"`
					Arguments json.RawMessage `json:"arguments"`
				}{tc.Function.Name, argumentsJSON(tc.Function.Arguments)})
				if err != nil {
					return nil, err
				}
				out = append(out, workersAIMessage{Role: role, Content: Text(string(b))})
			}
		default:
			out = append(out, workersAIMessage{Role: role, Content: content})
		}
	}
	return out, nil
}

// argumentsJSON is a call's arguments as a JSON value: the text itself
// when it is JSON (as a model writes it), {} when empty, else the text as
// a JSON string, so that nothing the model wrote is lost.
func argumentsJSON(args string) json.RawMessage {
	switch {
	case strings.TrimSpace(args) == "":
		return json.RawMessage(`{}`)
	case json.Valid([]byte(args)):
		return compactJSON(json.RawMessage(args))
	}
	b, _ := marshalNoEscape(args) // a string always encodes
	return b
}

// workersAIContent is a message's content for Workers AI: text as a
// string (text parts joined), parts only when an image is among them. A
// tool result is text only.
func workersAIContent(c Content, tool bool, at func(string) string) (Content, error) {
	if c.Parts == nil {
		return c, nil
	}
	images := false
	for j, p := range c.Parts {
		field := fmt.Sprintf(".content[%d]", j)
		if p.CacheControl != nil && p.Type != PartThinking && p.Type != PartRedactedThinking {
			return Content{}, unsupported(at(field+".cache_control"), "Workers AI has no cache_control")
		}
		switch p.Type {
		case PartText:
		case PartImage:
			switch {
			case tool:
				return Content{}, unsupported(at(field), "Workers AI tool results are text only")
			case p.ImageURL == nil || !strings.HasPrefix(p.ImageURL.URL, "data:"):
				return Content{}, unsupported(at(field+".image_url"), "Workers AI takes images only as base64 data URLs")
			case p.ImageURL.Detail != "" && p.ImageURL.Detail != "auto":
				return Content{}, unsupported(at(field+".image_url.detail"), "Workers AI has no image detail")
			}
			images = true
		default:
			return Content{}, unsupported(at(field+".type"), "Workers AI has no content part "+p.Type)
		}
	}
	if !images {
		return Text(c.String()), nil
	}
	parts := make([]Part, len(c.Parts))
	for j, p := range c.Parts {
		parts[j] = Part{Type: p.Type, Text: p.Text}
		if p.ImageURL != nil {
			parts[j].ImageURL = &ImageURL{URL: p.ImageURL.URL}
		}
	}
	return Content{Parts: parts}, nil
}
