package server

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/tollgate/tollgate/provider"
	"github.com/tollgate/tollgate/tasks"
)

// The Responses event stream. A live stream (POST with stream, not in
// the background) relays the provider's deltas as they come. Every other
// stream (background, a replayed POST, GET with stream=true) is generated
// from the stored task: the opening events at once, then, once the task
// has ended, its output as one delta per part. That sequence depends on
// the stored task alone, so its sequence numbers are the same on every
// reading, and starting_after resumes it anywhere.
//
// A request carried natively to the provider's own Responses API
// (provider.Native) is relayed live as the provider's events, byte for
// byte, sequence numbers and ids the provider's. Every other reading of
// it (a replayed POST, GET with stream=true) is generated from the stored
// task as above: its message and function calls, not the provider's
// other items (reasoning, hosted tools' calls), which only the live
// stream and the non-streamed answer carry.

// respStream writes Responses events, numbered from 0.
type respStream struct {
	eventStream
	seq   int
	after int // events numbered up to this are skipped (a resumed stream); -1 skips none
}

func newRespStream(c echo.Context, after int) *respStream {
	return &respStream{eventStream: eventStream{c: c}, after: after}
}

// emit numbers and writes one event; it reports false once the client is
// gone.
func (s *respStream) emit(typ string, fields map[string]any) bool {
	n := s.seq
	s.seq++
	if s.gone {
		return false
	}
	if n <= s.after {
		return true
	}
	fields["type"], fields["sequence_number"] = typ, n
	return s.event(typ, fields)
}

// opening sends response.created (queued for a background response,
// else in_progress) and response.in_progress.
func (s *respStream) opening(r respObject) {
	first := "in_progress"
	if r.Background {
		first = "queued"
	}
	s.emit("response.created", map[string]any{"response": r.snapshot(first)})
	s.emit("response.in_progress", map[string]any{"response": r.snapshot("in_progress")})
}

// itemAdded announces an output item as it starts.
func (s *respStream) itemAdded(index int, item any) {
	switch it := item.(type) {
	case respMessageOut:
		it.Status, it.Content = "in_progress", []map[string]any{}
		item = it
	case respCallOut:
		it.Status, it.Arguments = "in_progress", ""
		item = it
	}
	s.emit("response.output_item.added", map[string]any{"output_index": index, "item": item})
}

// partAdded opens content part j of message item id, empty.
func (s *respStream) partAdded(id string, index, j int, typ string) {
	part := outputTextPart("")
	if typ == "refusal" {
		part = refusalPart("")
	}
	s.emit("response.content_part.added", map[string]any{"item_id": id, "output_index": index, "content_index": j, "part": part})
}

// partDelta sends a piece of a text or refusal part.
func (s *respStream) partDelta(id string, index, j int, typ, delta string) {
	if typ == "refusal" {
		s.emit("response.refusal.delta", map[string]any{"item_id": id, "output_index": index, "content_index": j, "delta": delta})
		return
	}
	s.emit("response.output_text.delta", map[string]any{"item_id": id, "output_index": index, "content_index": j, "delta": delta, "logprobs": []any{}})
}

// partDone closes a content part with its whole text.
func (s *respStream) partDone(id string, index, j int, part map[string]any) {
	if part["type"] == "refusal" {
		s.emit("response.refusal.done", map[string]any{"item_id": id, "output_index": index, "content_index": j, "refusal": part["refusal"]})
	} else {
		s.emit("response.output_text.done", map[string]any{"item_id": id, "output_index": index, "content_index": j, "text": part["text"], "logprobs": []any{}})
	}
	s.emit("response.content_part.done", map[string]any{"item_id": id, "output_index": index, "content_index": j, "part": part})
}

// argsDone closes a function call's arguments, then the item.
func (s *respStream) callDone(index int, call respCallOut) {
	s.emit("response.function_call_arguments.done", map[string]any{"item_id": call.ID, "output_index": index, "name": call.Name, "arguments": call.Arguments})
	s.emit("response.output_item.done", map[string]any{"output_index": index, "item": call})
}

// closing sends the event that ends a response: completed, incomplete,
// or failed (a cancelled response too: Responses has no event of its
// own for it; its status says cancelled).
func (s *respStream) closing(r respObject) {
	typ := "response.failed"
	switch r.Status {
	case "completed":
		typ = "response.completed"
	case "incomplete":
		typ = "response.incomplete"
	}
	s.emit(typ, map[string]any{"response": r})
}

// stored sends a finished response's output events, each part as one
// delta, and its closing event.
func (s *respStream) stored(r respObject) {
	for i, item := range r.Output {
		s.item(i, item)
	}
	s.closing(r)
}

// item sends the events of one whole output item at index i.
func (s *respStream) item(i int, item any) {
	s.itemAdded(i, item)
	switch it := item.(type) {
	case respMessageOut:
		for j, part := range it.Content {
			typ, _ := part["type"].(string)
			s.partAdded(it.ID, i, j, typ)
			text, _ := part["text"].(string)
			if typ == "refusal" {
				text, _ = part["refusal"].(string)
			}
			s.partDelta(it.ID, i, j, typ, text)
			s.partDone(it.ID, i, j, part)
		}
		s.emit("response.output_item.done", map[string]any{"output_index": i, "item": it})
	case respCallOut:
		s.emit("response.function_call_arguments.delta", map[string]any{"item_id": it.ID, "output_index": i, "delta": it.Arguments})
		s.callDone(i, it)
	}
}

// streamStored streams the response of task t from the stored task: the
// opening at once, then, once the task has ended (waited for as long as
// the client stays), its output. render turns the task into its response.
func streamStored(c echo.Context, d *Deps, t tasks.Task, after int, render func(tasks.Task) respObject) error {
	s := newRespStream(c, after)
	s.begin() // a resumed stream may have no event to send for a while, or at all
	s.opening(render(t))
	ctx := c.Request().Context()
	for !t.Status.Final() {
		next, err := d.Tasks.Wait(ctx, tasks.WaitParams{Owner: t.OwnerID, ID: t.ID, For: d.MaxWait})
		if ctx.Err() != nil {
			return nil // the client left; the task goes on
		}
		if err != nil {
			s.streamError(c, d, err)
			return nil
		}
		t = next
	}
	s.stored(render(t))
	return nil
}

// streamError reports Tollgate's own failure inside a stream that has
// begun, as OpenAI's error event.
func (s *respStream) streamError(c echo.Context, d *Deps, err error) {
	logFailure(d.Logger, c, http.StatusInternalServerError, err)
	s.emit("error", map[string]any{"code": tasks.CodeApplicationFailure, "message": "Tollgate failed to finish the stream.", "param": nil})
}

// liveItems tracks the output items a live stream has opened: the
// message (its parts by type) and the function calls by tool call index.
type liveItems struct {
	s      *respStream
	taskID string
	next   int // the next output index
	msg    int // the message's output index; -1 until opened
	parts  []string
	calls  map[int]int // tool call index → output index
}

// delta relays one provider delta as Responses events.
func (l *liveItems) delta(d provider.Delta) bool {
	switch {
	case d.ToolCall != nil:
		tc := d.ToolCall
		index, open := l.calls[tc.Index]
		if !open {
			index = l.next
			l.next++
			l.calls[tc.Index] = index
			l.s.itemAdded(index, respCallOut{ID: callItemID(l.taskID, tc.Index), Type: "function_call", CallID: tc.ID, Name: tc.Name})
		}
		if tc.Arguments != "" {
			l.s.emit("response.function_call_arguments.delta", map[string]any{"item_id": callItemID(l.taskID, tc.Index), "output_index": index, "delta": tc.Arguments})
		}
	case d.Content != "":
		l.text("output_text", d.Content)
	case d.Refusal != "":
		l.text("refusal", d.Refusal)
	}
	return !l.s.gone
}

// text relays a piece of the message's text or refusal.
func (l *liveItems) text(typ, delta string) {
	id := messageItemID(l.taskID)
	if l.msg < 0 {
		l.msg = l.next
		l.next++
		l.s.itemAdded(l.msg, respMessageOut{ID: id, Type: "message", Role: "assistant"})
	}
	j := -1
	for k, p := range l.parts {
		if p == typ {
			j = k
		}
	}
	if j < 0 {
		j = len(l.parts)
		l.parts = append(l.parts, typ)
		l.s.partAdded(id, l.msg, j, typ)
	}
	l.s.partDelta(id, l.msg, j, typ, delta)
}

// finish closes every item the stream opened with the task's stored
// answer, sends whole any item of the answer no delta opened (an answer
// kept from an earlier run arrives without deltas), then ends the
// response.
func (l *liveItems) finish(r respObject) {
	var msg *respMessageOut
	calls := map[string]respCallOut{}
	for _, item := range r.Output {
		switch it := item.(type) {
		case respMessageOut:
			msg = &it
		case respCallOut:
			calls[it.ID] = it
		}
	}
	for i := range l.next {
		if i == l.msg {
			l.closeMessage(msg)
			continue
		}
		for k, index := range l.calls {
			if index != i {
				continue
			}
			id := callItemID(l.taskID, k)
			call, ok := calls[id]
			if !ok {
				call = respCallOut{ID: id, Type: "function_call", Status: "completed"}
			}
			delete(calls, id)
			l.s.callDone(index, call)
		}
	}
	for _, item := range r.Output {
		switch it := item.(type) {
		case respMessageOut:
			if l.msg >= 0 {
				continue
			}
		case respCallOut:
			if _, left := calls[it.ID]; !left {
				continue
			}
		}
		l.s.item(l.next, item)
		l.next++
	}
	l.s.closing(r)
}

// closeMessage closes the message the stream opened, each part with its
// whole stored text.
func (l *liveItems) closeMessage(msg *respMessageOut) {
	final := respMessageOut{ID: messageItemID(l.taskID), Type: "message", Role: "assistant", Status: "completed", Content: []map[string]any{}}
	if msg != nil {
		final = *msg
	}
	for j, typ := range l.parts {
		part := outputTextPart("")
		if typ == "refusal" {
			part = refusalPart("")
		}
		for _, p := range final.Content {
			if p["type"] == typ {
				part = p
			}
		}
		l.s.partDone(final.ID, l.msg, j, part)
	}
	l.s.emit("response.output_item.done", map[string]any{"output_index": l.msg, "item": final})
}

// streamLive runs the task inline and relays the provider's deltas. The
// stream opens with the first delta: a task that fails before any is
// answered with its error's status, as the chat endpoint answers it, so
// that the SDK's error classes and retries apply.
func streamLive(c echo.Context, d *Deps, created tasks.Created, render func(tasks.Task) respObject) error {
	s := newRespStream(c, -1)
	live := &liveItems{s: s, taskID: created.Task.ID, msg: -1, calls: map[int]int{}}
	opened := false
	native := &nativeRelay{s: s}
	t, err := d.Tasks.RunInline(c.Request().Context(), created, traceIDOf(c), tasks.Stream{
		Deliver: func(delta provider.Delta) bool {
			if delta.Native != nil {
				opened = true
				return native.relay(*delta.Native)
			}
			if !opened {
				opened = true
				s.opening(render(created.Task))
			}
			return live.delta(delta)
		},
	})
	ctx := context.WithoutCancel(c.Request().Context())
	if err != nil {
		if !opened {
			return err
		}
		s.streamError(c, d, err)
		return nil
	}
	if native.relayed {
		native.end(t)
		return nil
	}
	if !opened && t.Status != tasks.StatusSucceeded && t.Status != tasks.StatusCanceled {
		return failedTask(ctx, d, created.Task.OwnerID, t)
	}
	if !opened {
		s.opening(render(created.Task))
	}
	live.finish(render(t))
	return nil
}

// nativeRelay relays a natively carried stream's events as the provider
// sent them.
type nativeRelay struct {
	s       *respStream
	relayed bool   // an event was relayed
	closed  bool   // the last one ended the response
	seq     *int64 // the last event's sequence_number, when it had one
}

// relay writes one provider event as it came; false once the client is
// gone.
func (r *nativeRelay) relay(ev provider.NativeEvent) bool {
	r.relayed = true
	var head struct {
		Seq *int64 `json:"sequence_number"`
	}
	if json.Unmarshal(ev.Data, &head) == nil && head.Seq != nil {
		r.seq = head.Seq
	}
	switch ev.Event {
	case "response.completed", "response.incomplete", "response.failed", "error":
		r.closed = true
	}
	var b strings.Builder
	if ev.Event != "" {
		b.WriteString("event: " + ev.Event + "\n")
	}
	for _, line := range strings.Split(string(ev.Data), "\n") {
		b.WriteString("data: " + line + "\n")
	}
	b.WriteString("\n")
	return r.s.raw(b.String())
}

// end closes a relayed stream the provider did not end (it was cut, or
// Tollgate gave up on it) with an error event numbered after the last.
func (r *nativeRelay) end(t tasks.Task) {
	if r.closed {
		return
	}
	code, msg := tasks.CodeApplicationFailure, "The provider's stream ended before the response did."
	if t.Error != nil {
		code, msg = t.Error.Code, t.Error.Message
	}
	ev := map[string]any{"type": "error", "code": code, "message": msg, "param": nil}
	if r.seq != nil {
		ev["sequence_number"] = *r.seq + 1
	}
	r.s.event("error", ev)
}
