package fake

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/tollgate/tollgate/internal/anthropicwire"
	"github.com/tollgate/tollgate/internal/tokens"
)

// anthropicFields are the top-level fields of a Messages request; the real
// API refuses any other, and so does the fake, to catch an adapter that
// sends OpenAI's names.
var anthropicFields = []string{
	"model", "max_tokens", "messages", "system", "metadata", "stop_sequences", "stream",
	"temperature", "top_p", "top_k", "tools", "tool_choice", "thinking", "output_config",
	"output_format", "service_tier", "container", "mcp_servers", "context_management",
}

// contentBlocks is c as blocks: a string is one text block.
func contentBlocks(c *anthropicwire.Content) []anthropicwire.Block {
	switch {
	case c == nil:
		return nil
	case c.Text != nil:
		return []anthropicwire.Block{{Type: "text", Text: c.Text}}
	}
	return c.Blocks
}

// deref is an optional field's value, "" when absent.
func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// contentText joins the text blocks of c and lists its images.
func contentText(c *anthropicwire.Content) (string, []image) {
	var sb strings.Builder
	var imgs []image
	for _, b := range contentBlocks(c) {
		switch {
		case b.Type == "text":
			sb.WriteString(deref(b.Text))
		case b.Type == "image" && b.Source != nil:
			switch b.Source.Type {
			case "base64":
				imgs = append(imgs, image{URL: "data:" + b.Source.MediaType + ";base64," + b.Source.Data})
			case "url":
				imgs = append(imgs, image{URL: b.Source.URL})
			case "file":
				imgs = append(imgs, image{URL: "file:" + b.Source.FileID})
			}
		}
	}
	return sb.String(), imgs
}

// toolSize is the size the fake counts for a tool definition: its type,
// name, description and input schema, each written even when empty.
func toolSize(t anthropicwire.Tool) int {
	def, _ := json.Marshal(struct {
		Type        string          `json:"type"`
		Name        string          `json:"name"`
		Description string          `json:"description"`
		InputSchema json.RawMessage `json:"input_schema"`
	}{deref(t.Type), t.Name, t.Description, t.InputSchema})
	return len(def)
}

// handleMessages serves POST /v1/messages in the Anthropic Messages format.
func (s *Server) handleMessages(w http.ResponseWriter, r *http.Request) {
	body := readBody(w, r)
	var req anthropicwire.Request
	err := decodeObject(body, &req)
	next, scripted := s.log(r, req.Model, body)
	if scripted && !next.shapes(req.Stream) {
		s.serveScripted(w, r, next)
		return
	}
	if scripted && !s.pause(r, next) {
		return
	}
	if err == nil {
		err = unknownField(body)
	}
	if err != nil {
		writeAnthropicError(w, http.StatusBadRequest, "invalid_request_error", "fake: "+err.Error())
		return
	}
	a, err := s.messagesAsk(req)
	if err != nil {
		writeAnthropicError(w, http.StatusBadRequest, "invalid_request_error", err.Error())
		return
	}
	rp := plan(a, next, "toolu_fake_")
	if req.Stream {
		s.streamMessage(w, r, req.Model, rp)
		return
	}
	scriptedHeaders(w, next)
	writeJSON(w, next.status(), messageOf(req.Model, rp))
}

// unknownField names the first top-level field the Messages API does not
// define, in the real API's words.
func unknownField(body []byte) error {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(body, &fields); err != nil {
		return err
	}
	var unknown []string
	for k := range fields {
		if !slices.Contains(anthropicFields, k) {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	slices.Sort(unknown)
	return fmt.Errorf("%s: Extra inputs are not permitted", unknown[0])
}

// messagesAsk reduces req. The system prompt counts as one leading system
// message, and a user message's tool_result blocks as tool messages before
// what remains of it, so that a conversation hashes the same as its OpenAI
// form.
func (s *Server) messagesAsk(req anthropicwire.Request) (ask, error) {
	a := ask{reasoning: s.reasoning[req.Model], parallel: true, n: 1, limit: maxTokens(req)}
	if err := checkMessagesLimits(req); err != nil {
		return a, err
	}
	a.thinking = req.Thinking != nil && (req.Thinking.Type == "enabled" || req.Thinking.Type == "adaptive")
	for i, t := range req.Tools {
		if t.Name == "" {
			return a, fmt.Errorf("tools.%d.name: Field required", i)
		}
		a.tools = append(a.tools, tool{Name: t.Name, Schema: t.InputSchema, size: toolSize(t)})
	}
	if err := a.messagesToolChoice(req); err != nil {
		return a, err
	}
	if err := a.messagesFormat(req); err != nil {
		return a, err
	}
	if sys, imgs := contentText(req.System); sys != "" || imgs != nil {
		a.turns = append(a.turns, turn{Role: "system", Content: sys})
	}
	if err := checkThinking(req, a.thinking); err != nil {
		return a, err
	}
	if err := a.messagesTurns(req.Messages); err != nil {
		return a, err
	}
	return a, nil
}

// checkMessagesLimits refuses what the real API refuses of the output
// limit and the thinking budget.
func checkMessagesLimits(req anthropicwire.Request) error {
	if maxTokens(req) <= 0 {
		// The real API requires it; so does the fake, to catch clients
		// that forget.
		return errors.New("max_tokens: Field required")
	}
	if t := req.Thinking; t != nil && t.Type == "enabled" {
		if t.BudgetTokens < 1024 {
			return errors.New("thinking.enabled.budget_tokens: Input should be greater than or equal to 1024")
		}
		if maxTokens(req) <= t.BudgetTokens {
			return errors.New("`max_tokens` must be greater than `thinking.budget_tokens`")
		}
	}
	return nil
}

// maxTokens is req's max_tokens, 0 when absent.
func maxTokens(req anthropicwire.Request) int {
	if req.MaxTokens == nil {
		return 0
	}
	return *req.MaxTokens
}

// messagesToolChoice reduces the tool choice to OpenAI's terms.
func (a *ask) messagesToolChoice(req anthropicwire.Request) error {
	tc := req.ToolChoice
	if tc == nil {
		return nil
	}
	switch tc.Type {
	case "auto", "none":
		a.toolChoice = tc.Type
	case "any":
		a.toolChoice = "required"
	case "tool":
		a.toolChoice = tc.Name
	default:
		return fmt.Errorf("tool_choice.type: Input should be 'auto', 'any', 'tool' or 'none'")
	}
	a.parallel = !tc.DisableParallelToolUse
	return nil
}

// messagesFormat reads the output format, output_config's winning over
// the older output_format.
func (a *ask) messagesFormat(req anthropicwire.Request) error {
	format := req.OutputFormat
	if req.OutputConfig != nil && req.OutputConfig.Format != nil {
		format = req.OutputConfig.Format
	}
	if format == nil {
		return nil
	}
	if format.Type != "json_schema" {
		return errors.New("output_config.format.type: Input should be 'json_schema'")
	}
	a.format, a.schema = "json_schema", format.Schema
	return nil
}

// messagesTurns reduces the messages to turns: an assistant message with
// its tool calls, a user message's tool results as tool turns before what
// remains of it. A tool result must answer a tool_use of the previous
// assistant message.
func (a *ask) messagesTurns(msgs []anthropicwire.Message) error {
	var uses map[string]bool // the tool_use ids of the previous assistant message
	for i, m := range msgs {
		if m.Role != "user" && m.Role != "assistant" {
			return fmt.Errorf("messages.%d.role: Input should be 'user' or 'assistant'", i)
		}
		if m.Role == "assistant" {
			uses = a.assistantTurn(m)
			continue
		}
		if err := a.userTurn(i, m, uses); err != nil {
			return err
		}
		uses = nil
	}
	if n := len(msgs); n > 0 && msgs[n-1].Role == "assistant" {
		a.afterToolResult = false
	}
	return nil
}

// assistantTurn appends an assistant message and returns its tool_use ids.
func (a *ask) assistantTurn(m anthropicwire.Message) map[string]bool {
	text, imgs := contentText(m.Content)
	t := turn{Role: "assistant", Content: text, Images: imgs}
	uses := map[string]bool{}
	for _, b := range contentBlocks(m.Content) {
		if b.Type == "tool_use" {
			t.ToolCalls = append(t.ToolCalls, toolCall{ID: deref(b.ID), Name: deref(b.Name), Arguments: compactJSON(b.Input)})
			uses[deref(b.ID)] = true
		}
	}
	a.turns = append(a.turns, t)
	return uses
}

// userTurn appends the tool results of user message i, each answering
// one of uses, then what remains of it.
func (a *ask) userTurn(i int, m anthropicwire.Message, uses map[string]bool) error {
	text, imgs := contentText(m.Content)
	results := 0
	for j, b := range contentBlocks(m.Content) {
		if b.Type != "tool_result" {
			continue
		}
		id := deref(b.ToolUseID)
		if !uses[id] {
			return apiMessage(fmt.Sprintf("messages.%d.content.%d: unexpected `tool_use_id` found in `tool_result` blocks: %s. "+
				"Each `tool_result` block must have a corresponding `tool_use` block in the previous message.", i, j, id))
		}
		rt, rimgs := contentText(b.Content)
		a.turns = append(a.turns, turn{Role: "tool", Content: rt, Images: rimgs, ToolCallID: id})
		results++
	}
	if results == 0 || text != "" || imgs != nil {
		a.turns = append(a.turns, turn{Role: "user", Content: text, Images: imgs})
	}
	a.afterToolResult = results > 0
	return nil
}

// checkThinking refuses what the real API refuses of thinking blocks: a
// thinking block without its thinking or signature, one whose signature
// the fake made for another text (altered on its way back), a redacted
// block without data; and, with thinking on, a tool loop whose calling
// assistant message does not start with its thinking.
func checkThinking(req anthropicwire.Request, thinking bool) error {
	lastAssistant := -1
	for i, m := range req.Messages {
		if m.Role == "assistant" {
			lastAssistant = i
		}
		for j, b := range contentBlocks(m.Content) {
			at := fmt.Sprintf("messages.%d.content.%d", i, j)
			switch b.Type {
			case "thinking":
				switch {
				case b.Thinking == nil:
					return fmt.Errorf("%s.thinking.thinking: Field required", at)
				case b.Signature == nil:
					return fmt.Errorf("%s.thinking.signature: Field required", at)
				case strings.HasPrefix(*b.Signature, signaturePrefix) && *b.Signature != thinkingSignature(*b.Thinking):
					return apiMessage(at + ": Invalid `signature` in `thinking` block")
				}
			case "redacted_thinking":
				if deref(b.Data) == "" {
					return fmt.Errorf("%s.redacted_thinking.data: Field required", at)
				}
			}
		}
	}
	n := len(req.Messages)
	if !thinking || lastAssistant < 0 || lastAssistant != n-2 || !hasToolResult(req.Messages[n-1].Content) {
		return nil
	}
	first := contentBlocks(req.Messages[lastAssistant].Content)
	if len(first) == 0 || (first[0].Type != "thinking" && first[0].Type != "redacted_thinking") {
		found := "text"
		if len(first) > 0 {
			found = first[0].Type
		}
		return apiMessage(fmt.Sprintf("messages.%d.content.0.type: Expected `thinking` or `redacted_thinking`, but found `%s`. "+
			"When `thinking` is enabled, a final `assistant` message must start with a thinking block.", lastAssistant, found))
	}
	return nil
}

func hasToolResult(c *anthropicwire.Content) bool {
	for _, b := range contentBlocks(c) {
		if b.Type == "tool_result" {
			return true
		}
	}
	return false
}

// apiMessage is an error whose text is the real API's message, punctuation
// included.
type apiMessage string

func (m apiMessage) Error() string { return string(m) }

// stopReason translates OpenAI's finish reason.
func stopReason(rp reply) string {
	if rp.refusal != "" && rp.sc.FinishReason == "" {
		return "refusal"
	}
	if rp.sequence != "" {
		return "stop_sequence"
	}
	switch rp.finish {
	case "stop":
		return "end_turn"
	case "length":
		return "max_tokens"
	case "tool_calls":
		return "tool_use"
	case "content_filter":
		return "refusal"
	}
	return rp.finish
}

// blocksOf lists the answer's blocks: thinking, redacted thinking, then
// text (or the refusal's text), then tool_use.
func blocksOf(rp reply) []anthropicwire.ResponseBlock {
	var out []anthropicwire.ResponseBlock
	if rp.thinking != "" {
		out = append(out, anthropicwire.ResponseBlock{Type: "thinking", Thinking: optional(rp.thinking), Signature: optional(rp.signature)})
	}
	if rp.redacted != "" {
		out = append(out, anthropicwire.ResponseBlock{Type: "redacted_thinking", Data: rp.redacted})
	}
	switch {
	case rp.refusal != "":
		text := rp.refusal
		out = append(out, anthropicwire.ResponseBlock{Type: "text", Text: &text})
	case rp.calls == nil:
		text := rp.content
		out = append(out, anthropicwire.ResponseBlock{Type: "text", Text: &text})
	}
	for _, c := range rp.calls {
		out = append(out, anthropicwire.ResponseBlock{Type: "tool_use", ID: c.ID, Name: c.Name, Input: json.RawMessage(c.Arguments)})
	}
	return out
}

// optional is s as an optional field: nil, and so omitted, when empty.
func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// optionalCount is n as an optional count: nil, and so omitted, when 0.
func optionalCount(n int) *tokens.Count {
	if n == 0 {
		return nil
	}
	c := tokens.Count(n)
	return &c
}

// messageOf writes rp as a Message: input_tokens are the uncached prompt,
// cache reads and writes are reported beside it, and reasoning tokens are
// part of output_tokens (Anthropic does not report them apart).
func messageOf(model string, rp reply) anthropicwire.Response {
	input, stop := tokens.Count(rp.prompt), stopReason(rp)
	m := anthropicwire.Response{
		ID: "msg_fake_" + rp.digest[:24], Type: "message", Role: "assistant", Model: cmp.Or(rp.model, model),
		Content: blocksOf(rp), StopReason: &stop,
		Usage: &anthropicwire.Usage{InputTokens: &input, OutputTokens: tokens.Count(rp.out),
			CacheCreationInputTokens: optionalCount(rp.cacheWrite), CacheReadInputTokens: optionalCount(rp.cached)},
	}
	if rp.sequence != "" {
		m.StopSequence = &rp.sequence
	}
	return m
}

// writeAnthropicError answers in the Anthropic error shape.
// Its members are in the real API's order (type first), which
// anthropicwire.ErrorBody, in name order, does not keep.
func writeAnthropicError(w http.ResponseWriter, status int, typ, msg string) {
	type detail struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	}
	writeJSON(w, status, struct {
		Type  string `json:"type"`
		Error detail `json:"error"`
	}{"error", detail{typ, msg}})
}

// streamMessage sends rp as Messages API events: message_start (input
// usage), each block as content_block_start, deltas (text_delta a word at a
// time, thinking_delta and signature_delta, input_json_delta fragments of a
// tool's input) and content_block_stop, then message_delta (stop reason,
// output usage) and message_stop. The script may slow the deltas
// (ChunkDelayMS) or cut the connection after some (StreamCutAfter).
func (s *Server) streamMessage(w http.ResponseWriter, r *http.Request, model string, rp reply) {
	m := messageOf(model, rp)
	sc := rp.sc
	out := startSSE(w, sc)
	// message_start's message and usage are written in name order,
	// unlike the answer's.
	startUsage := map[string]tokens.Count{"input_tokens": *m.Usage.InputTokens, "output_tokens": 1}
	if c := m.Usage.CacheCreationInputTokens; c != nil {
		startUsage["cache_creation_input_tokens"] = *c
	}
	if c := m.Usage.CacheReadInputTokens; c != nil {
		startUsage["cache_read_input_tokens"] = *c
	}
	start := map[string]any{"id": m.ID, "type": "message", "role": "assistant", "model": m.Model, "content": []any{},
		"stop_reason": nil, "stop_sequence": nil, "usage": startUsage}
	out.send(anthropicwire.EventMessageStart, map[string]any{"type": anthropicwire.EventMessageStart, "message": start})
	sent := 0
	delta := func(index int, d anthropicwire.BlockDelta) bool {
		if sc.StreamCutAfter > 0 && sent == sc.StreamCutAfter {
			panic(http.ErrAbortHandler)
		}
		if !s.waitChunk(r, sc) {
			return false
		}
		out.send(anthropicwire.EventContentBlockDelta, anthropicwire.ContentBlockDelta{Type: anthropicwire.EventContentBlockDelta, Index: index, Delta: d})
		sent++
		return true
	}
	for i, b := range m.Content {
		first, deltas := blockStart(b)
		out.send(anthropicwire.EventContentBlockStart, anthropicwire.ContentBlockStart{Type: anthropicwire.EventContentBlockStart, Index: i, ContentBlock: first})
		for _, d := range deltas {
			if !delta(i, d) {
				return
			}
		}
		out.send(anthropicwire.EventContentBlockStop, anthropicwire.ContentBlockStop{Type: anthropicwire.EventContentBlockStop, Index: i})
	}
	out.send(anthropicwire.EventMessageDelta, anthropicwire.MessageDelta{Type: anthropicwire.EventMessageDelta,
		Delta: anthropicwire.StopDelta{StopReason: *m.StopReason, StopSequence: m.StopSequence}, Usage: anthropicwire.Usage{OutputTokens: m.Usage.OutputTokens}})
	out.send(anthropicwire.EventMessageStop, anthropicwire.TypeOnly{Type: anthropicwire.EventMessageStop})
}

// blockStart is how a stream opens block b, and the deltas that follow:
// text_delta a word at a time, thinking_delta then signature_delta,
// input_json_delta fragments of a tool's input.
func blockStart(b anthropicwire.ResponseBlock) (anthropicwire.StreamBlock, []anthropicwire.BlockDelta) {
	var deltas []anthropicwire.BlockDelta
	switch b.Type {
	case "thinking":
		deltas = []anthropicwire.BlockDelta{anthropicwire.ThinkingDelta(deref(b.Thinking)), anthropicwire.SignatureDelta(deref(b.Signature))}
		return anthropicwire.StreamBlock{Type: "thinking", Thinking: new(string)}, deltas
	case "redacted_thinking":
		return anthropicwire.StreamBlock{Type: "redacted_thinking", Data: &b.Data}, nil
	case "text":
		for _, wd := range words(*b.Text) {
			deltas = append(deltas, anthropicwire.TextDelta(wd))
		}
		return anthropicwire.StreamBlock{Type: "text", Text: new(string)}, deltas
	case "tool_use":
		for _, frag := range fragments(string(b.Input), argFragment) {
			deltas = append(deltas, anthropicwire.InputJSONDelta(frag))
		}
		return anthropicwire.StreamBlock{Type: "tool_use", ID: &b.ID, Name: &b.Name, Input: json.RawMessage(`{}`)}, deltas
	}
	return anthropicwire.StreamBlock{}, nil
}
