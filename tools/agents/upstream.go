package agents

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"
)

// ToolCommand is the shell command the upstream asks a client's shell
// tool to run, and ToolOutput what it prints: the output appears in no
// request until the tool has really run, so finding it in a later
// request proves the client ran the tool.
const (
	ToolCommand = "echo $((6*7))-tollgate-tool"
	ToolOutput  = "42-tollgate-tool"
	// FinalPrefix starts the upstream's final text, which quotes the tool
	// result it was sent.
	FinalPrefix = "The tool answered: "
)

// Call is one request the upstream received.
type Call struct {
	Path   string
	Header http.Header
	Body   []byte
}

// Upstream is a scripted model provider speaking OpenAI's chat
// completions and Responses and Anthropic's Messages, streamed or not.
// Its script is the agent loop's: a request whose conversation ends
// without a tool result, and that offers tools, is answered with a call
// of one of them (a shell tool when there is one, running ToolCommand)
// with arguments valid for its schema; a request ending with a tool
// result is answered with FinalPrefix and the result. It records every
// request.
type Upstream struct {
	mu    sync.Mutex
	calls []Call
	seq   int
}

// Calls returns a copy of the calls received on model endpoints, oldest
// first.
func (u *Upstream) Calls() []Call {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]Call(nil), u.calls...)
}

// Reset forgets the calls received.
func (u *Upstream) Reset() {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.calls = nil
}

func (u *Upstream) record(r *http.Request, body []byte) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.calls = append(u.calls, Call{Path: r.URL.Path, Header: r.Header.Clone(), Body: body})
	u.seq++
	return u.seq
}

// ServeHTTP routes by path; the query (Claude Code's ?beta=true) is
// ignored.
func (u *Upstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	path := strings.TrimSuffix(r.URL.Path, "/")
	if r.Method == http.MethodGet && strings.HasSuffix(path, "/models") {
		writeJSONBody(w, map[string]any{"object": "list", "data": []map[string]any{
			{"id": "gpt-5", "object": "model", "created": 0, "owned_by": "upstream"},
			{"id": "claude-sonnet-4-5", "object": "model", "created": 0, "owned_by": "upstream", "type": "model", "display_name": "claude-sonnet-4-5"},
		}})
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if strings.HasSuffix(path, "/messages/count_tokens") {
		writeJSONBody(w, map[string]int{"input_tokens": len(body)/4 + 1})
		return
	}
	var req map[string]any
	if err := json.Unmarshal(body, &req); err != nil {
		http.Error(w, "upstream: body is not a JSON object: "+err.Error(), http.StatusBadRequest)
		return
	}
	n := u.record(r, body)
	stream, _ := req["stream"].(bool)
	switch {
	case strings.HasSuffix(path, "/chat/completions"):
		u.chat(w, req, stream, n)
	case strings.HasSuffix(path, "/responses"):
		u.responses(w, req, stream, n)
	case strings.HasSuffix(path, "/messages"):
		u.messages(w, req, stream, n)
	default:
		http.Error(w, "upstream: no such endpoint "+path, http.StatusNotFound)
	}
}

// turn is the upstream's answer to one request: a tool call or text.
type turn struct {
	tool *toolCall
	text string
	stop string // an Anthropic stop sequence the text ended on
}

type toolCall struct {
	id, name string
	args     []byte
}

// decideTurn applies the script to what a request holds.
func decideTurn(toolResult string, hasResult bool, tools []toolDef, n int) turn {
	if hasResult {
		return turn{text: FinalPrefix + strings.TrimSpace(toolResult)}
	}
	if len(tools) == 0 {
		return turn{text: "ok"}
	}
	t := pickTool(tools)
	return turn{tool: &toolCall{id: fmt.Sprintf("call_%06d", n), name: t.name, args: argsFor(t.name, t.schema)}}
}

func usage(req map[string]any) (in, out int) {
	b, _ := json.Marshal(req)
	return len(b)/4 + 1, 12
}

// chat answers OpenAI's chat completions.
func (u *Upstream) chat(w http.ResponseWriter, req map[string]any, stream bool, n int) {
	result, has := chatToolResult(req)
	tr := decideTurn(result, has, chatTools(req), n)
	model, _ := req["model"].(string)
	in, out := usage(req)
	id := fmt.Sprintf("chatcmpl-%06d", n)
	msg := map[string]any{"role": "assistant", "content": nil}
	finish := "stop"
	if tr.tool != nil {
		finish = "tool_calls"
		msg["tool_calls"] = []map[string]any{{"id": tr.tool.id, "type": "function",
			"function": map[string]any{"name": tr.tool.name, "arguments": string(tr.tool.args)}}}
	} else {
		msg["content"] = tr.text
	}
	u1 := map[string]any{"prompt_tokens": in, "completion_tokens": out, "total_tokens": in + out}
	if !stream {
		writeJSONBody(w, map[string]any{"id": id, "object": "chat.completion", "created": time.Now().Unix(), "model": model,
			"choices": []map[string]any{{"index": 0, "message": msg, "finish_reason": finish}}, "usage": u1})
		return
	}
	s := newSSE(w)
	chunk := func(delta map[string]any, fin any, us any) {
		c := map[string]any{"id": id, "object": "chat.completion.chunk", "created": time.Now().Unix(), "model": model,
			"choices": []map[string]any{{"index": 0, "delta": delta, "finish_reason": fin}}}
		if us != nil {
			c["usage"] = us
		}
		s.data(c)
	}
	chunk(map[string]any{"role": "assistant", "content": ""}, nil, nil)
	if tr.tool != nil {
		chunk(map[string]any{"tool_calls": []map[string]any{{"index": 0, "id": tr.tool.id, "type": "function",
			"function": map[string]any{"name": tr.tool.name, "arguments": ""}}}}, nil, nil)
		chunk(map[string]any{"tool_calls": []map[string]any{{"index": 0, "function": map[string]any{"arguments": string(tr.tool.args)}}}}, nil, nil)
	} else {
		chunk(map[string]any{"content": tr.text}, nil, nil)
	}
	chunk(map[string]any{}, finish, nil)
	if opts, _ := req["stream_options"].(map[string]any); opts != nil && opts["include_usage"] == true {
		s.data(map[string]any{"id": id, "object": "chat.completion.chunk", "created": time.Now().Unix(), "model": model,
			"choices": []any{}, "usage": u1})
	}
	s.raw("", "[DONE]")
}

// responses answers OpenAI's Responses API. When include asks for it, a
// reasoning item carrying encrypted content comes first, as reasoning
// models send it with store false.
func (u *Upstream) responses(w http.ResponseWriter, req map[string]any, stream bool, n int) {
	result, has := responsesToolResult(req)
	tr := decideTurn(result, has, responsesTools(req), n)
	model, _ := req["model"].(string)
	in, out := usage(req)
	var items []map[string]any
	if includes(req, "reasoning.encrypted_content") {
		items = append(items, map[string]any{"type": "reasoning", "id": fmt.Sprintf("rs_%06d", n), "summary": []any{},
			"encrypted_content": fmt.Sprintf("upstream-encrypted-reasoning-%06d", n)})
	}
	if tr.tool != nil {
		items = append(items, map[string]any{"type": "function_call", "id": fmt.Sprintf("fc_%06d", n), "call_id": tr.tool.id,
			"name": tr.tool.name, "arguments": string(tr.tool.args), "status": "completed"})
	} else {
		items = append(items, map[string]any{"type": "message", "id": fmt.Sprintf("msg_%06d", n), "role": "assistant", "status": "completed",
			"content": []map[string]any{{"type": "output_text", "text": tr.text, "annotations": []any{}}}})
	}
	resp := func(status string, output []map[string]any) map[string]any {
		r := map[string]any{"id": fmt.Sprintf("resp_%06d", n), "object": "response", "created_at": time.Now().Unix(), "status": status,
			"model": model, "output": output, "parallel_tool_calls": true, "tool_choice": "auto", "tools": []any{},
			"usage": nil, "error": nil, "incomplete_details": nil}
		if status == "completed" {
			r["usage"] = map[string]any{"input_tokens": in, "output_tokens": out, "total_tokens": in + out,
				"input_tokens_details": map[string]int{"cached_tokens": 0}, "output_tokens_details": map[string]int{"reasoning_tokens": 4}}
		}
		return r
	}
	if !stream {
		writeJSONBody(w, resp("completed", items))
		return
	}
	s := newSSE(w)
	seq := 0
	ev := func(typ string, v map[string]any) {
		v["type"], v["sequence_number"] = typ, seq
		seq++
		s.event(typ, v)
	}
	ev("response.created", map[string]any{"response": resp("in_progress", []map[string]any{})})
	ev("response.in_progress", map[string]any{"response": resp("in_progress", []map[string]any{})})
	for i, it := range items {
		added := map[string]any{}
		for k, v := range it {
			added[k] = v
		}
		switch it["type"] {
		case "function_call":
			added["arguments"], added["status"] = "", "in_progress"
			ev("response.output_item.added", map[string]any{"output_index": i, "item": added})
			ev("response.function_call_arguments.delta", map[string]any{"output_index": i, "item_id": it["id"], "delta": it["arguments"]})
			ev("response.function_call_arguments.done", map[string]any{"output_index": i, "item_id": it["id"], "arguments": it["arguments"]})
		case "message":
			added["content"], added["status"] = []any{}, "in_progress"
			ev("response.output_item.added", map[string]any{"output_index": i, "item": added})
			part := map[string]any{"type": "output_text", "text": "", "annotations": []any{}}
			ev("response.content_part.added", map[string]any{"output_index": i, "item_id": it["id"], "content_index": 0, "part": part})
			ev("response.output_text.delta", map[string]any{"output_index": i, "item_id": it["id"], "content_index": 0, "delta": tr.text, "logprobs": []any{}})
			ev("response.output_text.done", map[string]any{"output_index": i, "item_id": it["id"], "content_index": 0, "text": tr.text, "logprobs": []any{}})
			ev("response.content_part.done", map[string]any{"output_index": i, "item_id": it["id"], "content_index": 0,
				"part": map[string]any{"type": "output_text", "text": tr.text, "annotations": []any{}}})
		default:
			ev("response.output_item.added", map[string]any{"output_index": i, "item": added})
		}
		ev("response.output_item.done", map[string]any{"output_index": i, "item": it})
	}
	ev("response.completed", map[string]any{"response": resp("completed", items)})
}

// messages answers Anthropic's Messages API. A final text ends on the
// request's first stop sequence when it has one, as a model stopping
// there reports it.
func (u *Upstream) messages(w http.ResponseWriter, req map[string]any, stream bool, n int) {
	result, has := messagesToolResult(req)
	tr := decideTurn(result, has, messagesTools(req), n)
	if seqs, _ := req["stop_sequences"].([]any); len(seqs) > 0 && tr.tool == nil {
		tr.stop, _ = seqs[0].(string)
	}
	model, _ := req["model"].(string)
	in, out := usage(req)
	id := fmt.Sprintf("msg_%06d", n)
	stopReason, stopSeq := "end_turn", any(nil)
	var block map[string]any
	switch {
	case tr.tool != nil:
		stopReason = "tool_use"
		block = map[string]any{"type": "tool_use", "id": "toolu_" + tr.tool.id, "name": tr.tool.name, "input": json.RawMessage(tr.tool.args)}
	default:
		if tr.stop != "" {
			stopReason, stopSeq = "stop_sequence", tr.stop
		}
		block = map[string]any{"type": "text", "text": tr.text}
	}
	if !stream {
		writeJSONBody(w, map[string]any{"id": id, "type": "message", "role": "assistant", "model": model,
			"content": []any{block}, "stop_reason": stopReason, "stop_sequence": stopSeq,
			"usage": map[string]int{"input_tokens": in, "output_tokens": out}})
		return
	}
	s := newSSE(w)
	s.event("message_start", map[string]any{"type": "message_start", "message": map[string]any{"id": id, "type": "message",
		"role": "assistant", "model": model, "content": []any{}, "stop_reason": nil, "stop_sequence": nil,
		"usage": map[string]int{"input_tokens": in, "output_tokens": 1}}})
	s.event("ping", map[string]any{"type": "ping"})
	if tr.tool != nil {
		s.event("content_block_start", map[string]any{"type": "content_block_start", "index": 0,
			"content_block": map[string]any{"type": "tool_use", "id": "toolu_" + tr.tool.id, "name": tr.tool.name, "input": map[string]any{}}})
		s.event("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0,
			"delta": map[string]any{"type": "input_json_delta", "partial_json": string(tr.tool.args)}})
	} else {
		s.event("content_block_start", map[string]any{"type": "content_block_start", "index": 0,
			"content_block": map[string]any{"type": "text", "text": ""}})
		s.event("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0,
			"delta": map[string]any{"type": "text_delta", "text": tr.text}})
	}
	s.event("content_block_stop", map[string]any{"type": "content_block_stop", "index": 0})
	s.event("message_delta", map[string]any{"type": "message_delta",
		"delta": map[string]any{"stop_reason": stopReason, "stop_sequence": stopSeq}, "usage": map[string]int{"output_tokens": out}})
	s.event("message_stop", map[string]any{"type": "message_stop"})
}

func writeJSONBody(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	b, _ := json.Marshal(v)
	_, _ = w.Write(b)
}

// sse writes Server-Sent Events, flushing each.
type sse struct {
	w http.ResponseWriter
	f http.Flusher
}

func newSSE(w http.ResponseWriter) *sse {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	f, _ := w.(http.Flusher)
	return &sse{w: w, f: f}
}

func (s *sse) event(name string, v any) {
	b, _ := json.Marshal(v)
	s.raw(name, string(b))
}

func (s *sse) data(v any) { s.event("", v) }

func (s *sse) raw(name, data string) {
	var buf bytes.Buffer
	if name != "" {
		fmt.Fprintf(&buf, "event: %s\n", name)
	}
	fmt.Fprintf(&buf, "data: %s\n\n", data)
	_, _ = s.w.Write(buf.Bytes())
	if s.f != nil {
		s.f.Flush()
	}
}
