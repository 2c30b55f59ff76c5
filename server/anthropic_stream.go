package server

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/tollgate/tollgate/internal/anthropicwire"
	"github.com/tollgate/tollgate/provider"
	"github.com/tollgate/tollgate/tasks"
)

// antStream writes Anthropic's event stream: message_start and a ping,
// then each content block as content_block_start, its deltas
// (text_delta, thinking_delta, signature_delta, input_json_delta) and
// content_block_stop, then message_delta (stop reason and usage) and
// message_stop. A block opens when a delta of another kind arrives: a
// thinking block ends with its signature, a tool call's first fragment
// opens its tool_use block.
type antStream struct {
	eventStream
	task      tasks.Task
	announced bool   // message_start was sent
	next      int    // the index of the next block
	open      string // the open block's type, "" for none
	signed    bool   // the open thinking block has its signature
	tools     map[int]int
	// native: the provider's own events are relayed (a request carried
	// natively), and nothing is synthesized.
	native bool
}

func newAntStream(c echo.Context, t tasks.Task) *antStream {
	return &antStream{eventStream: eventStream{c: c}, task: t, tools: map[int]int{}}
}

// send writes one event; it reports false once the client is gone.
func (s *antStream) send(event string, v any) bool { return s.event(event, v) }

// start opens the stream: the status, then message_start (its usage is
// the whole answer's, sent with message_delta once known) and a ping.
func (s *antStream) start() {
	if s.announced {
		return
	}
	s.announced = true
	s.send(anthropicwire.EventMessageStart, anthropicwire.MessageStart{Type: anthropicwire.EventMessageStart,
		Message: anthropicwire.StreamMessage{ID: antMessageID(s.task.ID), Type: "message", Role: "assistant", Model: s.task.Model,
			Content: []anthropicwire.ResponseBlock{}, Usage: anthropicwire.FullUsage(0, 0, 0, 0)}})
	s.send(anthropicwire.EventPing, anthropicwire.TypeOnly{Type: anthropicwire.EventPing})
}

// thinkingStart opens a thinking block: its thinking and signature
// follow as deltas.
func thinkingStart() anthropicwire.StreamBlock {
	return anthropicwire.StreamBlock{Type: "thinking", Thinking: new(string), Signature: new(string)}
}

// openBlock closes the open block and opens block.
func (s *antStream) openBlock(block anthropicwire.StreamBlock) int {
	s.closeBlock()
	s.open, s.signed = block.Type, false
	s.next++
	s.send(anthropicwire.EventContentBlockStart, anthropicwire.ContentBlockStart{Type: anthropicwire.EventContentBlockStart,
		Index: s.next - 1, ContentBlock: block})
	return s.next - 1
}

func (s *antStream) closeBlock() {
	if s.open == "" {
		return
	}
	s.send(anthropicwire.EventContentBlockStop, anthropicwire.ContentBlockStop{Type: anthropicwire.EventContentBlockStop, Index: s.next - 1})
	s.open = ""
}

func (s *antStream) blockDelta(index int, delta anthropicwire.BlockDelta) bool {
	return s.send(anthropicwire.EventContentBlockDelta, anthropicwire.ContentBlockDelta{Type: anthropicwire.EventContentBlockDelta,
		Index: index, Delta: delta})
}

// delta relays one piece of the answer.
func (s *antStream) delta(d provider.Delta) bool {
	if d.Native != nil || s.native {
		return s.relay(d.Native)
	}
	s.start()
	switch {
	case d.Thinking != "":
		if s.open != "thinking" || s.signed {
			s.openBlock(thinkingStart())
		}
		return s.blockDelta(s.next-1, anthropicwire.ThinkingDelta(d.Thinking))
	case d.Signature != "":
		if s.open != "thinking" || s.signed {
			s.openBlock(thinkingStart())
		}
		s.signed = true
		return s.blockDelta(s.next-1, anthropicwire.SignatureDelta(d.Signature))
	case d.RedactedThinking != "":
		s.openBlock(anthropicwire.StreamBlock{Type: "redacted_thinking", Data: &d.RedactedThinking})
		s.closeBlock()
		return !s.gone
	case d.Content != "" || d.Refusal != "":
		if s.open != "text" {
			s.openBlock(anthropicwire.StreamBlock{Type: "text", Text: new(string)})
		}
		return s.blockDelta(s.next-1, anthropicwire.TextDelta(d.Content+d.Refusal))
	case d.ToolCall != nil:
		tc := d.ToolCall
		index, known := s.tools[tc.Index]
		if !known || tc.ID != "" {
			index = s.openBlock(anthropicwire.StreamBlock{Type: "tool_use", ID: &tc.ID, Name: &tc.Name, Input: json.RawMessage(`{}`)})
			s.tools[tc.Index] = index
		}
		if tc.Arguments == "" {
			return !s.gone
		}
		return s.blockDelta(index, anthropicwire.InputJSONDelta(tc.Arguments))
	}
	return !s.gone
}

// replay streams a stored answer as the deltas a stream of it would have
// carried.
func (s *antStream) replay(t tasks.Task) {
	s.start()
	m := antAnswerChoice(t).Message
	if m.Content.Parts == nil && m.Content.Text != "" {
		s.delta(provider.Delta{Content: m.Content.Text})
	}
	for _, p := range m.Content.Parts {
		switch p.Type {
		case provider.PartText:
			if s.open == "text" {
				s.closeBlock() // each text part its own block
			}
			s.delta(provider.Delta{Content: p.Text})
		case provider.PartThinking:
			s.openBlock(thinkingStart())
			s.delta(provider.Delta{Thinking: p.Thinking})
			s.delta(provider.Delta{Signature: p.Signature})
		case provider.PartRedactedThinking:
			s.delta(provider.Delta{RedactedThinking: p.Data})
		}
	}
	if m.Refusal != "" {
		s.delta(provider.Delta{Refusal: m.Refusal})
	}
	for i, tc := range m.ToolCalls {
		s.delta(provider.Delta{ToolCall: &provider.ToolCallDelta{Index: i, ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments}})
	}
}

// finish ends the stream: the open block, then message_delta with the
// stop reason and the whole usage, and message_stop.
func (s *antStream) finish(t tasks.Task) {
	if s.native {
		return // the provider's message_stop was relayed
	}
	s.start()
	s.closeBlock()
	reason, sequence := antStop(antAnswerChoice(t))
	usage := anthropicwire.FullUsage(0, 0, 0, 0)
	if t.Result != nil {
		usage = antUsageOf(t.Result.Usage)
	}
	s.send(anthropicwire.EventMessageDelta, anthropicwire.MessageDelta{Type: anthropicwire.EventMessageDelta,
		Delta: anthropicwire.StopDelta{StopReason: reason, StopSequence: sequence}, Usage: usage})
	s.send(anthropicwire.EventMessageStop, anthropicwire.TypeOnly{Type: anthropicwire.EventMessageStop})
}

// fail ends a stream that has begun with an error event, as Anthropic
// sends one.
func (s *antStream) fail(err error) {
	a := antAnswerOf(err, 0)
	s.send(anthropicwire.EventError, a.body(antRequestID(s.c)))
}

// streamMessage runs the task inline and relays the provider's stream.
// The upstream call does not depend on this connection: a client that
// leaves does not stop it, and the task is settled all the same.
func streamMessage(c echo.Context, d *Deps, created tasks.Created) error {
	out := newAntStream(c, created.Task)
	t, err := d.Tasks.RunInline(c.Request().Context(), created, traceIDOf(c), tasks.Stream{Deliver: out.delta})
	if err != nil {
		if out.started {
			logFailure(d.Logger, c, http.StatusInternalServerError, err)
			out.fail(err)
			return nil
		}
		return err
	}
	if t.Status != tasks.StatusSucceeded {
		if out.started {
			out.fail(&taskFailed{task: t})
			return nil
		}
		return failedTask(context.WithoutCancel(c.Request().Context()), d, created.Task.OwnerID, t)
	}
	out.finish(t)
	return nil
}
