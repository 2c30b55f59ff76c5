package fake

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
)

// OpenAI's Responses API, POST /v1/responses: the same deterministic
// answer as chat completions, written as Response objects and their
// events. The request is read leniently, as OpenAI reads what it knows:
// input messages, function calls and their outputs, and reasoning items,
// whose encrypted_content must be one the fake made; function tools,
// flat or inside a namespace tool (hosted tools are offered nothing);
// tool_choice, parallel_tool_calls, max_output_tokens, include.

type respRequest struct {
	Model              string            `json:"model"`
	Instructions       string            `json:"instructions"`
	Input              json.RawMessage   `json:"input"`
	Tools              []respTool        `json:"tools"`
	ToolChoice         json.RawMessage   `json:"tool_choice"`
	ParallelToolCalls  *bool             `json:"parallel_tool_calls"`
	MaxOutputTokens    *int              `json:"max_output_tokens"`
	Stream             bool              `json:"stream"`
	Include            []string          `json:"include"`
	Metadata           map[string]string `json:"metadata"`
	PreviousResponseID string            `json:"previous_response_id"`
}

type respTool struct {
	Type       string          `json:"type"`
	Name       string          `json:"name"`
	Parameters json.RawMessage `json:"parameters"`
	Tools      []respTool      `json:"tools"` // a namespace's own tools
}

// respItem is an input item, read for what the conversation digest needs.
type respItem struct {
	Type             string          `json:"type"`
	ID               string          `json:"id"`
	Role             string          `json:"role"`
	Content          json.RawMessage `json:"content"`
	CallID           string          `json:"call_id"`
	Name             string          `json:"name"`
	Arguments        string          `json:"arguments"`
	Output           json.RawMessage `json:"output"`
	EncryptedContent *string         `json:"encrypted_content"`
}

// handleResponses serves POST /v1/responses, streaming its events when
// the request asks for it.
func (s *Server) handleResponses(w http.ResponseWriter, r *http.Request) {
	body := readBody(w, r)
	var req respRequest
	err := decodeObject(body, &req)
	next, ok := s.receiveOpenAI(w, r, body, req.Model, req.Stream, err)
	if !ok {
		return
	}
	a, rerr := s.responsesAsk(req)
	if rerr != nil {
		writeOpenAIError(w, http.StatusBadRequest, *rerr)
		return
	}
	rp := plan(a, next, "call_fake_")
	o := s.responseObject(req, rp)
	if req.Stream {
		s.streamResponse(w, r, o, rp)
		return
	}
	scriptedHeaders(w, next)
	writeJSON(w, next.status(), o)
}

// responsesAsk reduces req to the fake's ask.
func (s *Server) responsesAsk(req respRequest) (ask, *requestError) {
	a := ask{reasoning: s.reasoning[req.Model], parallel: true, n: 1}
	if req.PreviousResponseID != "" {
		return a, &requestError{msg: "Previous response with id '" + req.PreviousResponseID + "' not found.", param: "previous_response_id", code: "previous_response_not_found"}
	}
	if req.MaxOutputTokens != nil {
		a.limit = *req.MaxOutputTokens
	}
	if req.ParallelToolCalls != nil {
		a.parallel = *req.ParallelToolCalls
	}
	var add func(ts []respTool)
	add = func(ts []respTool) {
		for _, t := range ts {
			switch t.Type {
			case "function":
				def, _ := json.Marshal(t)
				a.tools = append(a.tools, tool{Name: t.Name, Schema: t.Parameters, size: len(def)})
			case "namespace":
				add(t.Tools)
			}
		}
	}
	add(req.Tools)
	var mode string
	var named struct {
		Name string `json:"name"`
	}
	switch {
	case len(req.ToolChoice) == 0:
	case json.Unmarshal(req.ToolChoice, &mode) == nil:
		a.toolChoice = mode
	case json.Unmarshal(req.ToolChoice, &named) == nil && named.Name != "":
		a.toolChoice = named.Name
	}
	if req.Instructions != "" {
		a.turns = append(a.turns, turn{Role: "system", Content: req.Instructions})
	}
	return a, a.responsesTurns(req.Input)
}

// responsesTurns reduces the input items to turns: reasoning items ask
// nothing of the answer, but an encrypted_content the fake did not make
// is refused as OpenAI refuses it.
func (a *ask) responsesTurns(input json.RawMessage) *requestError {
	var text string
	if json.Unmarshal(input, &text) == nil {
		a.turns = append(a.turns, turn{Role: "user", Content: text})
		return nil
	}
	var items []respItem
	if err := json.Unmarshal(input, &items); err != nil {
		return &requestError{msg: "Invalid 'input': expected a string or an array of input items.", param: "input"}
	}
	last := ""
	for i, it := range items {
		last = it.Type
		switch it.Type {
		case "", "message":
			a.turns = append(a.turns, turn{Role: it.Role, Content: partsText(it.Content)})
		case "function_call":
			a.turns = append(a.turns, turn{Role: "assistant", ToolCalls: []toolCall{{ID: it.CallID, Name: it.Name, Arguments: compactJSON([]byte(it.Arguments))}}})
		case "function_call_output":
			a.turns = append(a.turns, turn{Role: "tool", Content: partsText(it.Output), ToolCallID: it.CallID})
		case "reasoning":
			if it.EncryptedContent != nil && *it.EncryptedContent != encryptedReasoning(it.ID) {
				return &requestError{msg: "The encrypted content for item " + it.ID + " could not be verified.",
					param: fmt.Sprintf("input[%d].encrypted_content", i), code: "invalid_encrypted_content"}
			}
		}
	}
	a.afterToolResult = last == "function_call_output"
	return nil
}

// partsText is a content or an output: a string, or the text of its parts.
func partsText(raw json.RawMessage) string {
	var text string
	if json.Unmarshal(raw, &text) == nil {
		return text
	}
	var parts []struct {
		Text string `json:"text"`
	}
	_ = json.Unmarshal(raw, &parts)
	var b bytes.Buffer
	for _, p := range parts {
		b.WriteString(p.Text)
	}
	return b.String()
}

// encryptedReasoning is the encrypted_content the fake gives reasoning
// item id: derived from the id, so that an altered one is found out.
func encryptedReasoning(id string) string {
	sum := sha256.Sum256([]byte("reasoning:" + id))
	return "fake-encrypted-" + hex.EncodeToString(sum[:12])
}

// respObject is a Response object; output items are maps, in the order
// and with the members OpenAI sends.
type respObject struct {
	ID                string            `json:"id"`
	Object            string            `json:"object"`
	CreatedAt         int64             `json:"created_at"`
	Status            string            `json:"status"`
	Error             any               `json:"error"`
	IncompleteDetails any               `json:"incomplete_details"`
	Model             string            `json:"model"`
	Output            []map[string]any  `json:"output"`
	Usage             *respUsage        `json:"usage"`
	Metadata          map[string]string `json:"metadata"`
}

type respUsage struct {
	InputTokens        int `json:"input_tokens"`
	InputTokensDetails struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"input_tokens_details"`
	OutputTokens        int `json:"output_tokens"`
	OutputTokensDetails struct {
		ReasoningTokens int `json:"reasoning_tokens"`
	} `json:"output_tokens_details"`
	TotalTokens int `json:"total_tokens"`
}

// responseObject writes rp as a Response: a reasoning item first when
// include asks for reasoning.encrypted_content, then the message or the
// function calls.
func (s *Server) responseObject(req respRequest, rp reply) respObject {
	o := respObject{ID: "resp_" + rp.digest[:32], Object: "response", CreatedAt: s.now().Unix(), Status: "completed",
		Model: cmp.Or(rp.model, req.Model), Output: []map[string]any{}, Metadata: map[string]string{}}
	for k, v := range req.Metadata {
		o.Metadata[k] = v
	}
	switch rp.finish {
	case "length":
		o.Status, o.IncompleteDetails = "incomplete", map[string]any{"reason": "max_output_tokens"}
	case "content_filter":
		o.Status, o.IncompleteDetails = "incomplete", map[string]any{"reason": "content_filter"}
	}
	itemStatus := cmp.Or(map[string]string{"incomplete": "incomplete"}[o.Status], "completed")
	if slices.Contains(req.Include, "reasoning.encrypted_content") {
		id := "rs_" + rp.digest[:32]
		summary := []any{}
		if rp.sc.Thinking != "" {
			summary = append(summary, map[string]any{"type": "summary_text", "text": rp.sc.Thinking})
		}
		o.Output = append(o.Output, map[string]any{"id": id, "type": "reasoning", "summary": summary, "encrypted_content": encryptedReasoning(id)})
	}
	switch {
	case rp.calls != nil:
		for i, c := range rp.calls {
			o.Output = append(o.Output, map[string]any{"id": "fc_" + rp.digest[:24] + "_" + strconv.Itoa(i), "type": "function_call",
				"status": itemStatus, "arguments": c.Arguments, "call_id": c.ID, "name": c.Name})
		}
	default:
		part := map[string]any{"type": "output_text", "text": rp.content, "annotations": []any{}, "logprobs": []any{}}
		if rp.refusal != "" {
			part = map[string]any{"type": "refusal", "refusal": rp.refusal}
		}
		o.Output = append(o.Output, map[string]any{"id": "msg_" + rp.digest[:32], "type": "message", "status": itemStatus,
			"role": "assistant", "content": []any{part}})
	}
	u := &respUsage{InputTokens: rp.prompt + rp.cached, OutputTokens: rp.out}
	u.InputTokensDetails.CachedTokens, u.OutputTokensDetails.ReasoningTokens = rp.cached, rp.reasoning
	u.TotalTokens = u.InputTokens + u.OutputTokens
	o.Usage = u
	return o
}

// streamResponse sends o as Responses events: response.created and
// response.in_progress, each output item added, its text a word at a
// time or its arguments in fragments, done, then response.completed (or
// response.incomplete) with the whole response. Every event carries its
// sequence_number. The script may slow the content events
// (ChunkDelayMS) or cut the connection after some of them
// (StreamCutAfter).
func (s *Server) streamResponse(w http.ResponseWriter, r *http.Request, o respObject, rp reply) {
	sc := rp.sc
	out := startSSE(w, sc)
	seq := 0
	send := func(typ string, fields map[string]any) {
		fields["type"], fields["sequence_number"] = typ, seq
		seq++
		out.send(typ, fields)
	}
	sent := 0
	content := func(typ string, fields map[string]any) bool {
		if sc.StreamCutAfter > 0 && sent == sc.StreamCutAfter {
			panic(http.ErrAbortHandler) // the connection dies mid-stream
		}
		if !s.waitChunk(r, sc) {
			return false
		}
		send(typ, fields)
		sent++
		return true
	}
	opening := o
	opening.Status, opening.Output, opening.Usage, opening.IncompleteDetails = "in_progress", []map[string]any{}, nil, nil
	send("response.created", map[string]any{"response": opening})
	send("response.in_progress", map[string]any{"response": opening})
	for i, item := range o.Output {
		if !s.streamItem(i, item, send, content) {
			return
		}
	}
	closing := "response.completed"
	if o.Status == "incomplete" {
		closing = "response.incomplete"
	}
	send(closing, map[string]any{"response": o})
}

// streamItem sends the events of output item i; false means the client
// left.
func (s *Server) streamItem(i int, item map[string]any, send func(string, map[string]any), content func(string, map[string]any) bool) bool {
	added := map[string]any{}
	for k, v := range item {
		added[k] = v
	}
	id, _ := item["id"].(string)
	switch item["type"] {
	case "message":
		added["status"], added["content"] = "in_progress", []any{}
		send("response.output_item.added", map[string]any{"output_index": i, "item": added})
		parts, _ := item["content"].([]any)
		for j, p := range parts {
			part, _ := p.(map[string]any)
			typ, _ := part["type"].(string)
			key, deltaType, doneType := "text", "response.output_text.delta", "response.output_text.done"
			if typ == "refusal" {
				key, deltaType, doneType = "refusal", "response.refusal.delta", "response.refusal.done"
			}
			empty := map[string]any{"type": typ, key: ""}
			if typ == "output_text" {
				empty["annotations"], empty["logprobs"] = []any{}, []any{}
			}
			send("response.content_part.added", map[string]any{"item_id": id, "output_index": i, "content_index": j, "part": empty})
			text, _ := part[key].(string)
			for _, wd := range words(text) {
				ev := map[string]any{"item_id": id, "output_index": i, "content_index": j, "delta": wd}
				if typ == "output_text" {
					ev["logprobs"] = []any{}
				}
				if !content(deltaType, ev) {
					return false
				}
			}
			done := map[string]any{"item_id": id, "output_index": i, "content_index": j, key: text}
			if typ == "output_text" {
				done["logprobs"] = []any{}
			}
			send(doneType, done)
			send("response.content_part.done", map[string]any{"item_id": id, "output_index": i, "content_index": j, "part": part})
		}
	case "function_call":
		added["status"], added["arguments"] = "in_progress", ""
		send("response.output_item.added", map[string]any{"output_index": i, "item": added})
		args, _ := item["arguments"].(string)
		for _, frag := range fragments(args, argFragment) {
			if !content("response.function_call_arguments.delta", map[string]any{"item_id": id, "output_index": i, "delta": frag}) {
				return false
			}
		}
		send("response.function_call_arguments.done", map[string]any{"item_id": id, "output_index": i, "name": item["name"], "arguments": args})
	default:
		send("response.output_item.added", map[string]any{"output_index": i, "item": added})
	}
	send("response.output_item.done", map[string]any{"output_index": i, "item": item})
	return true
}
