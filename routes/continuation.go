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
	v := loopCheck{r: r, calls: map[string]*toolCall{}}
	for i, m := range msgs {
		v.message(fmt.Sprintf("messages[%d]", i), m)
	}
	v.unanswered("")
	if v.fe != nil {
		return &InputError{Fields: v.fe}
	}
	return nil
}

// toolCall is one tool call of a continuation, as the check follows it.
type toolCall struct {
	at       string // the field of its id
	answered bool
}

// loopCheck follows a continuation message by message and collects every
// problem: what each message may carry for its role, and the tool loop's
// pairing of calls and answers.
type loopCheck struct {
	r       *Route
	fe      []FieldError
	calls   map[string]*toolCall // every call of the continuation, by id
	pending []string             // ids of the last assistant message's calls not answered yet
}

func (v *loopCheck) bad(field, msg string) { v.fe = append(v.fe, FieldError{field, msg}) }

// unanswered reports the pending calls no tool message answered, before
// the message named by before ("" at the end).
func (v *loopCheck) unanswered(before string) {
	for _, id := range v.pending {
		if !v.calls[id].answered {
			v.bad(v.calls[id].at, "has no tool message answering it"+before)
		}
	}
	v.pending = nil
}

// message checks the message at field at.
func (v *loopCheck) message(at string, m provider.Message) {
	if m.Role != "tool" {
		v.unanswered(" before " + at)
	}
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
	case "user":
		if m.Content.IsZero() {
			v.bad(at+".content", "must not be empty")
		}
	case "assistant":
		v.assistant(at, m)
	case "tool":
		v.tool(at, m)
	}
}

// fields refuses parts other than text, and the fields of another role.
func (v *loopCheck) fields(at string, m provider.Message) {
	for j, p := range m.Content.Parts {
		if p.Type != provider.PartText {
			v.bad(fmt.Sprintf("%s.content[%d].type", at, j), "a route's continuation carries text parts only")
		}
	}
	if m.Role != "assistant" && len(m.ToolCalls) > 0 {
		v.bad(at+".tool_calls", "only an assistant message carries tool calls")
	}
	if m.Role != "assistant" && m.Refusal != "" {
		v.bad(at+".refusal", "only an assistant message carries a refusal")
	}
	if m.Role != "tool" && m.ToolCallID != "" {
		v.bad(at+".tool_call_id", "only a tool message answers a tool call")
	}
}

// assistant checks an assistant message and makes its calls pending.
func (v *loopCheck) assistant(at string, m provider.Message) {
	if m.Content.IsZero() && len(m.ToolCalls) == 0 && m.Refusal == "" {
		v.bad(at+".content", "must not be empty without tool_calls or refusal")
	}
	for j, tc := range m.ToolCalls {
		tat := fmt.Sprintf("%s.tool_calls[%d]", at, j)
		switch {
		case tc.ID == "":
			v.bad(tat+".id", "is required")
		case v.calls[tc.ID] != nil:
			v.bad(tat+".id", "repeats the id of an earlier tool call")
		default:
			v.calls[tc.ID] = &toolCall{at: tat + ".id"}
			v.pending = append(v.pending, tc.ID)
		}
		if tc.Type != "function" {
			v.bad(tat+".type", `must be "function"`)
		}
		if !v.r.hasTool(tc.Function.Name) {
			v.bad(tat+".function.name", "is not one of the route's tools")
		}
	}
}

// tool checks a tool message: it answers, once, a pending call.
func (v *loopCheck) tool(at string, m provider.Message) {
	c := v.calls[m.ToolCallID]
	switch {
	case m.ToolCallID == "":
		v.bad(at+".tool_call_id", "is required")
	case c == nil:
		v.bad(at+".tool_call_id", "names no tool call of an earlier assistant message")
	case c.answered:
		v.bad(at+".tool_call_id", "answers a tool call already answered")
	case !contains(v.pending, m.ToolCallID):
		v.bad(at+".tool_call_id", "must follow the assistant message that made the call, with only tool messages between")
	default:
		c.answered = true
	}
	if m.Content.IsZero() {
		v.bad(at+".content", "must not be empty")
	}
}

func (r *Route) hasTool(name string) bool {
	for _, t := range r.chat.Tools {
		if t.Function.Name == name {
			return true
		}
	}
	return false
}

func contains(ids []string, id string) bool {
	for _, x := range ids {
		if x == id {
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
