package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/google/uuid"

	"github.com/tollgate/tollgate/provider"
	"github.com/tollgate/tollgate/tasks"
)

// How a request of OpenAI's Responses API becomes a task request: its
// input items become chat messages (instructions first, a continued
// response's conversation next), its flat function tools and text.format
// the chat's tools and response_format, max_output_tokens the chat's
// max_completion_tokens. What chat cannot say (a field Tollgate does not
// model, a hosted or namespace tool, a reasoning item, include, a
// reasoning summary...) is listed by its JSON path in the chat's
// Native.Unmodeled, and the client's body rides along as Native: an
// OpenAI-kind provider is sent that body as it came (provider's
// openai_responses.go), a provider of another kind refuses the request
// at admission naming the first such field.

// respRequest is the body of POST /v1/responses.
type respRequest struct {
	Model              string             `json:"model"`
	Input              json.RawMessage    `json:"input"`
	Instructions       *string            `json:"instructions"`
	Tools              []json.RawMessage  `json:"tools"`
	ToolChoice         json.RawMessage    `json:"tool_choice"`
	ParallelToolCalls  *bool              `json:"parallel_tool_calls"`
	Text               *respTextConfig    `json:"text"`
	Reasoning          *respReasoning     `json:"reasoning"`
	MaxOutputTokens    *int               `json:"max_output_tokens"`
	Temperature        *float64           `json:"temperature"`
	TopP               *float64           `json:"top_p"`
	Metadata           map[string]string  `json:"metadata"`
	Store              *bool              `json:"store"`
	User               string             `json:"user"`
	SafetyIdentifier   string             `json:"safety_identifier"`
	PreviousResponseID string             `json:"previous_response_id"`
	Stream             bool               `json:"stream"`
	StreamOptions      *respStreamOptions `json:"stream_options"`
	Background         bool               `json:"background"`
	// PromptCacheKey and ServiceTier mean the same in chat completions:
	// passed on to OpenAI-kind providers, refused by name for others.
	PromptCacheKey *string `json:"prompt_cache_key"`
	ServiceTier    *string `json:"service_tier"`
	// Truncation "disabled" is OpenAI's default and Tollgate's only way:
	// a request too long for the model is refused, never cut.
	Truncation string `json:"truncation"`
	// Include asks for optional output; only a provider that is sent the
	// request natively produces it.
	Include []string `json:"include"`

	unknown map[string]json.RawMessage // the top-level members Tollgate does not model
}

func (r *respRequest) setPassthrough(extra map[string]json.RawMessage) { r.unknown = extra }

// respStreamOptions: Tollgate's events carry no obfuscation padding, so
// include_obfuscation changes nothing.
type respStreamOptions struct {
	IncludeObfuscation *bool `json:"include_obfuscation"`
}

type respTextConfig struct {
	Format    json.RawMessage `json:"format"`
	Verbosity string          `json:"verbosity"`
}

type respReasoning struct {
	Effort *string `json:"effort"`
	// Summary and GenerateSummary ask for reasoning summaries, which
	// chat completions do not return: only a provider sent the request
	// natively carries them.
	Summary         *string `json:"summary"`
	GenerateSummary *string `json:"generate_summary"`
}

// respFormat is text.format: text, json_object, or a flat json_schema.
type respFormat struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Schema      json.RawMessage `json:"schema"`
	Strict      *bool           `json:"strict"`
}

// respFunctionTool is Responses' flat function tool.
type respFunctionTool struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
	Strict      *bool           `json:"strict"`
}

// respToolChoice is tool_choice's object form.
type respToolChoice struct {
	Type string `json:"type"`
	Name string `json:"name"`
}

// The input items Tollgate carries. Their id and status say where an
// earlier output item came from when it is sent back; they ask nothing of
// the model, so they are read and not sent on.
type respMessageItem struct {
	Type    string          `json:"type"`
	ID      string          `json:"id"`
	Status  string          `json:"status"`
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

type respFunctionCallItem struct {
	Type      string `json:"type"`
	ID        string `json:"id"`
	Status    string `json:"status"`
	CallID    string `json:"call_id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

type respFunctionOutputItem struct {
	Type   string          `json:"type"`
	ID     string          `json:"id"`
	Status string          `json:"status"`
	CallID string          `json:"call_id"`
	Output json.RawMessage `json:"output"`
}

// respPart is one content part; which fields it may carry depends on its
// type (partFields).
type respPart struct {
	Type        string            `json:"type"`
	Text        string            `json:"text"`
	ImageURL    string            `json:"image_url"`
	Detail      string            `json:"detail"`
	FileID      string            `json:"file_id"`
	Refusal     string            `json:"refusal"`
	Annotations []json.RawMessage `json:"annotations"`
	Logprobs    []json.RawMessage `json:"logprobs"`
}

// partFields are the members each part type may have.
var partFields = map[string][]string{
	"input_text":  {"type", "text"},
	"input_image": {"type", "image_url", "detail", "file_id"},
	"output_text": {"type", "text", "annotations", "logprobs"},
	"refusal":     {"type", "refusal"},
}

// Bounds OpenAI sets on metadata.
const (
	maxMetadataPairs    = 16
	maxMetadataKeyLen   = 64
	maxMetadataValueLen = 512
)

// respCall is a decoded POST /v1/responses: the task request, where each
// of its messages came from (for naming a field a check refuses), and
// how the client is answered.
type respCall struct {
	req        tasks.Request
	origins    []string
	stream     bool
	background bool
	// previous is the continued response's task id ("" for none), read
	// by the handler (continueFrom) before the request is complete.
	previous string
	// unmodeled lists, as JSON paths, what the request holds that the
	// chat cannot say (provider.Native.Unmodeled).
	unmodeled []string
}

// decodeResponsesRequest reads and checks the body, up to what needs the
// database (previous_response_id).
func decodeResponsesRequest(raw []byte) (respCall, error) {
	var in respRequest
	if err := decodeBytes(raw, &in, scanLenient, ""); err != nil {
		return respCall{}, err
	}
	if err := in.refusal(); err != nil {
		return respCall{}, err
	}
	call, err := in.call()
	if err != nil {
		return respCall{}, err
	}
	call.unmodeled = append(in.unmodeledFields(), call.unmodeled...)
	return call, nativeBody(&call, raw)
}

// nativeBody sets the chat's Native: the client's body, without stream
// and background (how Tollgate answers, which the adapter decides), and
// what it holds that the chat cannot say. A continued response's
// conversation is Tollgate's to expand, into the chat alone: it goes
// without a native body, and one that needs it is refused by name.
func nativeBody(call *respCall, raw []byte) error {
	if call.previous != "" {
		if len(call.unmodeled) > 0 {
			return fieldErr("previous_response_id", fmt.Sprintf("cannot be combined with %s, which only a provider sent the request as it came can carry: send the whole conversation as input", call.unmodeled[0]))
		}
		return nil
	}
	body, err := provider.SpliceMember(raw, "stream", nil)
	if err == nil {
		body, err = provider.SpliceMember(body, "background", nil)
	}
	if err != nil {
		return fieldErr("", "must be a JSON object")
	}
	call.req.Native = &provider.Native{API: provider.APIOpenAIResponses, Body: body, Unmodeled: call.unmodeled}
	return nil
}

// unmodeledFields lists the request's top-level fields the chat cannot
// say: the members Tollgate does not model, in name order, then the
// reasoning summary, include and truncation auto.
func (in respRequest) unmodeledFields() []string {
	out := slices.Sorted(maps.Keys(in.unknown))
	if rs := in.Reasoning; rs != nil && rs.Summary != nil {
		out = append(out, "reasoning.summary")
	}
	if rs := in.Reasoning; rs != nil && rs.GenerateSummary != nil {
		out = append(out, "reasoning.generate_summary")
	}
	if len(in.Include) > 0 {
		out = append(out, "include")
	}
	if in.Truncation != "" && in.Truncation != "disabled" {
		out = append(out, "truncation")
	}
	return out
}

// refusal names the first value the request asks for that Tollgate does
// not carry, or a value out of OpenAI's bounds.
func (in respRequest) refusal() error {
	switch {
	case in.Background && in.Store != nil && !*in.Store:
		return fieldErr("store", "must be true with background: a background response is kept to be retrieved")
	case in.MaxOutputTokens != nil && *in.MaxOutputTokens < 1:
		return fieldErr("max_output_tokens", fmt.Sprintf("must be between 1 and %d", tasks.MaxMaxTokens))
	}
	return checkMetadata(in.Metadata)
}

// call translates the request into a task request.
func (in respRequest) call() (respCall, error) {
	call := respCall{stream: in.Stream, background: in.Background}
	r := tasks.Request{}
	r.Model = in.Model
	conv := &tasks.Conversation{Background: in.Background, Unstored: in.Store != nil && !*in.Store}
	if in.Instructions != nil && *in.Instructions != "" {
		// OpenAI inserts instructions as a system message; every
		// provider kind carries that role.
		r.Messages = append(r.Messages, provider.Message{Role: "system", Content: provider.Text(*in.Instructions)})
		call.origins = append(call.origins, "instructions")
		conv.Instructions = true
	}
	origins, err := inputMessages(in.Input)
	if err != nil {
		return respCall{}, err
	}
	r.Messages, call.origins = append(r.Messages, origins.msgs...), append(call.origins, origins.origins...)
	if in.PreviousResponseID != "" {
		id, ok := taskIDOfResponse(in.PreviousResponseID)
		if !ok {
			return respCall{}, responseNotFound("previous_response_id")
		}
		call.previous, conv.Previous = id, id
	}
	call.unmodeled = origins.unmodeled
	if err := in.tools(&call, &r); err != nil {
		return respCall{}, err
	}
	if in.Text != nil {
		if r.ResponseFormat, err = textFormat(in.Text.Format); err != nil {
			return respCall{}, err
		}
		r.Verbosity = in.Text.Verbosity
	}
	if in.Reasoning != nil && in.Reasoning.Effort != nil {
		r.ReasoningEffort = *in.Reasoning.Effort
	}
	if in.MaxOutputTokens != nil {
		r.MaxCompletionTokens = *in.MaxOutputTokens
	}
	r.Temperature, r.TopP = in.Temperature, in.TopP
	r.User, r.SafetyIdentifier = in.User, in.SafetyIdentifier
	if in.Metadata != nil {
		r.Metadata = make(map[string]any, len(in.Metadata))
		for k, v := range in.Metadata {
			r.Metadata[k] = v
		}
	}
	for name, v := range map[string]*string{"prompt_cache_key": in.PromptCacheKey, "service_tier": in.ServiceTier} {
		if v == nil {
			continue
		}
		if r.Extra == nil {
			r.Extra = map[string]json.RawMessage{}
		}
		r.Extra[name], _ = json.Marshal(*v)
	}
	r.Conversation = conv
	call.req = r
	return call, nil
}

// note lists path among what the chat cannot say.
func (c *respCall) note(path string) { c.unmodeled = append(c.unmodeled, path) }

// tools sets r's tools, tool choice and parallel_tool_calls, noting in
// call what of them the chat cannot say.
func (in respRequest) tools(call *respCall, r *tasks.Request) error {
	var err error
	for i, rawTool := range in.Tools {
		t, ok, err := functionTool(rawTool, fmt.Sprintf("tools[%d]", i), call.note)
		if err != nil {
			return err
		}
		if ok {
			r.Tools = append(r.Tools, t)
		}
	}
	if r.ToolChoice, err = toolChoice(in.ToolChoice, call.note); err != nil {
		return err
	}
	r.ParallelToolCalls = in.ParallelToolCalls
	if len(r.Tools) == 0 && len(in.Tools) > 0 {
		// Every tool is one chat cannot say: so is the choice among them.
		if r.ToolChoice != nil {
			r.ToolChoice = nil
			call.note("tool_choice")
		}
		if r.ParallelToolCalls != nil {
			r.ParallelToolCalls = nil
			call.note("parallel_tool_calls")
		}
	}
	return nil
}

// inputMessages turns input (a string, or a list of items) into chat
// messages, and names the input field each came from.
func inputMessages(raw json.RawMessage) (inputItems, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return inputItems{}, nil
	}
	if raw[0] == '"' {
		var text string
		if err := json.Unmarshal(raw, &text); err != nil {
			return inputItems{}, fieldErr("input", "must be a string or an array of input items")
		}
		return inputItems{msgs: []provider.Message{{Role: "user", Content: provider.Text(text)}}, origins: []string{"input"}}, nil
	}
	var items []json.RawMessage
	if raw[0] != '[' || json.Unmarshal(raw, &items) != nil {
		return inputItems{}, fieldErr("input", "must be a string or an array of input items")
	}
	var in inputItems
	for i, item := range items {
		if err := in.add(item, fmt.Sprintf("input[%d]", i)); err != nil {
			return inputItems{}, err
		}
	}
	return in, nil
}

// inputItems are the chat messages input items make, each with the input
// field it came from, and what of the items the chat cannot say.
type inputItems struct {
	msgs      []provider.Message
	origins   []string
	unmodeled []string
}

func (in *inputItems) note(path string) { in.unmodeled = append(in.unmodeled, path) }

// add appends the item at field at, by its type.
func (in *inputItems) add(item json.RawMessage, at string) error {
	head, _, err := objectHead(item, at, "type", "role")
	if err != nil {
		return err
	}
	switch typ := head["type"]; {
	case typ == "message" || (typ == "" && head["role"] != ""):
		m, err := messageItem(item, at, in.note)
		if err != nil {
			return err
		}
		in.append(m, at)
		return nil
	case typ == "function_call":
		return in.functionCall(item, at)
	case typ == "function_call_output":
		return in.functionOutput(item, at)
	case typ == "":
		return fieldErr(at+".type", "must be given (message, function_call or function_call_output)")
	}
	// A reasoning item, a hosted tool's call, ...: the chat has no place
	// for it, a provider sent the request natively has.
	in.note(at)
	return nil
}

func (in *inputItems) append(m provider.Message, at string) {
	in.msgs, in.origins = append(in.msgs, m), append(in.origins, at)
}

// functionCall adds a call of the model's. Calls of one turn, and the text
// before them, are one assistant message in a chat.
func (in *inputItems) functionCall(item json.RawMessage, at string) error {
	var fc respFunctionCallItem
	if err := decodeNoting(item, &fc, at, in.note); err != nil {
		return err
	}
	if fc.CallID == "" || fc.Name == "" {
		return fieldErr(at, "must name its call_id and name")
	}
	call := provider.ToolCall{ID: fc.CallID, Type: "function", Function: provider.FunctionCall{Name: fc.Name, Arguments: fc.Arguments}}
	if n := len(in.msgs); n > 0 && in.msgs[n-1].Role == "assistant" && strings.HasPrefix(in.origins[n-1], "input[") {
		in.msgs[n-1].ToolCalls = append(in.msgs[n-1].ToolCalls, call)
		return nil
	}
	in.append(provider.Message{Role: "assistant", ToolCalls: []provider.ToolCall{call}}, at)
	return nil
}

// functionOutput adds a call's result, as a tool message.
func (in *inputItems) functionOutput(item json.RawMessage, at string) error {
	var fo respFunctionOutputItem
	if err := decodeNoting(item, &fo, at, in.note); err != nil {
		return err
	}
	if fo.CallID == "" {
		return fieldErr(at+".call_id", "must name the call it answers")
	}
	content, err := toolOutput(fo.Output, at+".output", in.note)
	if err != nil {
		return err
	}
	in.append(provider.Message{Role: "tool", ToolCallID: fo.CallID, Content: content}, at)
	return nil
}

// messageItem is one message item as a chat message.
func messageItem(raw json.RawMessage, at string, note func(string)) (provider.Message, error) {
	var mi respMessageItem
	if err := decodeNoting(raw, &mi, at, note); err != nil {
		return provider.Message{}, err
	}
	switch mi.Role {
	case "user", "system", "developer", "assistant":
	default:
		return provider.Message{}, fieldErr(at+".role", "must be user, system, developer or assistant")
	}
	m := provider.Message{Role: mi.Role}
	c := mi.Content
	switch {
	case len(c) > 0 && c[0] == '"':
		var text string
		_ = json.Unmarshal(c, &text)
		m.Content = provider.Text(text)
		return m, nil
	case len(c) == 0 || c[0] != '[':
		return provider.Message{}, fieldErr(at+".content", "must be a string or an array of content parts")
	}
	var raws []json.RawMessage
	_ = json.Unmarshal(c, &raws)
	var text strings.Builder
	parts := []provider.Part{}
	for j, rp := range raws {
		pat := fmt.Sprintf("%s.content[%d]", at, j)
		p, ok, err := contentPart(rp, pat, note)
		if err != nil {
			return provider.Message{}, err
		}
		if !ok {
			// An empty text holds its place: the chat is never sent.
			parts = append(parts, provider.Part{Type: provider.PartText})
			continue
		}
		assistantPart := p.Type == "output_text" || p.Type == "refusal"
		if assistantPart != (mi.Role == "assistant") && !(mi.Role == "assistant" && p.Type == "input_text") {
			return provider.Message{}, fieldErr(pat+".type", fmt.Sprintf("%s is not a part of a %s message", p.Type, mi.Role))
		}
		switch p.Type {
		case "input_text":
			parts = append(parts, provider.Part{Type: provider.PartText, Text: p.Text})
			text.WriteString(p.Text)
		case "output_text":
			text.WriteString(p.Text)
		case "refusal":
			m.Refusal += p.Refusal
		case "input_image":
			parts = append(parts, provider.Part{Type: provider.PartImage, ImageURL: &provider.ImageURL{URL: p.ImageURL, Detail: p.Detail}})
		}
	}
	if mi.Role == "assistant" {
		// An assistant's text is one string in a chat.
		m.Content = provider.Text(text.String())
		return m, nil
	}
	m.Content = provider.Content{Parts: parts}
	return m, nil
}

// contentPart decodes one content part. A part of a type the chat has
// no place for (input_file, an image by file_id) is noted and reported
// not ok; so is a member its type does not have, annotations and
// logprobs, which are noted and left out of the chat.
func contentPart(raw json.RawMessage, at string, note func(string)) (respPart, bool, error) {
	_, members, err := objectHead(raw, at, "type")
	if err != nil {
		return respPart{}, false, err
	}
	var p respPart
	if err := decodeBytes(raw, &p, scanLenient, at); err != nil {
		return respPart{}, false, err
	}
	allowed, ok := partFields[p.Type]
	if !ok || (p.Type == "input_image" && p.FileID != "") {
		note(at)
		return respPart{}, false, nil
	}
	for _, name := range slices.Sorted(maps.Keys(members)) {
		if !slices.Contains(allowed, name) {
			note(at + "." + name)
		}
	}
	switch {
	case p.Type == "input_image" && p.ImageURL == "":
		return respPart{}, false, fieldErr(at+".image_url", "must be given")
	case len(p.Annotations) > 0:
		note(at + ".annotations")
	case len(p.Logprobs) > 0:
		note(at + ".logprobs")
	}
	return p, true, nil
}

// decodeNoting decodes the object raw, found at at, into dst, noting
// each member dst's type does not have.
func decodeNoting(raw json.RawMessage, dst any, at string, note func(string)) error {
	_, members, err := objectHead(raw, at)
	if err != nil {
		return err
	}
	fields := jsonFields(reflect.TypeOf(dst).Elem())
	for _, name := range slices.Sorted(maps.Keys(members)) {
		if _, ok := fields[name]; !ok {
			note(joinPath(at, name))
		}
	}
	return decodeBytes(raw, dst, scanLenient, at)
}

// toolOutput is a function_call_output's output: a string, or text parts.
func toolOutput(raw json.RawMessage, at string, note func(string)) (provider.Content, error) {
	switch {
	case len(raw) > 0 && raw[0] == '"':
		var text string
		_ = json.Unmarshal(raw, &text)
		return provider.Text(text), nil
	case len(raw) == 0 || raw[0] != '[':
		return provider.Content{}, fieldErr(at, "must be a string or an array of input_text parts")
	}
	var raws []json.RawMessage
	_ = json.Unmarshal(raw, &raws)
	parts := []provider.Part{}
	for j, rp := range raws {
		pat := fmt.Sprintf("%s[%d]", at, j)
		p, ok, err := contentPart(rp, pat, note)
		if err != nil {
			return provider.Content{}, err
		}
		if !ok {
			parts = append(parts, provider.Part{Type: provider.PartText})
			continue
		}
		if p.Type != "input_text" {
			return provider.Content{}, fieldErr(pat+".type", "must be input_text: a tool result carries text")
		}
		parts = append(parts, provider.Part{Type: provider.PartText, Text: p.Text})
	}
	return provider.Content{Parts: parts}, nil
}

// functionTool is one of tools as a chat tool, ok false for a tool the
// chat has no place for (a hosted tool such as web_search, a namespace of
// tools), which is noted. Responses' strict defaults to true, chat's to
// false, so an absent strict is sent as true.
func functionTool(raw json.RawMessage, at string, note func(string)) (provider.Tool, bool, error) {
	head, _, err := objectHead(raw, at, "type")
	if err != nil {
		return provider.Tool{}, false, err
	}
	if head["type"] != "function" {
		note(at)
		return provider.Tool{}, false, nil
	}
	var ft respFunctionTool
	if err := decodeNoting(raw, &ft, at, note); err != nil {
		return provider.Tool{}, false, err
	}
	strict := ft.Strict
	if strict == nil {
		yes := true
		strict = &yes
	}
	return provider.Tool{Type: "function", Function: provider.FunctionDef{Name: ft.Name, Description: ft.Description,
		Parameters: ft.Parameters, Strict: strict}}, true, nil
}

// toolChoice is tool_choice: a mode, or {"type": "function", "name"}; any
// other choice (a hosted tool, allowed_tools) is noted, and none in the
// chat.
func toolChoice(raw json.RawMessage, note func(string)) (*provider.ToolChoice, error) {
	switch {
	case len(raw) == 0 || string(raw) == "null":
		return nil, nil
	case raw[0] == '"':
		var mode string
		_ = json.Unmarshal(raw, &mode)
		return &provider.ToolChoice{Mode: mode}, nil
	case raw[0] != '{':
		return nil, fieldErr("tool_choice", `must be "none", "auto", "required" or {"type": "function", "name": ...}`)
	}
	head, _, err := objectHead(raw, "tool_choice", "type")
	if err != nil {
		return nil, err
	}
	if head["type"] != "function" {
		note("tool_choice")
		return nil, nil
	}
	var tc respToolChoice
	if err := decodeNoting(raw, &tc, "tool_choice", note); err != nil {
		return nil, err
	}
	if tc.Name == "" {
		return nil, fieldErr("tool_choice.name", "must name a function tool")
	}
	return &provider.ToolChoice{Function: tc.Name}, nil
}

// textFormat is text.format as a chat response_format.
func textFormat(raw json.RawMessage) (*provider.ResponseFormat, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	if raw[0] != '{' {
		return nil, fieldErr("text.format", "must be an object")
	}
	var f respFormat
	if err := decodeBytes(raw, &f, scanStrict, "text.format"); err != nil {
		return nil, err
	}
	switch f.Type {
	case provider.FormatText, provider.FormatJSONObject:
		if f.Name != "" || f.Schema != nil || f.Description != "" || f.Strict != nil {
			return nil, fieldErr("text.format", "takes name, description, schema and strict only with type json_schema")
		}
		return &provider.ResponseFormat{Type: f.Type}, nil
	case provider.FormatJSONSchema:
		return &provider.ResponseFormat{Type: f.Type, JSONSchema: &provider.JSONSchema{Name: f.Name,
			Description: f.Description, Schema: f.Schema, Strict: f.Strict}}, nil
	}
	return nil, fieldErr("text.format.type", "must be text, json_object or json_schema")
}

func checkMetadata(m map[string]string) error {
	if len(m) > maxMetadataPairs {
		return fieldErr("metadata", fmt.Sprintf("must hold at most %d pairs", maxMetadataPairs))
	}
	for k, v := range m {
		if len(k) > maxMetadataKeyLen || len(v) > maxMetadataValueLen {
			return fieldErr("metadata", fmt.Sprintf("keys must be at most %d characters and values at most %d", maxMetadataKeyLen, maxMetadataValueLen))
		}
	}
	return nil
}

// Response ids are "resp_" and the task id's 32 hex digits.
const respIDPrefix = "resp_"

func responseID(taskID string) string { return respIDPrefix + strings.ReplaceAll(taskID, "-", "") }

// taskIDOfResponse is the task id a response id names.
func taskIDOfResponse(id string) (string, bool) {
	hex, ok := strings.CutPrefix(id, respIDPrefix)
	if !ok || len(hex) != 32 {
		return "", false
	}
	u, err := uuid.Parse(hex)
	if err != nil {
		return "", false
	}
	return u.String(), true
}

// responseNotFound is OpenAI's 404 for a response id that names no
// response of the caller's (another owner's is not disclosed).
func responseNotFound(param string) error {
	fields := []tasks.FieldError{}
	if param != "" {
		fields = append(fields, tasks.FieldError{Field: param, Message: "names no response"})
	}
	return &apiError{status: http.StatusNotFound, code: "not_found", detail: "No response found with that id.", fields: fields}
}

// chatPaths maps the chat request's field paths that a check names to
// Responses' own.
var chatPaths = []struct {
	re   *regexp.Regexp
	repl string
}{
	{regexp.MustCompile(`^max_completion_tokens`), "max_output_tokens"},
	{regexp.MustCompile(`^response_format\.json_schema`), "text.format"},
	{regexp.MustCompile(`^response_format`), "text.format"},
	{regexp.MustCompile(`^reasoning_effort`), "reasoning.effort"},
	{regexp.MustCompile(`^verbosity`), "text.verbosity"},
	{regexp.MustCompile(`^(tools\[\d+\])\.function`), "$1"},
	{regexp.MustCompile(`^tool_choice\.function\.name`), "tool_choice.name"},
}

var messagePath = regexp.MustCompile(`^messages\[(\d+)\]`)

// respField names a field of the task request as the Responses request
// that made it calls it: a message by the input item it came from.
func respField(field string, origins []string) string {
	if field == "messages" {
		return "input"
	}
	if m := messagePath.FindStringSubmatch(field); m != nil {
		if i, err := strconv.Atoi(m[1]); err == nil && i < len(origins) {
			return origins[i]
		}
		return "input"
	}
	for _, p := range chatPaths {
		if p.re.MatchString(field) {
			return p.re.ReplaceAllString(field, p.repl)
		}
	}
	return field
}

// respFields renames the fields a validation or refusal names; any other
// error is returned as it is.
func respFields(err error, origins []string) error {
	var ve *tasks.ValidationError
	var re *tasks.RefusedError
	switch {
	case errors.As(err, &ve):
		out := &tasks.ValidationError{Fields: make([]tasks.FieldError, len(ve.Fields))}
		for i, f := range ve.Fields {
			out.Fields[i] = tasks.FieldError{Field: respField(f.Field, origins), Message: f.Message}
		}
		return out
	case errors.As(err, &re):
		out := *re
		if out.Field != "" {
			out.Field = respField(out.Field, origins)
		}
		return &out
	}
	return err
}

// objectHead reads the object at path, and those of its members named
// that say what it is (its type; an input item's role), each a string
// when present. What it is then decides how the rest is decoded.
func objectHead(raw json.RawMessage, at string, names ...string) (map[string]string, map[string]json.RawMessage, error) {
	var members map[string]json.RawMessage
	if len(raw) == 0 || raw[0] != '{' || json.Unmarshal(raw, &members) != nil {
		return nil, nil, fieldErr(at, "must be an object")
	}
	head := map[string]string{}
	for _, n := range names {
		v, ok := members[n]
		if !ok || string(v) == "null" {
			continue
		}
		var str string
		if json.Unmarshal(v, &str) != nil {
			return nil, nil, fieldErr(joinPath(at, n), "must be a string")
		}
		head[n] = str
	}
	return head, members, nil
}
