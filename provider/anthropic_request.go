package provider

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/tollgate/tollgate/internal/anthropicwire"
)

// The Messages API request, and its translation from Chat. Every field of
// Chat is carried, translated, or refused by name with an *Unsupported;
// anthropicBody is the one place that decides, so Check and Complete cannot
// disagree.

// Thinking budgets for reasoning_effort. Anthropic's extended thinking
// takes a token budget, not a level; these figures follow its guidance
// (1024 is the smallest budget it accepts, a few thousand suit ordinary
// reasoning, tens of thousands the hardest problems). The budget is part
// of max_tokens, which must exceed it.
var anthropicThinkingBudgets = map[string]int{
	"minimal": 1024,
	"low":     2048,
	"medium":  8192,
	"high":    24576,
}

func anthropicRefuses(field, reason string) *Unsupported {
	return &Unsupported{Field: field, Reason: reason}
}

// Check returns an *Unsupported naming the first field of c that the
// Messages API cannot carry, or nil; see anthropicBody for the order and
// the translations. It makes no call.
func (c *Anthropic) Check(chat Chat) error {
	if _, u := anthropicBody(chat); u != nil {
		return u
	}
	return nil
}

var _ Checker = (*Anthropic)(nil)

// anthropicBody translates c into a Messages API request, or names the
// first field it cannot carry. Fields are judged in this order:
//
//   - n above 1, logit_bias, logprobs (true), top_logprobs, seed,
//     presence_penalty and frequency_penalty (non-zero), verbosity, and any
//     passthrough field (by its key, in key order): the Messages API has no
//     equivalent. A value that asks for nothing (n 1, logprobs false, a zero
//     penalty) is what Anthropic does anyway, and is accepted.
//   - user and safety_identifier become metadata.user_id, Anthropic's
//     opaque end-user identifier; both set and different cannot be carried
//     (safety_identifier is refused).
//   - temperature is carried when it is within Anthropic's 0 to 1; top_p is
//     carried; stop becomes stop_sequences.
//   - top_k, thinking and cache_control (Anthropic's own) are carried as
//     they are; thinking beside a reasoning_effort other than none is
//     refused (reasoning_effort: two ways of asking the same thing).
//   - reasoning_effort becomes extended thinking, {"type": "enabled",
//     "budget_tokens": N} with N from anthropicThinkingBudgets ("none" is
//     no thinking, as Anthropic's default). The output limit must exceed the
//     budget (refused otherwise: raising the limit would spend budget
//     nobody set, shrinking the budget would not be the effort asked).
//     Thinking excludes a temperature other than 1, a top_p below 0.95 and
//     a forced tool choice (Anthropic refuses them), and an open tool loop
//     whose calling turn carries no thinking block: Anthropic then wants
//     the thinking blocks of the turn that called the tools.
//   - response_format json_schema becomes output_config.format, Anthropic's
//     structured output, which always constrains the output (strict or
//     not); the schema's name is a label the output does not depend on and
//     is not sent, a description is refused (Anthropic's format has none).
//     json_object is refused: Anthropic has no JSON mode without a schema,
//     and structured output will not take an open object schema. text is
//     the default.
//   - tools become Anthropic tools (input_schema, strict); a function
//     without parameters takes an empty object schema. tool_choice none,
//     auto, required and a named function become none, auto, any and tool;
//     parallel_tool_calls false becomes disable_parallel_tool_use. Without
//     tools, tool_choice none or auto and parallel_tool_calls ask nothing
//     and are not sent; required or a named function are refused.
//   - messages: system and developer messages become the system blocks, in
//     order (Anthropic has one system prompt: a later one applies to the
//     whole conversation); consecutive tool messages become one user
//     message of tool_result blocks; an assistant's tool calls become
//     tool_use blocks whose input is the arguments object, and its refusal a
//     text block; image parts become image blocks, base64 from a data URL
//     or by URL; thinking and redacted_thinking parts of an assistant
//     message become those blocks, in their place, signature and data
//     unchanged; a tool message's is_error and cache_control go on its
//     tool_result block, every other cache_control on its block or tool.
//     A user message of parts that follows tool messages joins their
//     turn, after the results, as Anthropic sends text beside tool
//     results. A message name, a detail other than auto, an image outside
//     a user or tool message, thinking outside an assistant message are
//     refused.
func anthropicBody(c Chat) (anthropicwire.Request, *Unsupported) {
	limit := c.OutputLimit()
	body := anthropicwire.Request{Model: c.Model, MaxTokens: &limit, Messages: []anthropicwire.Message{}}
	if u := anthropicParams(c, &body); u != nil {
		return body, u
	}
	if u := anthropicThinkingFor(c, &body); u != nil {
		return body, u
	}
	if u := anthropicFormat(c, &body); u != nil {
		return body, u
	}
	if u := anthropicTools(c, &body); u != nil {
		return body, u
	}
	if u := anthropicMessages(c.Messages, &body); u != nil {
		return body, u
	}
	return body, nil
}

// anthropicParams carries c's sampling and end user into body, or refuses
// the first parameter Anthropic has no counterpart for.
func anthropicParams(c Chat, body *anthropicwire.Request) *Unsupported {
	if u := anthropicLacks(c); u != nil {
		return u
	}
	switch {
	case c.User != "" && c.SafetyIdentifier != "" && c.User != c.SafetyIdentifier:
		return anthropicRefuses("safety_identifier", "Anthropic's metadata.user_id holds one end-user identifier, and user already sets it")
	case c.SafetyIdentifier != "":
		body.Metadata = &anthropicwire.Metadata{UserID: c.SafetyIdentifier}
	case c.User != "":
		body.Metadata = &anthropicwire.Metadata{UserID: c.User}
	}
	if t := c.Temperature; t != nil && (*t < 0 || *t > 1) {
		return anthropicRefuses("temperature", "Anthropic's temperature ranges from 0 to 1")
	}
	body.Temperature, body.TopP, body.TopK, body.CacheControl = c.Temperature, c.TopP, c.TopK, c.CacheControl
	if len(c.Stop) > 0 {
		body.StopSequences = c.Stop
	}
	return nil
}

// anthropicLacks refuses the first parameter of c the Messages API has
// no field for, in the order of the table, then the first pass-through
// field by name.
func anthropicLacks(c Chat) *Unsupported {
	for _, f := range []struct {
		asks          bool
		field, reason string
	}{
		{c.N > 1, "n", "Anthropic's Messages API answers one choice per call"},
		{len(c.LogitBias) > 0, "logit_bias", "Anthropic's Messages API has no logit_bias"},
		{c.Logprobs != nil && *c.Logprobs, "logprobs", "Anthropic's Messages API has no logprobs"},
		{c.TopLogprobs != nil, "top_logprobs", "Anthropic's Messages API has no logprobs"},
		{c.Seed != nil, "seed", "Anthropic's Messages API has no seed"},
		{c.PresencePenalty != nil && *c.PresencePenalty != 0, "presence_penalty", "Anthropic's Messages API has no presence_penalty"},
		{c.FrequencyPenalty != nil && *c.FrequencyPenalty != 0, "frequency_penalty", "Anthropic's Messages API has no frequency_penalty"},
		{c.Verbosity != "", "verbosity", "Anthropic's Messages API has no verbosity"},
	} {
		if f.asks {
			return anthropicRefuses(f.field, f.reason)
		}
	}
	if keys := slices.Sorted(maps.Keys(c.Extra)); len(keys) > 0 {
		return anthropicRefuses(keys[0], "Anthropic's Messages API has no "+keys[0])
	}
	return nil
}

func anthropicThinkingFor(c Chat, body *anthropicwire.Request) *Unsupported {
	if c.ReasoningEffort == "" || c.ReasoningEffort == "none" {
		if t := c.Thinking; t != nil {
			thinking := *t
			body.Thinking = &thinking
		}
		return nil
	}
	if c.Thinking != nil {
		return anthropicRefuses("reasoning_effort", "Anthropic's thinking is already set by thinking; send one of the two")
	}
	budget, ok := anthropicThinkingBudgets[c.ReasoningEffort]
	if !ok {
		return anthropicRefuses("reasoning_effort", "Anthropic's thinking takes minimal, low, medium or high")
	}
	if limit := c.OutputLimit(); limit > 0 && limit <= budget {
		return anthropicRefuses("reasoning_effort", fmt.Sprintf(
			"Anthropic's thinking for reasoning_effort %s takes a %d-token budget, and the output limit (%d) must exceed it",
			c.ReasoningEffort, budget, limit))
	}
	switch {
	case c.Temperature != nil && *c.Temperature != 1:
		return anthropicRefuses("temperature", "Anthropic's thinking (reasoning_effort) allows no temperature other than 1")
	case c.TopP != nil && *c.TopP < 0.95:
		return anthropicRefuses("top_p", "Anthropic's thinking (reasoning_effort) allows no top_p below 0.95")
	case c.ToolChoice != nil && (c.ToolChoice.Function != "" || c.ToolChoice.Mode == ToolChoiceRequired):
		return anthropicRefuses("tool_choice", "Anthropic's thinking (reasoning_effort) cannot be combined with a forced tool choice")
	case openToolLoop(c.Messages):
		return anthropicRefuses("reasoning_effort", "Anthropic's thinking needs the thinking blocks of the turn that called the tools, and that turn carries none")
	}
	body.Thinking = &anthropicwire.Thinking{Type: ThinkingEnabled, BudgetTokens: budget}
	return nil
}

// openToolLoop reports whether the conversation ends in a tool loop whose
// calling turn carries no thinking block: an assistant turn with tool
// calls, followed only by tool results.
func openToolLoop(msgs []Message) bool {
	for i := len(msgs) - 1; i >= 0; i-- {
		switch msgs[i].Role {
		case "tool":
			continue
		case "assistant":
			return len(msgs[i].ToolCalls) > 0 && !hasThinking(msgs[i].Content)
		}
		return false
	}
	return false
}

// hasThinking reports whether c holds a thinking or redacted thinking part.
func hasThinking(c Content) bool {
	for _, p := range c.Parts {
		if p.Type == PartThinking || p.Type == PartRedactedThinking {
			return true
		}
	}
	return false
}

func anthropicFormat(c Chat, body *anthropicwire.Request) *Unsupported {
	f := c.ResponseFormat
	if f == nil {
		return nil
	}
	switch f.Type {
	case "", FormatText:
		return nil
	case FormatJSONObject:
		return anthropicRefuses("response_format", "Anthropic's Messages API has no JSON mode without a schema; use json_schema")
	case FormatJSONSchema:
		if f.JSONSchema == nil || !hasJSON(f.JSONSchema.Schema) {
			return anthropicRefuses("response_format.json_schema.schema", "Anthropic's structured output needs a schema")
		}
		if f.JSONSchema.Description != "" {
			return anthropicRefuses("response_format.json_schema.description", "Anthropic's structured output has no description")
		}
		body.OutputConfig = &anthropicwire.OutputConfig{Format: &anthropicwire.OutputFormat{Type: "json_schema", Schema: f.JSONSchema.Schema}}
		return nil
	}
	return anthropicRefuses("response_format.type", "Anthropic's Messages API has no response format "+strconv.Quote(f.Type))
}

func anthropicTools(c Chat, body *anthropicwire.Request) *Unsupported {
	for i, t := range c.Tools {
		if t.Type != "function" {
			return anthropicRefuses(fmt.Sprintf("tools[%d].type", i), "Anthropic's Messages API takes function tools only")
		}
		schema := t.Function.Parameters
		if !hasJSON(schema) {
			schema = json.RawMessage(`{"type":"object","properties":{}}`)
		}
		body.Tools = append(body.Tools, anthropicwire.Tool{
			Name: t.Function.Name, Description: t.Function.Description, InputSchema: schema, Strict: t.Function.Strict,
			CacheControl: t.CacheControl,
		})
	}
	noParallel := c.ParallelToolCalls != nil && !*c.ParallelToolCalls
	tc := c.ToolChoice
	if len(c.Tools) == 0 {
		if tc != nil && (tc.Function != "" || tc.Mode == ToolChoiceRequired) {
			return anthropicRefuses("tool_choice", "Anthropic's Messages API cannot force a tool call without tools")
		}
		return nil
	}
	var choice anthropicwire.ToolChoice
	switch {
	case tc == nil || (tc.Mode == ToolChoiceAuto && tc.Function == ""):
		choice.Type = "auto"
	case tc.Function != "":
		choice.Type, choice.Name = "tool", tc.Function
	case tc.Mode == ToolChoiceRequired:
		choice.Type = "any"
	case tc.Mode == ToolChoiceNone:
		// No tool will be called: there is nothing to run in parallel.
		body.ToolChoice = &anthropicwire.ToolChoice{Type: "none"}
		return nil
	default:
		return anthropicRefuses("tool_choice", "Anthropic's tool_choice has no mode "+strconv.Quote(tc.Mode))
	}
	if tc == nil && !noParallel {
		return nil // auto is Anthropic's default
	}
	choice.DisableParallelToolUse = noParallel
	body.ToolChoice = &choice
	return nil
}

// anthropicMessages translates the history into body's system blocks and
// turns, one role at a time.
func anthropicMessages(msgs []Message, body *anthropicwire.Request) *Unsupported {
	for i, m := range msgs {
		at := fmt.Sprintf("messages[%d]", i)
		if u := anthropicMessageFields(at, m); u != nil {
			return u
		}
		// A message after a tool result joins the results' user turn.
		afterTool := i > 0 && msgs[i-1].Role == "tool"
		var u *Unsupported
		switch m.Role {
		case "system", "developer":
			u = anthropicSystem(at, m, body)
		case "user":
			u = anthropicUser(at, m, afterTool, body)
		case "assistant":
			var turn anthropicwire.Message
			if turn, u = anthropicAssistant(at, m); u == nil {
				body.Messages = append(body.Messages, turn)
			}
		case "tool":
			u = anthropicToolResult(at, m, afterTool, body)
		default:
			u = anthropicRefuses(at+".role", "Anthropic's Messages API has no role "+strconv.Quote(m.Role))
		}
		if u != nil {
			return u
		}
	}
	return nil
}

// anthropicMessageFields refuses a message's fields Anthropic has no
// place for: a name, and is_error or cache_control off a tool result.
func anthropicMessageFields(at string, m Message) *Unsupported {
	switch {
	case m.Name != "":
		return anthropicRefuses(at+".name", "Anthropic's messages have no name")
	case m.IsError && m.Role != "tool":
		return anthropicRefuses(at+".is_error", "Anthropic's is_error belongs on a tool result")
	case m.CacheControl != nil && m.Role != "tool":
		return anthropicRefuses(at+".cache_control", "Anthropic takes cache_control on a message's blocks, not on the message")
	}
	return nil
}

// anthropicSystem appends a system or developer message to the system
// blocks.
func anthropicSystem(at string, m Message, body *anthropicwire.Request) *Unsupported {
	blocks, u := anthropicBlocks(at, m.Content, blocksSystem)
	if u != nil {
		return u
	}
	if m.Content.Parts == nil && m.Content.Text != "" {
		blocks = []anthropicwire.Block{textBlock(m.Content.Text, nil)}
	}
	if len(blocks) == 0 {
		return nil
	}
	if body.System == nil {
		body.System = anthropicwire.BlockContent(nil)
	}
	body.System.Blocks = append(body.System.Blocks, blocks...)
	return nil
}

// anthropicUser appends a user turn; its blocks after a tool result join
// the results' turn, as text beside them.
func anthropicUser(at string, m Message, afterTool bool, body *anthropicwire.Request) *Unsupported {
	content, u := anthropicContent(at, m.Content, blocksUser)
	if u != nil {
		return u
	}
	if content.Text == nil && afterTool {
		last := body.Messages[len(body.Messages)-1].Content
		last.Blocks = append(last.Blocks, content.Blocks...)
		return nil
	}
	body.Messages = append(body.Messages, anthropicwire.Message{Role: "user", Content: content})
	return nil
}

// anthropicToolResult appends a tool message as a tool_result block.
// Consecutive tool messages answer one assistant turn: their results
// travel together in one user message.
func anthropicToolResult(at string, m Message, afterTool bool, body *anthropicwire.Request) *Unsupported {
	if m.ToolCallID == "" {
		return anthropicRefuses(at+".tool_call_id", "Anthropic's tool_result needs the id of the call it answers")
	}
	result, u := anthropicContent(at, m.Content, blocksUser)
	if u != nil {
		return u
	}
	block := anthropicwire.Block{Type: "tool_result", ToolUseID: &m.ToolCallID, Content: result, CacheControl: m.CacheControl}
	if m.IsError {
		block.IsError = &m.IsError
	}
	if result.Text != nil && *result.Text == "" {
		block.Content = nil
	}
	if afterTool {
		last := body.Messages[len(body.Messages)-1].Content
		last.Blocks = append(last.Blocks, block)
		return nil
	}
	body.Messages = append(body.Messages, anthropicwire.Message{Role: "user", Content: anthropicwire.BlockContent([]anthropicwire.Block{block})})
	return nil
}

// anthropicAssistant is an assistant turn: its text, its refusal as text,
// then its tool calls as tool_use blocks. A turn of one text stays a
// string.
func anthropicAssistant(at string, m Message) (anthropicwire.Message, *Unsupported) {
	if len(m.ToolCalls) == 0 && m.Refusal == "" && m.Content.Parts == nil {
		return anthropicwire.Message{Role: "assistant", Content: anthropicwire.TextContent(m.Content.Text)}, nil
	}
	blocks, u := anthropicBlocks(at, m.Content, blocksAssistant)
	if u != nil {
		return anthropicwire.Message{}, u
	}
	if m.Content.Parts == nil && m.Content.Text != "" {
		blocks = append(blocks, textBlock(m.Content.Text, nil))
	}
	if m.Refusal != "" {
		blocks = append(blocks, textBlock(m.Refusal, nil))
	}
	for j, tc := range m.ToolCalls {
		input, ok := argumentsObject(tc.Function.Arguments)
		if !ok {
			return anthropicwire.Message{}, anthropicRefuses(fmt.Sprintf("%s.tool_calls[%d].function.arguments", at, j),
				"Anthropic's tool_use input must be a JSON object")
		}
		blocks = append(blocks, anthropicwire.Block{Type: "tool_use", ID: nonEmpty(tc.ID), Name: nonEmpty(tc.Function.Name),
			Input: input, CacheControl: tc.CacheControl})
	}
	return anthropicwire.Message{Role: "assistant", Content: anthropicwire.BlockContent(blocks)}, nil
}

// nonEmpty is s as an optional field: nil, and so omitted, when empty.
func nonEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// textBlock is a text block of s; an empty text is omitted.
func textBlock(s string, cc *CacheControl) anthropicwire.Block {
	return anthropicwire.Block{Type: "text", Text: nonEmpty(s), CacheControl: cc}
}

// argumentsObject reads a tool call's arguments as the JSON object
// Anthropic's input is, compacted; empty arguments are an empty object.
func argumentsObject(args string) (json.RawMessage, bool) {
	if strings.TrimSpace(args) == "" {
		return json.RawMessage(`{}`), true
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, []byte(args)); err != nil || buf.Len() == 0 || buf.Bytes()[0] != '{' {
		return nil, false
	}
	return buf.Bytes(), true
}

// anthropicContent is a message's content: its text as a string, or its
// parts as blocks.
func anthropicContent(at string, c Content, role blockRole) (*anthropicwire.Content, *Unsupported) {
	if c.Parts == nil {
		return anthropicwire.TextContent(c.Text), nil
	}
	blocks, u := anthropicBlocks(at, c, role)
	if u != nil {
		return nil, u
	}
	return anthropicwire.BlockContent(blocks), nil
}

// blockRole is what blocks a message may hold: images come from users
// and tools, thinking from the assistant.
type blockRole int

const (
	blocksSystem blockRole = iota
	blocksUser
	blocksAssistant
)

// anthropicBlocks turns content parts into blocks, as role allows. It
// returns no blocks for a content of one text.
func anthropicBlocks(at string, c Content, role blockRole) ([]anthropicwire.Block, *Unsupported) {
	blocks := []anthropicwire.Block{}
	for j, p := range c.Parts {
		pat := fmt.Sprintf("%s.content[%d]", at, j)
		switch p.Type {
		case PartText:
			blocks = append(blocks, textBlock(p.Text, p.CacheControl))
		case PartImage:
			if role != blocksUser {
				return nil, anthropicRefuses(pat, "Anthropic takes images in user and tool messages only")
			}
			src, u := anthropicImage(pat, p.ImageURL)
			if u != nil {
				return nil, u
			}
			blocks = append(blocks, anthropicwire.Block{Type: "image", Source: src, CacheControl: p.CacheControl})
		case PartThinking, PartRedactedThinking:
			if role != blocksAssistant {
				return nil, anthropicRefuses(pat, "Anthropic takes thinking blocks in assistant messages only")
			}
			if p.CacheControl != nil {
				return nil, anthropicRefuses(pat+".cache_control", "Anthropic takes no cache_control on a thinking block")
			}
			if p.Type == PartRedactedThinking {
				blocks = append(blocks, anthropicwire.Block{Type: p.Type, Data: nonEmpty(p.Data)})
				continue
			}
			thinking, signature := p.Thinking, p.Signature
			blocks = append(blocks, anthropicwire.Block{Type: p.Type, Thinking: &thinking, Signature: &signature})
		default:
			return nil, anthropicRefuses(pat+".type", "Anthropic's Messages API has no content part "+strconv.Quote(p.Type))
		}
	}
	return blocks, nil
}

// anthropicImage is the source of an image part: a base64 data URL becomes
// a base64 source with its media type, an http(s) URL a url source.
// OpenAI's detail has no Anthropic equivalent; auto, its default, asks
// nothing.
func anthropicImage(at string, img *ImageURL) (*anthropicwire.ImageSource, *Unsupported) {
	if img == nil {
		return nil, anthropicRefuses(at+".image_url", "an image part needs an image_url")
	}
	if img.Detail != "" && img.Detail != "auto" {
		return nil, anthropicRefuses(at+".image_url.detail", "Anthropic's Messages API has no image detail")
	}
	u := img.URL
	lower := strings.ToLower(u)
	switch {
	case strings.HasPrefix(lower, "https://") || strings.HasPrefix(lower, "http://"):
		return &anthropicwire.ImageSource{Type: "url", URL: u}, nil
	case strings.HasPrefix(lower, "data:"):
		meta, data, ok := strings.Cut(u[len("data:"):], ",")
		mediaType, isBase64 := strings.CutSuffix(strings.ToLower(meta), ";base64")
		if !ok || !isBase64 {
			return nil, anthropicRefuses(at+".image_url.url", "Anthropic takes data URLs in base64 only")
		}
		if !slices.Contains(anthropicwire.ImageTypes, mediaType) {
			return nil, anthropicRefuses(at+".image_url.url", "Anthropic takes base64 images of type "+strings.Join(anthropicwire.ImageTypes, ", "))
		}
		return &anthropicwire.ImageSource{Type: "base64", MediaType: mediaType, Data: data}, nil
	}
	return nil, anthropicRefuses(at+".image_url.url", "Anthropic takes images by http(s) URL or base64 data URL")
}
