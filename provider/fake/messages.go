package fake

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
)

// anthropicFields are the top-level fields of a Messages request; the real
// API refuses any other, and so does the fake, to catch an adapter that
// sends OpenAI's names.
var anthropicFields = []string{
	"model", "max_tokens", "messages", "system", "metadata", "stop_sequences", "stream",
	"temperature", "top_p", "top_k", "tools", "tool_choice", "thinking", "output_config",
	"output_format", "service_tier", "container", "mcp_servers", "context_management",
}

type messagesRequest struct {
	Model     string            `json:"model"`
	MaxTokens int               `json:"max_tokens"`
	Stream    bool              `json:"stream"`
	System    anthropicContent  `json:"system"`
	Messages  []messagesMessage `json:"messages"`
	Tools     []struct {
		Type        string          `json:"type"`
		Name        string          `json:"name"`
		Description string          `json:"description"`
		InputSchema json.RawMessage `json:"input_schema"`
	} `json:"tools"`
	ToolChoice *struct {
		Type                   string `json:"type"`
		Name                   string `json:"name"`
		DisableParallelToolUse bool   `json:"disable_parallel_tool_use"`
	} `json:"tool_choice"`
	Thinking *struct {
		Type         string `json:"type"`
		BudgetTokens int    `json:"budget_tokens"`
	} `json:"thinking"`
	OutputConfig *struct {
		Format *anthropicFormat `json:"format"`
		Effort string           `json:"effort"`
	} `json:"output_config"`
	OutputFormat  *anthropicFormat `json:"output_format"`
	StopSequences []string         `json:"stop_sequences"`
	Temperature   *float64         `json:"temperature"`
	TopP          *float64         `json:"top_p"`
	TopK          *int             `json:"top_k"`
	Metadata      *struct {
		UserID string `json:"user_id"`
	} `json:"metadata"`
}

type anthropicFormat struct {
	Type   string          `json:"type"`
	Schema json.RawMessage `json:"schema"`
}

// anthropicContent is Anthropic content: a string, or an array of blocks.
type anthropicContent []contentBlock

type contentBlock struct {
	Type   string `json:"type"`
	Text   string `json:"text"`
	Source *struct {
		Type      string `json:"type"`
		MediaType string `json:"media_type"`
		Data      string `json:"data"`
		URL       string `json:"url"`
		FileID    string `json:"file_id"`
	} `json:"source"`
	ID        string           `json:"id"`
	Name      string           `json:"name"`
	Input     json.RawMessage  `json:"input"`
	ToolUseID string           `json:"tool_use_id"`
	Content   anthropicContent `json:"content"` // a tool result's
	IsError   bool             `json:"is_error"`
	Thinking  *string          `json:"thinking"`
	Signature *string          `json:"signature"`
	Data      string           `json:"data"` // a redacted_thinking block's
}

func (c *anthropicContent) UnmarshalJSON(data []byte) error {
	data = bytes.TrimSpace(data)
	if len(data) > 0 && data[0] == '[' {
		var bs []contentBlock
		if err := json.Unmarshal(data, &bs); err != nil {
			return err
		}
		*c = bs
		return nil
	}
	var s string
	if err := json.Unmarshal(data, &s); err != nil {
		return errors.New("content must be a string or an array of content blocks")
	}
	*c = anthropicContent{{Type: "text", Text: s}}
	return nil
}

// text joins the text blocks and lists the images.
func (c anthropicContent) text() (string, []image) {
	var sb strings.Builder
	var imgs []image
	for _, b := range c {
		switch {
		case b.Type == "text":
			sb.WriteString(b.Text)
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

// handleMessages serves POST /v1/messages in the Anthropic Messages format.
func (s *Server) handleMessages(w http.ResponseWriter, r *http.Request) {
	body := readBody(w, r)
	var req messagesRequest
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

// messagesMessage is one message of a Messages request.
type messagesMessage struct {
	Role    string           `json:"role"`
	Content anthropicContent `json:"content"`
}

// messagesAsk reduces req. The system prompt counts as one leading system
// message, and a user message's tool_result blocks as tool messages before
// what remains of it, so that a conversation hashes the same as its OpenAI
// form.
func (s *Server) messagesAsk(req messagesRequest) (ask, error) {
	a := ask{reasoning: s.reasoning[req.Model], parallel: true, n: 1, limit: req.MaxTokens}
	if err := checkMessagesLimits(req); err != nil {
		return a, err
	}
	a.thinking = req.Thinking != nil && (req.Thinking.Type == "enabled" || req.Thinking.Type == "adaptive")
	for i, t := range req.Tools {
		if t.Name == "" {
			return a, fmt.Errorf("tools.%d.name: Field required", i)
		}
		def, _ := json.Marshal(t)
		a.tools = append(a.tools, tool{Name: t.Name, Schema: t.InputSchema, size: len(def)})
	}
	if err := a.messagesToolChoice(req); err != nil {
		return a, err
	}
	if err := a.messagesFormat(req); err != nil {
		return a, err
	}
	if sys, imgs := req.System.text(); sys != "" || imgs != nil {
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
func checkMessagesLimits(req messagesRequest) error {
	if req.MaxTokens <= 0 {
		// The real API requires it; so does the fake, to catch clients
		// that forget.
		return errors.New("max_tokens: Field required")
	}
	if t := req.Thinking; t != nil && t.Type == "enabled" {
		if t.BudgetTokens < 1024 {
			return errors.New("thinking.enabled.budget_tokens: Input should be greater than or equal to 1024")
		}
		if req.MaxTokens <= t.BudgetTokens {
			return errors.New("`max_tokens` must be greater than `thinking.budget_tokens`")
		}
	}
	return nil
}

// messagesToolChoice reduces the tool choice to OpenAI's terms.
func (a *ask) messagesToolChoice(req messagesRequest) error {
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
func (a *ask) messagesFormat(req messagesRequest) error {
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
func (a *ask) messagesTurns(msgs []messagesMessage) error {
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
func (a *ask) assistantTurn(m messagesMessage) map[string]bool {
	text, imgs := m.Content.text()
	t := turn{Role: "assistant", Content: text, Images: imgs}
	uses := map[string]bool{}
	for _, b := range m.Content {
		if b.Type == "tool_use" {
			t.ToolCalls = append(t.ToolCalls, toolCall{ID: b.ID, Name: b.Name, Arguments: compactJSON(b.Input)})
			uses[b.ID] = true
		}
	}
	a.turns = append(a.turns, t)
	return uses
}

// userTurn appends the tool results of user message i, each answering
// one of uses, then what remains of it.
func (a *ask) userTurn(i int, m messagesMessage, uses map[string]bool) error {
	text, imgs := m.Content.text()
	results := 0
	for j, b := range m.Content {
		if b.Type != "tool_result" {
			continue
		}
		if !uses[b.ToolUseID] {
			return apiMessage(fmt.Sprintf("messages.%d.content.%d: unexpected `tool_use_id` found in `tool_result` blocks: %s. "+
				"Each `tool_result` block must have a corresponding `tool_use` block in the previous message.", i, j, b.ToolUseID))
		}
		rt, rimgs := b.Content.text()
		a.turns = append(a.turns, turn{Role: "tool", Content: rt, Images: rimgs, ToolCallID: b.ToolUseID})
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
func checkThinking(req messagesRequest, thinking bool) error {
	lastAssistant := -1
	for i, m := range req.Messages {
		if m.Role == "assistant" {
			lastAssistant = i
		}
		for j, b := range m.Content {
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
				if b.Data == "" {
					return fmt.Errorf("%s.redacted_thinking.data: Field required", at)
				}
			}
		}
	}
	n := len(req.Messages)
	if !thinking || lastAssistant < 0 || lastAssistant != n-2 || !hasToolResult(req.Messages[n-1].Content) {
		return nil
	}
	first := req.Messages[lastAssistant].Content
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

func hasToolResult(c anthropicContent) bool {
	for _, b := range c {
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

type anthropicMessage struct {
	ID           string           `json:"id"`
	Type         string           `json:"type"`
	Role         string           `json:"role"`
	Model        string           `json:"model"`
	Content      []anthropicBlock `json:"content"`
	StopReason   string           `json:"stop_reason"`
	StopSequence *string          `json:"stop_sequence"`
	Usage        anthropicUsage   `json:"usage"`
}

type anthropicBlock struct {
	Type      string          `json:"type"`
	Text      *string         `json:"text,omitempty"`
	Thinking  string          `json:"thinking,omitempty"`
	Signature string          `json:"signature,omitempty"`
	Data      string          `json:"data,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
}

type anthropicUsage struct {
	InputTokens              int `json:"input_tokens"`
	OutputTokens             int `json:"output_tokens"`
	CacheCreationInputTokens int `json:"cache_creation_input_tokens,omitempty"`
	CacheReadInputTokens     int `json:"cache_read_input_tokens,omitempty"`
}

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
func blocksOf(rp reply) []anthropicBlock {
	var out []anthropicBlock
	if rp.thinking != "" {
		out = append(out, anthropicBlock{Type: "thinking", Thinking: rp.thinking, Signature: rp.signature})
	}
	if rp.redacted != "" {
		out = append(out, anthropicBlock{Type: "redacted_thinking", Data: rp.redacted})
	}
	switch {
	case rp.refusal != "":
		text := rp.refusal
		out = append(out, anthropicBlock{Type: "text", Text: &text})
	case rp.calls == nil:
		text := rp.content
		out = append(out, anthropicBlock{Type: "text", Text: &text})
	}
	for _, c := range rp.calls {
		out = append(out, anthropicBlock{Type: "tool_use", ID: c.ID, Name: c.Name, Input: json.RawMessage(c.Arguments)})
	}
	return out
}

// messageOf writes rp as a Message: input_tokens are the uncached prompt,
// cache reads and writes are reported beside it, and reasoning tokens are
// part of output_tokens (Anthropic does not report them apart).
func messageOf(model string, rp reply) anthropicMessage {
	m := anthropicMessage{
		ID: "msg_fake_" + rp.digest[:24], Type: "message", Role: "assistant", Model: cmp.Or(rp.model, model),
		Content: blocksOf(rp), StopReason: stopReason(rp),
		Usage: anthropicUsage{InputTokens: rp.prompt, OutputTokens: rp.out,
			CacheCreationInputTokens: rp.cacheWrite, CacheReadInputTokens: rp.cached},
	}
	if rp.sequence != "" {
		m.StopSequence = &rp.sequence
	}
	return m
}

// writeAnthropicError answers in the Anthropic error shape.
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
	startUsage := map[string]int{"input_tokens": m.Usage.InputTokens, "output_tokens": 1}
	if m.Usage.CacheCreationInputTokens > 0 {
		startUsage["cache_creation_input_tokens"] = m.Usage.CacheCreationInputTokens
	}
	if m.Usage.CacheReadInputTokens > 0 {
		startUsage["cache_read_input_tokens"] = m.Usage.CacheReadInputTokens
	}
	start := map[string]any{"id": m.ID, "type": "message", "role": "assistant", "model": m.Model, "content": []any{},
		"stop_reason": nil, "stop_sequence": nil, "usage": startUsage}
	out.send("message_start", map[string]any{"type": "message_start", "message": start})
	sent := 0
	delta := func(index int, d map[string]string) bool {
		if sc.StreamCutAfter > 0 && sent == sc.StreamCutAfter {
			panic(http.ErrAbortHandler)
		}
		if !s.waitChunk(r, sc) {
			return false
		}
		out.send("content_block_delta", map[string]any{"type": "content_block_delta", "index": index, "delta": d})
		sent++
		return true
	}
	for i, b := range m.Content {
		var first any
		var deltas []map[string]string
		switch b.Type {
		case "thinking":
			first = map[string]string{"type": "thinking", "thinking": ""}
			deltas = []map[string]string{{"type": "thinking_delta", "thinking": b.Thinking}, {"type": "signature_delta", "signature": b.Signature}}
		case "redacted_thinking":
			first = map[string]string{"type": "redacted_thinking", "data": b.Data}
		case "text":
			first = map[string]string{"type": "text", "text": ""}
			for _, wd := range words(*b.Text) {
				deltas = append(deltas, map[string]string{"type": "text_delta", "text": wd})
			}
		case "tool_use":
			first = map[string]any{"type": "tool_use", "id": b.ID, "name": b.Name, "input": map[string]any{}}
			for _, frag := range fragments(string(b.Input), argFragment) {
				deltas = append(deltas, map[string]string{"type": "input_json_delta", "partial_json": frag})
			}
		}
		out.send("content_block_start", map[string]any{"type": "content_block_start", "index": i, "content_block": first})
		for _, d := range deltas {
			if !delta(i, d) {
				return
			}
		}
		out.send("content_block_stop", map[string]any{"type": "content_block_stop", "index": i})
	}
	out.send("message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": m.StopReason, "stop_sequence": m.StopSequence},
		"usage": map[string]int{"output_tokens": m.Usage.OutputTokens}})
	out.send("message_stop", map[string]string{"type": "message_stop"})
}
