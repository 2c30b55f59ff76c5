package routes

import (
	"fmt"

	"github.com/tollgate/tollgate/provider"
	"github.com/tollgate/tollgate/tasks"
)

// MaxContinuation bounds a call's continuation: with the route's system
// and user messages it must fit a task.
const MaxContinuation = tasks.MaxMessages - 2

// Continue validates a call's continuation: the conversation after the
// route's rendered prompt, as a tool loop grows it (the assistant's tool
// calls, a tool message answering each, more user turns). The route's
// prompt stays pinned: system and developer messages come from the route
// only. Every tool call must name one of the route's tools and be
// answered by tool messages right after its assistant message, as
// providers require, so a broken loop is refused here rather than by the
// provider. It returns an *InputError naming each field at fault
// ("messages[1].tool_call_id"); nothing has been spent.
func (r *Route) Continue(msgs []provider.Message) error {
	if len(msgs) > MaxContinuation {
		return &InputError{Fields: []FieldError{{"messages", fmt.Sprintf("must hold at most %d messages", MaxContinuation)}}}
	}
	v := &loopCheck{}
	v.loop = tasks.ToolLoop{Paired: true, Declared: r.chat.Tools, Report: v.bad}
	for i, m := range msgs {
		v.message(fmt.Sprintf("messages[%d]", i), m)
	}
	v.loop.End()
	if v.fe != nil {
		return &InputError{Fields: v.fe}
	}
	return nil
}

// loopCheck follows a continuation message by message and collects every
// problem: what each message may carry for its role, and its tool loop
// (tasks.ToolLoop, paired).
type loopCheck struct {
	fe   []FieldError
	loop tasks.ToolLoop
}

func (v *loopCheck) bad(field, msg string) { v.fe = append(v.fe, FieldError{field, msg}) }

// message checks the message at field at.
func (v *loopCheck) message(at string, m provider.Message) {
	v.loop.Begin(at, m)
	switch m.Role {
	case "user", "assistant", "tool":
	case "system", "developer":
		v.bad(at+".role", "the route's prompt is pinned: "+m.Role+" messages come from the route")
		return
	default:
		v.bad(at+".role", "must be user, assistant or tool")
		return
	}
	v.fields(at, m)
	switch m.Role {
	case "user", "tool":
		if m.Content.IsZero() {
			v.bad(at+".content", "must not be empty")
		}
	case "assistant":
		if m.Content.IsZero() && len(m.ToolCalls) == 0 && m.Refusal == "" {
			v.bad(at+".content", "must not be empty without tool_calls or refusal")
		}
		for j, tc := range m.ToolCalls {
			v.loop.Call(at, j, tc)
		}
	}
}

// fields refuses parts other than text, and the tool loop's fields of
// another role; a tool message's answer is checked against the loop.
func (v *loopCheck) fields(at string, m provider.Message) {
	for j, p := range m.Content.Parts {
		if p.Type != provider.PartText {
			v.bad(fmt.Sprintf("%s.content[%d].type", at, j), "a route's continuation carries text parts only")
		}
	}
	v.loop.Carriers(at, m)
	v.loop.Answer(at, m)
}

func (r *Route) hasTool(name string) bool {
	for _, t := range r.chat.Tools {
		if t.Function.Name == name {
			return true
		}
	}
	return false
}

// verdict is how a route answers a succeeded task: with the tool calls the
// model asked for (Message), or with the output guard's value, or with
// the guard's refusal.
type verdict struct {
	Message *provider.Message
	Value   any
	Reason  string
	Err     error
}

// judge decides a verdict from a succeeded task's result. An answer with
// tool calls is not output yet: it goes back to the client, which runs the
// tools and continues; only the final answer meets the output guard. A
// call of a tool the route does not declare is the model's fault, refused
// as output that breaks the route's contract.
func (r *Route) judge(res *tasks.Result) verdict {
	if res == nil {
		v, reason, err := r.Output("")
		return verdict{Value: v, Reason: reason, Err: err}
	}
	if res.Message != nil && len(res.Message.ToolCalls) > 0 {
		for j, tc := range res.Message.ToolCalls {
			if !r.hasTool(tc.Function.Name) {
				return verdict{Reason: ReasonSchema, Err: fmt.Errorf("tool_calls[%d].function.name: not one of the route's tools", j)}
			}
		}
		m := *res.Message
		m.Role = "assistant"
		return verdict{Message: &m}
	}
	v, reason, err := r.Output(res.Output)
	return verdict{Value: v, Reason: reason, Err: err}
}
