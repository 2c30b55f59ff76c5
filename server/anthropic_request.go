package server

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"

	"github.com/tollgate/tollgate/internal/anthropicwire"
	"github.com/tollgate/tollgate/provider"
	"github.com/tollgate/tollgate/tasks"
)

// How an Anthropic Messages request becomes a task request. Every field
// of the Messages API that Tollgate carries has its place in
// provider.Chat: system blocks are a system message, tool_result blocks
// are tool messages (is_error and cache_control with them), tool_use
// blocks tool calls, thinking and redacted_thinking blocks assistant
// parts, text and image blocks parts, cache_control stays on the block it
// marks. The Anthropic adapter turns that back into the same blocks; the
// other adapters translate or refuse by name. A field or block Tollgate
// does not carry is refused here, by its path, before anything is written.

// antRequest is the body of POST /v1/messages as Tollgate reads it.
// output_config and output_format shadow the wire type's: Tollgate does
// not carry them, and refuses them by name whatever they hold.
type antRequest struct {
	anthropicwire.Request
	OutputConfig json.RawMessage `json:"output_config"`
	OutputFormat json.RawMessage `json:"output_format"`

	extra map[string]json.RawMessage // top-level fields Tollgate does not carry
	// unmodeled, for a body carried natively (anthropic_native.go), are
	// the paths of the members the scan found that no field models; nil
	// otherwise, and unknown members are refused.
	unmodeled []string
}

func (r *antRequest) setPassthrough(extra map[string]json.RawMessage) { r.extra = extra }

// antCountRequest is the body of POST /v1/messages/count_tokens.
type antCountRequest struct {
	anthropicwire.CountTokensRequest

	extra map[string]json.RawMessage
}

func (r *antCountRequest) setPassthrough(extra map[string]json.RawMessage) { r.extra = extra }

// request is the count request as a Messages request.
func (r antCountRequest) request() antRequest {
	return antRequest{Request: anthropicwire.Request{Model: r.Model, Messages: r.Messages, System: r.System, Tools: r.Tools,
		ToolChoice: r.ToolChoice, Thinking: r.Thinking, CacheControl: r.CacheControl}, extra: r.extra}
}

// antNotCarried are Messages API fields Tollgate does not carry: they
// configure Anthropic-hosted features (containers, MCP servers, server
// tools' context, service tiers, geography) that no gateway path can
// honour on every provider.
var antNotCarried = []string{"container", "context_management", "diagnostics", "inference_geo", "mcp_servers",
	"output_config", "output_format", "service_tier", "speed"}

// antPaths maps each message of the task request back to where it came
// from in the Messages request, so that a problem found on the task
// request is reported by the client's own path.
type antPaths struct {
	system bool         // messages[0] is the system prompt
	msgs   []antMsgPath // one per task message
	// carry, for a body carried natively, collects what the task request
	// cannot say; nil refuses it.
	carry *antCarry
}

// antCarry is what a natively carried body holds beyond the task
// request, by path: members no field models, blocks and tools of types
// Tollgate does not carry.
type antCarry struct{ unmodeled []string }

// skip notes the block or tool at path as not modeled; false when the
// request is not carried natively and must be refused.
func (p *antPaths) skip(path string) bool {
	if p.carry == nil {
		return false
	}
	p.carry.unmodeled = append(p.carry.unmodeled, path)
	return true
}

type antMsgPath struct {
	at     string // "messages[2]" or "system"
	parts  []int  // the block index of each part
	calls  []int  // the block index of each tool call
	result int    // a tool message's tool_result block, -1 otherwise
}

// antFieldError is the 400 naming one field of a Messages request.
func antFieldError(path, msg string) error {
	return badRequest(fmt.Sprintf("%s: %s.", path, msg), tasks.FieldError{Field: path, Message: msg})
}

// known refuses a field the Messages API does not have or Tollgate does
// not carry, and a request without a field it requires (count: a
// count_tokens request, which has no max_tokens).
func (r antRequest) known(count bool) error {
	keys := slices.Collect(maps.Keys(r.extra))
	for k, v := range map[string]json.RawMessage{"output_config": r.OutputConfig, "output_format": r.OutputFormat} {
		if v != nil {
			keys = append(keys, k)
		}
	}
	if slices.Sort(keys); len(keys) > 0 && r.unmodeled == nil {
		k := keys[0]
		if slices.Contains(antNotCarried, k) {
			return antFieldError(k, "is a Messages API field Tollgate does not carry")
		}
		return antFieldError(k, "is not a field of the Messages API")
	}
	switch {
	case r.Model == "":
		return antFieldError("model", "is required")
	case !count && r.MaxTokens == nil:
		return antFieldError("max_tokens", "is required")
	case !count && *r.MaxTokens < 1:
		return antFieldError("max_tokens", "must be at least 1")
	case r.Messages == nil:
		return antFieldError("messages", "is required")
	}
	return nil
}

// task turns the request into a task request, with the anthropic-beta
// values sent. It refuses what Tollgate does not carry, and what the
// Messages API itself refuses before a model runs, by path; count is a
// count_tokens request, which has no max_tokens.
func (r antRequest) task(hdr antHeader, count bool) (tasks.Request, antPaths, error) {
	var paths antPaths
	if r.unmodeled != nil {
		paths.carry = &antCarry{unmodeled: slices.Clone(r.unmodeled)}
		// The fields Tollgate shadows to refuse are, carried natively,
		// what the task request cannot say.
		for _, f := range []struct {
			name string
			v    json.RawMessage
		}{{"output_config", r.OutputConfig}, {"output_format", r.OutputFormat}} {
			if f.v != nil {
				paths.carry.unmodeled = append(paths.carry.unmodeled, f.name)
			}
		}
	}
	if err := r.known(count); err != nil {
		return tasks.Request{}, paths, err
	}
	chat := provider.Chat{Model: r.Model, Thinking: r.Thinking, CacheControl: r.CacheControl,
		AnthropicVersion: hdr.version, Betas: hdr.betas}
	if r.MaxTokens != nil {
		chat.MaxTokens = *r.MaxTokens
	}
	if t := r.Temperature; t != nil && (*t < 0 || *t > 1) {
		// Anthropic's range, narrower than OpenAI's 0-2: a value Anthropic
		// would refuse is refused here, whichever provider runs the call.
		return tasks.Request{}, paths, antFieldError("temperature", "must be between 0 and 1")
	}
	chat.Temperature, chat.TopP, chat.TopK = r.Temperature, r.TopP, r.TopK
	if len(r.StopSequences) > 0 {
		chat.Stop = provider.Stop(r.StopSequences)
	}
	if r.Metadata != nil {
		chat.User = r.Metadata.UserID
	}
	if r.System != nil {
		m, err := antSystem(*r.System)
		if err != nil {
			return tasks.Request{}, paths, err
		}
		if m != nil {
			chat.Messages = append(chat.Messages, *m)
			paths.system = true
			paths.msgs = append(paths.msgs, antMsgPath{at: "system", result: -1, parts: seq(len(m.Content.Parts))})
		}
	}
	if err := antMessages(r.Messages, &chat, &paths); err != nil {
		return tasks.Request{}, paths, err
	}
	if err := antTools(r.Tools, r.ToolChoice, &chat, &paths); err != nil {
		return tasks.Request{}, paths, err
	}
	return tasks.Request{Chat: chat}.Canonical(), paths, nil
}

func seq(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

// antSystem is the system prompt as a system message: a string, or text
// blocks (with their cache_control) as parts; nil for an empty one.
func antSystem(c anthropicwire.Content) (*provider.Message, error) {
	if c.Text != nil {
		if *c.Text == "" {
			return nil, nil
		}
		return &provider.Message{Role: "system", Content: provider.Text(*c.Text)}, nil
	}
	if len(c.Blocks) == 0 {
		return nil, nil
	}
	parts := make([]provider.Part, len(c.Blocks))
	for j, b := range c.Blocks {
		at := fmt.Sprintf("system[%d]", j)
		if b.Type != "text" {
			return nil, antFieldError(at+".type", `must be "text": the system prompt is text`)
		}
		p, err := antText(at, b)
		if err != nil {
			return nil, err
		}
		parts[j] = p
	}
	return &provider.Message{Role: "system", Content: provider.Content{Parts: parts}}, nil
}

// antMessages appends the conversation to chat: a user message's
// tool_result blocks become tool messages, then what else it holds a user
// message; an assistant message's thinking, redacted thinking and text
// blocks become its parts, its tool_use blocks its tool calls.
func antMessages(msgs []anthropicwire.Message, chat *provider.Chat, paths *antPaths) error {
	var calls map[string]bool // the tool_use ids of the previous assistant message
	for i, m := range msgs {
		at := fmt.Sprintf("messages[%d]", i)
		if m.Content == nil {
			return antFieldError(at+".content", "is required")
		}
		switch m.Role {
		case "user":
			if err := antUser(at, *m.Content, calls, chat, paths); err != nil {
				return err
			}
			calls = nil
		case "assistant":
			msg, path, ids, err := antAssistant(at, *m.Content, paths)
			if err != nil {
				return err
			}
			chat.Messages = append(chat.Messages, msg)
			paths.msgs = append(paths.msgs, path)
			calls = ids
		default:
			return antFieldError(at+".role", `must be "user" or "assistant"`)
		}
	}
	return nil
}

func antUser(at string, c anthropicwire.Content, calls map[string]bool, chat *provider.Chat, paths *antPaths) error {
	if c.Text != nil {
		chat.Messages = append(chat.Messages, provider.Message{Role: "user", Content: provider.Text(*c.Text)})
		paths.msgs = append(paths.msgs, antMsgPath{at: at, result: -1})
		return nil
	}
	if len(c.Blocks) == 0 {
		return antFieldError(at+".content", "must hold at least one block")
	}
	rest := antMsgPath{at: at, result: -1}
	var parts []provider.Part
	for j, b := range c.Blocks {
		bat := fmt.Sprintf("%s.content[%d]", at, j)
		switch b.Type {
		case "tool_result":
			if len(parts) > 0 {
				return antFieldError(bat, "tool_result blocks must come before any other block of the message")
			}
			msg, err := antToolResult(bat, b, calls)
			if err != nil {
				return err
			}
			chat.Messages = append(chat.Messages, msg)
			paths.msgs = append(paths.msgs, antMsgPath{at: at, result: j, parts: seq(len(msg.Content.Parts))})
		case "text", "image":
			p, err := antPart(bat, b)
			if err != nil {
				return err
			}
			parts = append(parts, p)
			rest.parts = append(rest.parts, j)
		case "tool_use", "thinking", "redacted_thinking":
			return antFieldError(bat+".type", b.Type+" blocks come from the assistant")
		default:
			if !paths.skip(bat) {
				return antBlockRefused(bat, b.Type)
			}
		}
	}
	if parts != nil {
		chat.Messages = append(chat.Messages, provider.Message{Role: "user", Content: provider.Content{Parts: parts}})
		paths.msgs = append(paths.msgs, rest)
	}
	return nil
}

// antBlockRefused refuses a block type Tollgate does not carry.
func antBlockRefused(at, typ string) error {
	switch typ {
	case "document", "search_result", "server_tool_use", "web_search_tool_result", "web_fetch_tool_result",
		"code_execution_tool_result", "bash_code_execution_tool_result", "text_editor_code_execution_tool_result",
		"mcp_tool_use", "mcp_tool_result", "container_upload", "tool_reference":
		return antFieldError(at+".type", fmt.Sprintf("Tollgate does not carry %s blocks", typ))
	}
	return antFieldError(at+".type", "must be text, image, tool_use, tool_result, thinking or redacted_thinking")
}

// antToolResult is a tool_result block as a tool message.
func antToolResult(at string, b anthropicwire.Block, calls map[string]bool) (provider.Message, error) {
	if err := antOnly(at, b, "tool_use_id", "content", "is_error", "cache_control"); err != nil {
		return provider.Message{}, err
	}
	switch {
	case b.ToolUseID == nil || *b.ToolUseID == "":
		return provider.Message{}, antFieldError(at+".tool_use_id", "is required")
	case !calls[*b.ToolUseID]:
		return provider.Message{}, antFieldError(at+".tool_use_id", "names no tool_use block of the previous assistant message")
	}
	msg := provider.Message{Role: "tool", ToolCallID: *b.ToolUseID, CacheControl: b.CacheControl}
	if b.IsError != nil {
		msg.IsError = *b.IsError
	}
	if c := b.Content; c != nil {
		if c.Text != nil {
			msg.Content = provider.Text(*c.Text)
			return msg, nil
		}
		parts := []provider.Part{}
		for j, inner := range c.Blocks {
			iat := fmt.Sprintf("%s.content[%d]", at, j)
			if inner.Type != "text" && inner.Type != "image" {
				return provider.Message{}, antFieldError(iat+".type", "must be text or image in a tool_result")
			}
			p, err := antPart(iat, inner)
			if err != nil {
				return provider.Message{}, err
			}
			parts = append(parts, p)
		}
		if len(parts) > 0 {
			msg.Content = provider.Content{Parts: parts}
		}
	}
	return msg, nil
}

// antAssistant is an assistant message, and the ids of its tool calls.
// Its tool_use blocks must come last: the task request keeps an
// assistant's calls after its other blocks.
func antAssistant(at string, c anthropicwire.Content, paths *antPaths) (provider.Message, antMsgPath, map[string]bool, error) {
	a := antAssistantMsg{at: at, path: antMsgPath{at: at, result: -1}, msg: provider.Message{Role: "assistant"}, ids: map[string]bool{}, paths: paths}
	if c.Text != nil {
		a.msg.Content = provider.Text(*c.Text)
		return a.msg, a.path, nil, nil
	}
	for j, b := range c.Blocks {
		if err := a.block(j, b); err != nil {
			return a.msg, a.path, nil, err
		}
	}
	if len(c.Blocks) == 0 {
		return a.msg, a.path, nil, antFieldError(at+".content", "must hold at least one block")
	}
	if a.parts != nil {
		a.msg.Content = provider.Content{Parts: a.parts}
	}
	return a.msg, a.path, a.ids, nil
}

// antAssistantMsg is an assistant message being read block by block.
type antAssistantMsg struct {
	at    string
	msg   provider.Message
	path  antMsgPath
	ids   map[string]bool // the ids of its tool calls
	parts []provider.Part
	paths *antPaths
}

// block reads the j-th block, b, by its type.
func (a *antAssistantMsg) block(j int, b anthropicwire.Block) error {
	bat := fmt.Sprintf("%s.content[%d]", a.at, j)
	if b.Type != "tool_use" && len(a.msg.ToolCalls) > 0 {
		return antFieldError(bat, "Tollgate carries an assistant message's tool_use blocks after its other blocks; move this block before them")
	}
	var p provider.Part
	var err error
	switch b.Type {
	case "text":
		p, err = antText(bat, b)
	case "thinking":
		p, err = antThinking(bat, b)
	case "redacted_thinking":
		p, err = antRedactedThinking(bat, b)
	case "tool_use":
		return a.toolUse(j, bat, b)
	case "image":
		return antFieldError(bat+".type", "images come from the user")
	case "tool_result":
		return antFieldError(bat+".type", "tool_result blocks come from the user")
	default:
		if a.paths.skip(bat) {
			return nil
		}
		return antBlockRefused(bat, b.Type)
	}
	if err != nil {
		return err
	}
	a.parts = append(a.parts, p)
	a.path.parts = append(a.path.parts, j)
	return nil
}

// toolUse reads a tool_use block, the j-th at bat; its id must be new.
func (a *antAssistantMsg) toolUse(j int, bat string, b anthropicwire.Block) error {
	tc, err := antToolUse(bat, b)
	if err != nil {
		return err
	}
	if a.ids[tc.ID] {
		return antFieldError(bat+".id", "repeats the id of an earlier tool_use block")
	}
	a.ids[tc.ID] = true
	a.msg.ToolCalls = append(a.msg.ToolCalls, tc)
	a.path.calls = append(a.path.calls, j)
	return nil
}

// antThinking is a thinking block passed back, as the model gave it.
func antThinking(at string, b anthropicwire.Block) (provider.Part, error) {
	if err := antOnly(at, b, "thinking", "signature"); err != nil {
		return provider.Part{}, err
	}
	if b.Thinking == nil || b.Signature == nil {
		return provider.Part{}, antFieldError(at, "a thinking block needs its thinking and signature, as the model gave them")
	}
	return provider.Part{Type: provider.PartThinking, Thinking: *b.Thinking, Signature: *b.Signature}, nil
}

// antRedactedThinking is a redacted thinking block passed back.
func antRedactedThinking(at string, b anthropicwire.Block) (provider.Part, error) {
	if err := antOnly(at, b, "data"); err != nil {
		return provider.Part{}, err
	}
	if b.Data == nil || *b.Data == "" {
		return provider.Part{}, antFieldError(at+".data", "is required")
	}
	return provider.Part{Type: provider.PartRedactedThinking, Data: *b.Data}, nil
}

func antToolUse(at string, b anthropicwire.Block) (provider.ToolCall, error) {
	if err := antOnly(at, b, "id", "name", "input", "cache_control"); err != nil {
		return provider.ToolCall{}, err
	}
	switch {
	case b.ID == nil || *b.ID == "":
		return provider.ToolCall{}, antFieldError(at+".id", "is required")
	case b.Name == nil || *b.Name == "":
		return provider.ToolCall{}, antFieldError(at+".name", "is required")
	}
	var args bytes.Buffer
	in := bytes.TrimSpace(b.Input)
	if len(in) == 0 || in[0] != '{' || json.Compact(&args, in) != nil {
		return provider.ToolCall{}, antFieldError(at+".input", "must be an object")
	}
	return provider.ToolCall{ID: *b.ID, Type: "function", CacheControl: b.CacheControl,
		Function: provider.FunctionCall{Name: *b.Name, Arguments: args.String()}}, nil
}

// antPart is a text or image block as a part.
func antPart(at string, b anthropicwire.Block) (provider.Part, error) {
	if b.Type == "text" {
		return antText(at, b)
	}
	if err := antOnly(at, b, "source", "cache_control"); err != nil {
		return provider.Part{}, err
	}
	u, err := antImageURL(at+".source", b.Source)
	if err != nil {
		return provider.Part{}, err
	}
	return provider.Part{Type: provider.PartImage, ImageURL: &provider.ImageURL{URL: u}, CacheControl: b.CacheControl}, nil
}

func antText(at string, b anthropicwire.Block) (provider.Part, error) {
	if err := antOnly(at, b, "text", "cache_control"); err != nil {
		return provider.Part{}, err
	}
	if b.Text == nil {
		return provider.Part{}, antFieldError(at+".text", "is required")
	}
	return provider.Part{Type: provider.PartText, Text: *b.Text, CacheControl: b.CacheControl}, nil
}

// antImageURL is an image source as the task request's image URL: a
// base64 source as a data URL, a url source as its URL. File sources
// (Anthropic's Files API) are not carried: no other provider can read
// them.
func antImageURL(at string, s *anthropicwire.ImageSource) (string, error) {
	if s == nil {
		return "", antFieldError(at, "is required")
	}
	if s.FileID != "" {
		// The wire type reads file_id for the fake provider; Tollgate
		// takes no file source, and knows no such field.
		return "", badRequest(fmt.Sprintf("Unknown field %q.", at+".file_id"), tasks.FieldError{Field: at + ".file_id", Message: "unknown field"})
	}
	switch s.Type {
	case "base64":
		if !slices.Contains(anthropicwire.ImageTypes, s.MediaType) {
			return "", antFieldError(at+".media_type", "must be "+strings.Join(anthropicwire.ImageTypes, ", "))
		}
		if _, err := base64.StdEncoding.DecodeString(s.Data); err != nil || s.Data == "" || s.URL != "" {
			return "", antFieldError(at+".data", "must be the image in base64")
		}
		return "data:" + s.MediaType + ";base64," + s.Data, nil
	case "url":
		u, err := url.Parse(s.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || s.MediaType != "" || s.Data != "" {
			return "", antFieldError(at+".url", "must be an http(s) URL")
		}
		return s.URL, nil
	case "file":
		return "", antFieldError(at+".type", "Tollgate does not carry file sources (Anthropic's Files API)")
	}
	return "", antFieldError(at+".type", "must be base64 or url")
}

// antOnly refuses a field of b that its type does not have, by name.
func antOnly(at string, b anthropicwire.Block, allowed ...string) error {
	set := map[string]bool{
		"text": b.Text != nil, "source": b.Source != nil, "id": b.ID != nil, "name": b.Name != nil,
		"input": b.Input != nil, "tool_use_id": b.ToolUseID != nil, "content": b.Content != nil,
		"is_error": b.IsError != nil, "thinking": b.Thinking != nil, "signature": b.Signature != nil,
		"data": b.Data != nil, "cache_control": b.CacheControl != nil,
	}
	for _, f := range slices.Sorted(maps.Keys(set)) {
		if set[f] && !slices.Contains(allowed, f) {
			return antFieldError(at+"."+f, "is not a field of a "+b.Type+" block")
		}
	}
	return nil
}

// antTools sets chat's tools and tool choice. Anthropic's server tools
// (web search, code execution, ...) run on Anthropic's side and are not
// carried.
func antTools(tools []anthropicwire.Tool, choice *anthropicwire.ToolChoice, chat *provider.Chat, paths *antPaths) error {
	for i, t := range tools {
		at := fmt.Sprintf("tools[%d]", i)
		if t.Type != nil && *t.Type != "custom" {
			if paths.skip(at) {
				continue
			}
			return antFieldError(at+".type", "Tollgate carries custom (client) tools only")
		}
		if t.InputSchema == nil {
			return antFieldError(at+".input_schema", "is required")
		}
		chat.Tools = append(chat.Tools, provider.Tool{Type: "function", CacheControl: t.CacheControl,
			Function: provider.FunctionDef{Name: t.Name, Description: t.Description, Parameters: t.InputSchema, Strict: t.Strict}})
	}
	if choice == nil {
		return nil
	}
	disable := choice.DisableParallelToolUse
	if choice.Name != "" && choice.Type != "tool" {
		return antFieldError("tool_choice.name", "is only allowed with type tool")
	}
	switch choice.Type {
	case "auto":
		chat.ToolChoice = &provider.ToolChoice{Mode: provider.ToolChoiceAuto}
	case "any":
		chat.ToolChoice = &provider.ToolChoice{Mode: provider.ToolChoiceRequired}
	case "tool":
		if choice.Name == "" {
			return antFieldError("tool_choice.name", "is required with type tool")
		}
		chat.ToolChoice = &provider.ToolChoice{Function: choice.Name}
	case "none":
		if disable {
			return antFieldError("tool_choice.disable_parallel_tool_use", "is not allowed with type none")
		}
		chat.ToolChoice = &provider.ToolChoice{Mode: provider.ToolChoiceNone}
	default:
		return antFieldError("tool_choice.type", "must be auto, any, tool or none")
	}
	if disable {
		no := false
		chat.ParallelToolCalls = &no
	}
	return nil
}

// antRenamed are the task request's top-level fields the Messages API
// names otherwise.
var antRenamed = map[string]string{
	"stop": "stop_sequences", "user": "metadata.user_id", "parallel_tool_calls": "tool_choice.disable_parallel_tool_use",
	"tool_choice.function.name": "tool_choice.name", "anthropic_beta": "anthropic-beta",
}

// antField is a task request's field path as the Messages request names
// it (see antPaths); a path it does not know is returned as it is.
func (p antPaths) antField(path string) string {
	for from, to := range antRenamed {
		if path == from || strings.HasPrefix(path, from+"[") || strings.HasPrefix(path, from+".") {
			return to + path[len(from):]
		}
	}
	var i int
	if n, _ := fmt.Sscanf(path, "tools[%d]", &i); n == 1 {
		rest := path[len(fmt.Sprintf("tools[%d]", i)):]
		rest = strings.Replace(rest, ".function.parameters", ".input_schema", 1)
		rest = strings.Replace(rest, ".function.", ".", 1)
		return fmt.Sprintf("tools[%d]%s", i, rest)
	}
	if n, _ := fmt.Sscanf(path, "messages[%d]", &i); n != 1 || i < 0 || i >= len(p.msgs) {
		return path
	}
	return p.msgs[i].field(path[len(fmt.Sprintf("messages[%d]", i)):])
}

// field is rest, a path within the task request's message, as the
// Messages request names it within the message or block m came from.
func (m antMsgPath) field(rest string) string {
	content := ".content"
	if m.at == "system" {
		content = ""
	}
	if m.result >= 0 {
		content = fmt.Sprintf(".content[%d].content", m.result)
	}
	var j int
	switch {
	case strings.HasPrefix(rest, ".content["):
		if n, _ := fmt.Sscanf(rest, ".content[%d]", &j); n == 1 {
			tail := rest[len(fmt.Sprintf(".content[%d]", j)):]
			tail = strings.Replace(tail, ".image_url.url", ".source", 1)
			tail = strings.Replace(tail, ".image_url", ".source", 1)
			return m.at + content + blockIndex(m.parts, j) + tail
		}
	case strings.HasPrefix(rest, ".tool_calls["):
		if n, _ := fmt.Sscanf(rest, ".tool_calls[%d]", &j); n == 1 {
			tail := rest[len(fmt.Sprintf(".tool_calls[%d]", j)):]
			tail = strings.Replace(tail, ".function.arguments", ".input", 1)
			tail = strings.Replace(tail, ".function.", ".", 1)
			return m.at + ".content" + blockIndex(m.calls, j) + tail
		}
	case m.result >= 0 && (rest == ".tool_call_id" || rest == ".is_error" || rest == ".cache_control" || strings.HasPrefix(rest, ".cache_control.")):
		r := strings.Replace(rest, ".tool_call_id", ".tool_use_id", 1)
		return fmt.Sprintf("%s.content[%d]%s", m.at, m.result, r)
	case rest == ".content" && (m.result >= 0 || m.at == "system"):
		return m.at + content
	}
	return m.at + rest
}

// blockIndex is the index, in brackets, of the block the k-th entry of
// idx came from; k itself when idx has no such entry.
func blockIndex(idx []int, k int) string {
	if k >= 0 && k < len(idx) {
		return fmt.Sprintf("[%d]", idx[k])
	}
	return fmt.Sprintf("[%d]", k)
}

// antFields rewrites the field paths of a validation problem or a
// refusal by the client's names; other errors pass unchanged.
func (p antPaths) antFields(err error) error {
	var ve *tasks.ValidationError
	var re *tasks.RefusedError
	switch {
	case errors.As(err, &ve):
		out := &tasks.ValidationError{Fields: make([]tasks.FieldError, len(ve.Fields))}
		for i, f := range ve.Fields {
			out.Fields[i] = tasks.FieldError{Field: p.antField(f.Field), Message: f.Message}
		}
		return out
	case errors.As(err, &re) && re.Field != "" && !p.unmodeled(re.Field):
		to := p.antField(re.Field)
		return &tasks.RefusedError{Field: to, Code: re.Code, Message: strings.ReplaceAll(re.Message, re.Field, to)}
	}
	return err
}
