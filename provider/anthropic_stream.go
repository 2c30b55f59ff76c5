package provider

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/tollgate/tollgate/internal/anthropicwire"
)

// anthropicStreamState assembles a streamed answer from its events.
type anthropicStreamState struct {
	onDelta func(Delta)
	model   string
	content answerContent
	calls   []ToolCall
	// callOf maps a content block's index to its tool call's ordinal:
	// OpenAI numbers tool calls, Anthropic numbers every block.
	callOf   map[int]int
	finish   string
	sequence *string // the stop sequence, when one ended the answer
	usage    anthropicwire.Usage
	seen     bool   // some usage was reported
	final    *Usage // the usage of a whole answer
	// current is the native event being handled: the first delta it
	// makes carries it (anthropic_native.go).
	current *NativeEvent
	events  *NativeAnswer // a native stream's events so far
}

func (s *anthropicStreamState) emit(d Delta) {
	if s.current != nil {
		d.Native, s.current = s.current, nil
	}
	if s.onDelta != nil {
		s.onDelta(d)
	}
}

// event handles one event; done reports message_stop. Events of a type
// Tollgate does not know (ping, future ones) are skipped.
func (s *anthropicStreamState) event(data string) (done bool, err error) {
	var ev anthropicwire.Event
	if err := json.Unmarshal([]byte(data), &ev); err != nil {
		return false, malformed(http.StatusOK, err)
	}
	switch ev.Type {
	case "message_stop":
		return true, nil
	case "error":
		return false, ClassifyAnthropic(http.StatusInternalServerError, nil, []byte(data))
	}
	if h := anthropicEventHandlers[ev.Type]; h != nil {
		return false, h(s, ev)
	}
	return false, nil
}

// anthropicEventHandlers handle the events that build the answer, by type.
var anthropicEventHandlers = map[string]func(*anthropicStreamState, anthropicwire.Event) error{
	"message_start":       (*anthropicStreamState).messageStart,
	"content_block_start": func(s *anthropicStreamState, ev anthropicwire.Event) error { s.blockStart(ev); return nil },
	"content_block_delta": (*anthropicStreamState).blockDelta,
	"content_block_stop":  (*anthropicStreamState).blockStop,
	"message_delta":       (*anthropicStreamState).messageDelta,
}

// anthropicDeltaHandlers handle a content block's deltas, by delta type.
var anthropicDeltaHandlers = map[string]func(*anthropicStreamState, anthropicwire.Event) error{
	"text_delta":       (*anthropicStreamState).textDelta,
	"thinking_delta":   (*anthropicStreamState).thinkingDelta,
	"signature_delta":  (*anthropicStreamState).signatureDelta,
	"input_json_delta": (*anthropicStreamState).argumentsDelta,
}

func (s *anthropicStreamState) messageStart(ev anthropicwire.Event) error {
	if ev.Message != nil {
		s.model, s.usage, s.seen = ev.Message.Model, ev.Message.Usage, true
	}
	return nil
}

func (s *anthropicStreamState) blockDelta(ev anthropicwire.Event) error {
	if ev.Delta == nil {
		return nil
	}
	if h := anthropicDeltaHandlers[ev.Delta.Type]; h != nil {
		return h(s, ev)
	}
	return nil
}

func (s *anthropicStreamState) textDelta(ev anthropicwire.Event) error {
	if text := deref(ev.Delta.Text); text != "" {
		s.content.textDelta(text, false)
		s.emit(Delta{Content: text})
	}
	return nil
}

func (s *anthropicStreamState) thinkingDelta(ev anthropicwire.Event) error {
	if p, thinking := s.content.last(), deref(ev.Delta.Thinking); p != nil && p.Type == PartThinking && thinking != "" {
		p.Thinking += thinking
		s.emit(Delta{Thinking: thinking})
	}
	return nil
}

func (s *anthropicStreamState) signatureDelta(ev anthropicwire.Event) error {
	if p, signature := s.content.last(), deref(ev.Delta.Signature); p != nil && p.Type == PartThinking && signature != "" {
		p.Signature += signature
		s.emit(Delta{Signature: signature})
	}
	return nil
}

// argumentsDelta appends to a tool call's arguments; a delta for a block
// that is no tool call is malformed.
func (s *anthropicStreamState) argumentsDelta(ev anthropicwire.Event) error {
	n, ok := s.callOf[ev.Index]
	if !ok {
		return malformed(http.StatusOK, nil)
	}
	if frag := deref(ev.Delta.PartialJSON); frag != "" {
		s.calls[n].Function.Arguments += frag
		s.emit(Delta{ToolCall: &ToolCallDelta{Index: n, Arguments: frag}})
	}
	return nil
}

// blockStop closes a block. A call without arguments streams none; its
// arguments are the empty object, as in a whole answer.
func (s *anthropicStreamState) blockStop(ev anthropicwire.Event) error {
	if n, ok := s.callOf[ev.Index]; ok && s.calls[n].Function.Arguments == "" {
		s.calls[n].Function.Arguments = "{}"
		s.emit(Delta{ToolCall: &ToolCallDelta{Index: n, Arguments: "{}"}})
	}
	return nil
}

// messageDelta takes the stop reason and the usage so far; a count absent
// from the delta keeps its value from message_start.
func (s *anthropicStreamState) messageDelta(ev anthropicwire.Event) error {
	if ev.Delta != nil && ev.Delta.StopReason != "" {
		s.finish, s.sequence = ev.Delta.StopReason, ev.Delta.StopSequence
	}
	u := ev.Usage
	if u == nil {
		return nil
	}
	s.seen = true
	s.usage.OutputTokens = u.OutputTokens
	for _, c := range []struct {
		dst  **tokenCount
		from *tokenCount
	}{
		{&s.usage.InputTokens, u.InputTokens},
		{&s.usage.CacheCreationInputTokens, u.CacheCreationInputTokens},
		{&s.usage.CacheReadInputTokens, u.CacheReadInputTokens},
	} {
		if c.from != nil {
			n := *c.from
			*c.dst = &n
		}
	}
	return nil
}

// blockStart opens a content block: a tool call (relayed with its id and
// name), a text block, a thinking block (its text and signature follow as
// deltas) or a redacted thinking block (relayed whole).
func (s *anthropicStreamState) blockStart(ev anthropicwire.Event) {
	b := ev.ContentBlock
	if b == nil {
		return
	}
	text, thinking, signature, data := deref(b.Text), deref(b.Thinking), deref(b.Signature), deref(b.Data)
	switch b.Type {
	case "tool_use":
		n := len(s.calls)
		s.callOf[ev.Index] = n
		id, name := deref(b.ID), deref(b.Name)
		s.calls = append(s.calls, ToolCall{ID: id, Type: "function", Function: FunctionCall{Name: name}})
		s.emit(Delta{ToolCall: &ToolCallDelta{Index: n, ID: id, Name: name}})
	case "text":
		s.content.textDelta(text, true)
		if text != "" {
			s.emit(Delta{Content: text})
		}
	case "thinking":
		s.content.thinking(thinking, signature)
		if thinking != "" {
			s.emit(Delta{Thinking: thinking})
		}
		if signature != "" {
			s.emit(Delta{Signature: signature})
		}
	case "redacted_thinking":
		s.content.redacted(data)
		s.emit(Delta{RedactedThinking: data})
	}
}

// whole takes a server that answered a whole message instead of a stream:
// its content and tool calls are relayed as deltas all at once.
func (s *anthropicStreamState) whole(status int, header http.Header, b []byte) error {
	r, err := parseMessage(status, header, b)
	if err != nil {
		return err
	}
	s.model = r.Model
	ch := r.Choices[0]
	msg := ch.Message
	if msg.Content.Parts == nil {
		s.content.text(msg.Content.Text)
	}
	for _, p := range msg.Content.Parts {
		switch p.Type {
		case PartText:
			s.content.text(p.Text)
		case PartThinking:
			s.content.thinking(p.Thinking, p.Signature)
		case PartRedactedThinking:
			s.content.redacted(p.Data)
		}
	}
	relayWhole(&Response{Choices: []Choice{{Message: msg}}}, s.emit)
	s.calls = msg.ToolCalls
	s.finish = AnthropicStopReason(ch.FinishReason)
	if ch.StopReason != "" {
		s.finish = ch.StopReason
	}
	if ch.StopSequence != "" {
		s.sequence = &ch.StopSequence
	}
	s.final = r.Usage
	return nil
}

// response is the assembled answer, returned with err when the stream
// failed (what arrived is in it), or with the *Error of an answer that
// holds nothing.
func (s *anthropicStreamState) response(status int, err error) (*Response, error) {
	msg := Message{Role: "assistant", ToolCalls: s.calls, Content: s.content.content()}
	out := &Response{Model: s.model, Status: status, Usage: s.final,
		Choices: []Choice{{Message: msg, FinishReason: anthropicFinish(s.finish)}}}
	stopDetail(&out.Choices[0], s.finish, s.sequence)
	if out.Usage == nil && s.seen {
		out.Usage = anthropicUsage(s.usage)
	}
	if err != nil {
		return out, err
	}
	if _, err := anthropicAnswer(status, &s.content, s.calls, s.finish); err != nil {
		return out, err
	}
	return out, nil
}

// Stream streams a Messages API answer: text_delta events become content
// deltas; thinking_delta and signature_delta become thinking and signature
// deltas, a redacted_thinking block one redacted thinking delta; a
// tool_use block's start becomes a tool-call delta with its id and name,
// and its input_json_delta fragments argument deltas, numbered by the tool
// call's ordinal; message_start and message_delta carry the usage,
// message_stop ends it. The Response is assembled as Complete's.
func (c *Anthropic) Stream(ctx context.Context, req Request, onDelta func(Delta)) (*Response, error) {
	if n := nativeOf(req.Chat); n != nil {
		return c.streamNative(ctx, req, n, onDelta)
	}
	body, err := c.body(req)
	if err != nil {
		return nil, err
	}
	s := &anthropicStreamState{onDelta: onDelta, callOf: map[int]int{}}
	body.Stream = true
	status, err := sseCall{
		hc: c.hc, url: c.endpoint, header: c.headers(req.Chat), payload: body,
		key: req.IdempotencyKey, classify: ClassifyAnthropic,
		onData: s.event,
		whole:  s.whole,
	}.do(ctx)
	return s.response(status, err)
}
