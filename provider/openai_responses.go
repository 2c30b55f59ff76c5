package provider

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
)

// OpenAI's Responses API, for a request carried natively (native.go): the
// client's body goes to POST {base}/responses with only "model" and
// "stream" set, and the answer (a Response object, or its event stream)
// is read into the neutral Response for settlement and kept as the
// provider sent it for the client.

// How an OpenAI-kind provider takes a request made in the Responses API
// (Options.Responses).
const (
	// ResponsesAuto carries natively a request that holds what chat
	// completions cannot say (Native.Unmodeled), and translates the rest
	// to chat completions, which every OpenAI-compatible server speaks.
	ResponsesAuto = ""
	// ResponsesNative carries every Responses request natively.
	ResponsesNative = "native"
	// ResponsesChat translates every Responses request to chat
	// completions; one chat cannot say is refused at admission.
	ResponsesChat = "chat"
)

// ResponsesModes lists the values Options.Responses accepts.
func ResponsesModes() []string { return []string{ResponsesNative, ResponsesChat} }

// Carries reports whether the client sends requests made in api as
// they are: Responses requests, unless the provider is set to chat
// completions only.
func (c *OpenAI) Carries(api API) bool {
	return api == APIOpenAIResponses && c.responses != ResponsesChat
}

// nativeCall reports whether chat goes to the Responses endpoint.
func (c *OpenAI) nativeCall(chat Chat) bool {
	n := chat.Native
	if n == nil || !c.Carries(n.API) {
		return false
	}
	return c.responses == ResponsesNative || len(n.Unmodeled) > 0
}

// responsesBody is the client's body with the provider's model name and
// stream set, and, when the client set no max_output_tokens, Tollgate's
// output limit (the one the reservation is made for: the provider must
// not write more than was reserved); nothing else of it changes, byte
// for byte.
func responsesBody(chat Chat, stream bool) (rawBody, error) {
	model, err := marshalNoEscape(chat.Model)
	if err != nil {
		return nil, rejectedLocally(err)
	}
	flag := []byte("false")
	if stream {
		flag = []byte("true")
	}
	b, err := SpliceMember(chat.Native.Body, "model", model)
	if err == nil {
		b, err = SpliceMember(b, "stream", flag)
	}
	if limit := chat.OutputLimit(); err == nil && limit > 0 {
		var found []memberSpan
		if found, _, err = memberSpans(b, "max_output_tokens"); err == nil && len(found) == 0 {
			b, err = SpliceMember(b, "max_output_tokens", strconv.AppendInt(nil, int64(limit), 10))
		}
	}
	if err != nil {
		return nil, rejectedLocally(err)
	}
	return b, nil
}

// rawBody is a request body sent byte for byte: json.Marshal would
// compact it and escape its HTML characters.
type rawBody []byte

// encodePayload is the bytes a call sends for payload.
func encodePayload(payload any) ([]byte, error) {
	if b, ok := payload.(rawBody); ok {
		return b, nil
	}
	return json.Marshal(payload)
}

// SpliceMember returns the JSON object obj with its top-level member key
// set to value (valid JSON), or removed when value is nil: every
// occurrence of the key has its value replaced in place (or the member
// removed), or, absent, the member is added first. The rest of obj is
// kept byte for byte. It fails when obj is not a JSON object.
func SpliceMember(obj []byte, key string, value []byte) ([]byte, error) {
	found, open, err := memberSpans(obj, key)
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	if len(found) == 0 {
		if value == nil {
			return obj, nil
		}
		name, _ := marshalNoEscape(key)
		out.Write(obj[:open])
		out.Write(name)
		out.WriteByte(':')
		out.Write(value)
		if rest := bytes.TrimSpace(obj[open:]); len(rest) > 0 && rest[0] != '}' {
			out.WriteByte(',')
		}
		out.Write(obj[open:])
		return out.Bytes(), nil
	}
	last := 0
	for _, s := range found {
		if value == nil {
			out.Write(obj[last:s.member])
			last = s.end
			if s.member == open {
				// The first member: its comma follows it.
				rest := bytes.TrimLeft(obj[s.end:], " \t\r\n")
				if len(rest) > 0 && rest[0] == ',' {
					last = len(obj) - len(rest) + 1
				}
			}
			continue
		}
		out.Write(obj[last:s.start])
		out.Write(value)
		last = s.end
	}
	out.Write(obj[last:])
	return out.Bytes(), nil
}

// memberSpan is where one member of an object lies: from the end of what
// precedes it (the opening brace, or the previous value, so that its
// comma is included), its value's start, and its value's end.
type memberSpan struct{ member, start, end int }

// memberSpans finds the top-level members named key in obj, and where
// obj's first member may begin (after its opening brace).
func memberSpans(obj []byte, key string) ([]memberSpan, int, error) {
	notObject := errors.New("provider: a native body must be a JSON object")
	dec := json.NewDecoder(bytes.NewReader(obj))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, 0, notObject
	}
	open := int(dec.InputOffset())
	prev := open
	var found []memberSpan
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, 0, err
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, 0, err
		}
		end := int(dec.InputOffset())
		if tok == key {
			found = append(found, memberSpan{prev, end - len(v), end})
		}
		prev = end
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim('}') {
		return nil, 0, notObject
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, 0, errors.New("provider: trailing data after the native body")
	}
	return found, open, nil
}

// completeResponses makes one non-streamed Responses call.
func (c *OpenAI) completeResponses(ctx context.Context, req Request) (*Response, error) {
	body, err := responsesBody(req.Chat, false)
	if err != nil {
		return nil, err
	}
	return call{
		hc: c.hc, url: c.responsesURL, header: c.headers(), payload: body, key: req.IdempotencyKey,
		classify: ClassifyOpenAI, parse: parseResponsesObject,
	}.do(ctx)
}

// respWireObject is a Response object, read for what settlement and the
// neutral answer need.
type respWireObject struct {
	Model             string            `json:"model"`
	Status            string            `json:"status"`
	Output            []json.RawMessage `json:"output"`
	Usage             *respWireUsage    `json:"usage"`
	Error             json.RawMessage   `json:"error"`
	IncompleteDetails *struct {
		Reason string `json:"reason"`
	} `json:"incomplete_details"`
}

type respWireUsage struct {
	InputTokens        tokenCount `json:"input_tokens"`
	OutputTokens       tokenCount `json:"output_tokens"`
	InputTokensDetails *struct {
		CachedTokens tokenCount `json:"cached_tokens"`
	} `json:"input_tokens_details"`
	OutputTokensDetails *struct {
		ReasoningTokens tokenCount `json:"reasoning_tokens"`
	} `json:"output_tokens_details"`
}

func (u *respWireUsage) usage() *Usage {
	if u == nil {
		return nil
	}
	r := &Usage{InputTokens: int64(u.InputTokens), OutputTokens: int64(u.OutputTokens)}
	if d := u.InputTokensDetails; d != nil {
		r.CachedInputTokens = int64(d.CachedTokens)
	}
	if d := u.OutputTokensDetails; d != nil {
		r.ReasoningTokens = int64(d.ReasoningTokens)
	}
	return r
}

// respWireItem is an output item, read for its text, refusal and
// function call.
type respWireItem struct {
	Type      string        `json:"type"`
	CallID    string        `json:"call_id"`
	Name      string        `json:"name"`
	Arguments argumentsText `json:"arguments"`
	Content   []struct {
		Type    string `json:"type"`
		Text    string `json:"text"`
		Refusal string `json:"refusal"`
	} `json:"content"`
}

// parseResponsesObject reads a Response object: its message texts and
// refusals, its function calls as tool calls, its usage, and the body
// itself as the native answer. A failed response is the classified error
// it carries; one with no output item is empty_output.
func parseResponsesObject(status int, header http.Header, body []byte) (*Response, error) {
	var o respWireObject
	if err := json.Unmarshal(body, &o); err != nil {
		return nil, malformed(status, err)
	}
	if o.Status == "failed" || (o.Status == "" && hasJSON(o.Error)) {
		return nil, responsesFailure(o.Error)
	}
	ch := Choice{Message: Message{Role: "assistant"}}
	var text strings.Builder
	for _, raw := range o.Output {
		var it respWireItem
		if err := json.Unmarshal(raw, &it); err != nil {
			return nil, malformed(status, err)
		}
		switch it.Type {
		case "message":
			for _, p := range it.Content {
				text.WriteString(p.Text)
				ch.Message.Refusal += p.Refusal
			}
		case "function_call":
			ch.Message.ToolCalls = append(ch.Message.ToolCalls, ToolCall{ID: it.CallID, Type: "function",
				Function: FunctionCall{Name: it.Name, Arguments: string(it.Arguments)}})
		}
	}
	ch.Message.Content = Text(text.String())
	ch.FinishReason = responsesFinish(o, len(ch.Message.ToolCalls) > 0)
	if len(o.Output) == 0 {
		return nil, &Error{Class: ClassTransient, Status: status, Code: CodeEmptyOutput}
	}
	return &Response{Choices: []Choice{ch}, Model: o.Model, Usage: o.Usage.usage(), Status: status,
		Native: &NativeAnswer{API: APIOpenAIResponses, Body: bytes.Clone(body)}}, nil
}

// responsesFinish is a Response's end in chat completions' terms.
func responsesFinish(o respWireObject, calls bool) string {
	switch {
	case o.Status == "incomplete" && o.IncompleteDetails != nil && o.IncompleteDetails.Reason == "content_filter":
		return "content_filter"
	case o.Status == "incomplete":
		return "length"
	case calls:
		return "tool_calls"
	}
	return "stop"
}

// responsesFailure classifies the error a failed response carries, as
// the chat endpoint's error body of the same code would be.
func responsesFailure(errObj json.RawMessage) *Error {
	var b bytes.Buffer
	b.WriteString(`{"error":`)
	if hasJSON(errObj) {
		b.Write(errObj)
	} else {
		b.WriteString(`{}`)
	}
	b.WriteByte('}')
	return ClassifyOpenAI(http.StatusInternalServerError, nil, b.Bytes())
}

// respWireEvent is one event of a Responses stream, read for what the
// neutral deltas need.
type respWireEvent struct {
	Type        string          `json:"type"`
	OutputIndex int             `json:"output_index"`
	Delta       string          `json:"delta"`
	Item        *respWireItem   `json:"item"`
	Response    json.RawMessage `json:"response"`
}

// streamResponses streams a Responses call: every event is relayed as a
// Delta whose Native is the event as sent, its text, refusal and
// function-call fragments also in the Delta's fields; the completed (or
// incomplete) response's object is parsed as a whole answer would be. A
// response.failed or error event is the classified error it carries.
func (c *OpenAI) streamResponses(ctx context.Context, req Request, onDelta func(Delta)) (*Response, error) {
	body, err := responsesBody(req.Chat, true)
	if err != nil {
		return nil, err
	}
	if onDelta == nil {
		onDelta = func(Delta) {}
	}
	rs := &responsesStream{calls: map[int]int{}, onDelta: onDelta}
	status, err := sseCall{
		hc: c.hc, url: c.responsesURL, header: c.headers(), payload: body, key: req.IdempotencyKey, classify: ClassifyOpenAI,
		onData: rs.event,
		whole: func(status int, header http.Header, b []byte) error {
			r, err := parseResponsesObject(status, header, b)
			if err == nil {
				rs.out = r
				relayWhole(r, onDelta)
			}
			return err
		},
	}.do(ctx)
	return rs.finish(status, err)
}

// responsesStream follows one Responses stream.
type responsesStream struct {
	onDelta func(Delta)
	calls   map[int]int // output index → tool call index
	text    strings.Builder
	refusal strings.Builder
	tools   []ToolCall
	out     *Response // the closing event's response, once it came
	seen    bool
}

// event handles one event's data; the closing event ends the stream.
func (s *responsesStream) event(data string) (bool, error) {
	var ev respWireEvent
	if err := json.Unmarshal([]byte(data), &ev); err != nil {
		return false, malformed(http.StatusOK, err)
	}
	d := Delta{Native: &NativeEvent{Event: ev.Type, Data: []byte(data)}}
	s.seen = true
	switch ev.Type {
	case "response.output_text.delta":
		d.Content = ev.Delta
		s.text.WriteString(ev.Delta)
	case "response.refusal.delta":
		d.Refusal = ev.Delta
		s.refusal.WriteString(ev.Delta)
	case "response.output_item.added":
		if ev.Item != nil && ev.Item.Type == "function_call" {
			if len(s.tools) >= maxStreamIndex {
				return false, malformed(http.StatusOK, errors.New("too many tool calls"))
			}
			k := len(s.tools)
			s.calls[ev.OutputIndex] = k
			s.tools = append(s.tools, ToolCall{ID: ev.Item.CallID, Type: "function", Function: FunctionCall{Name: ev.Item.Name}})
			d.ToolCall = &ToolCallDelta{Index: k, ID: ev.Item.CallID, Name: ev.Item.Name}
		}
	case "response.function_call_arguments.delta":
		if k, ok := s.calls[ev.OutputIndex]; ok {
			s.tools[k].Function.Arguments += ev.Delta
			d.ToolCall = &ToolCallDelta{Index: k, Arguments: ev.Delta}
		}
	}
	s.onDelta(d)
	switch ev.Type {
	case "response.completed", "response.incomplete":
		r, err := parseResponsesObject(http.StatusOK, nil, ev.Response)
		if err != nil {
			return false, err
		}
		s.out = r
		return true, nil
	case "response.failed":
		var o respWireObject
		_ = json.Unmarshal(ev.Response, &o)
		return false, responsesFailure(o.Error)
	case "error":
		return false, ClassifyOpenAI(http.StatusInternalServerError, nil, []byte(data))
	}
	return false, nil
}

// finish is the streamed answer: the closing event's response, or, for
// a stream that ended without one, what its deltas carried with err.
func (s *responsesStream) finish(status int, err error) (*Response, error) {
	if s.out != nil && err == nil {
		s.out.Status = status
		return s.out, nil
	}
	if !s.seen && s.out == nil {
		return nil, err
	}
	out := &Response{Status: status, Choices: []Choice{{Message: Message{Role: "assistant", Content: Text(s.text.String()),
		Refusal: s.refusal.String(), ToolCalls: s.tools}}}}
	if s.out != nil {
		out = s.out
	}
	return out, err
}
