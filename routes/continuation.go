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
	var fe []FieldError
	bad := func(field, msg string) { fe = append(fe, FieldError{field, msg}) }
	if len(msgs) > MaxContinuation {
		bad("messages", fmt.Sprintf("must hold at most %d messages", MaxContinuation))
		return &InputError{Fields: fe}
	}
	type call struct {
		at       string // the field of its id
		answered bool
	}
	calls := map[string]*call{} // every call of the continuation, by id
	var pending []string        // ids of the last assistant message's calls not answered yet
	unanswered := func(before string) {
		for _, id := range pending {
			if !calls[id].answered {
				bad(calls[id].at, "has no tool message answering it"+before)
			}
		}
		pending = nil
	}
	for i, m := range msgs {
		at := fmt.Sprintf("messages[%d]", i)
		if m.Role != "tool" {
			unanswered(" before " + at)
		}
		switch m.Role {
		case "user", "assistant", "tool":
		case "system", "developer":
			bad(at+".role", "the route's prompt is pinned: "+m.Role+" messages come from the route")
			continue
		default:
			bad(at+".role", "must be user, assistant or tool")
			continue
		}
		for j, p := range m.Content.Parts {
			if p.Type != provider.PartText {
				bad(fmt.Sprintf("%s.content[%d].type", at, j), "a route's continuation carries text parts only")
			}
		}
		if m.Role != "assistant" {
			if len(m.ToolCalls) > 0 {
				bad(at+".tool_calls", "only an assistant message carries tool calls")
			}
			if m.Refusal != "" {
				bad(at+".refusal", "only an assistant message carries a refusal")
			}
		}
		if m.Role != "tool" && m.ToolCallID != "" {
			bad(at+".tool_call_id", "only a tool message answers a tool call")
		}
		switch m.Role {
		case "user":
			if m.Content.IsZero() {
				bad(at+".content", "must not be empty")
			}
		case "assistant":
			if m.Content.IsZero() && len(m.ToolCalls) == 0 && m.Refusal == "" {
				bad(at+".content", "must not be empty without tool_calls or refusal")
			}
			for j, tc := range m.ToolCalls {
				tat := fmt.Sprintf("%s.tool_calls[%d]", at, j)
				switch {
				case tc.ID == "":
					bad(tat+".id", "is required")
				case calls[tc.ID] != nil:
					bad(tat+".id", "repeats the id of an earlier tool call")
				default:
					calls[tc.ID] = &call{at: tat + ".id"}
					pending = append(pending, tc.ID)
				}
				if tc.Type != "function" {
					bad(tat+".type", `must be "function"`)
				}
				if !r.hasTool(tc.Function.Name) {
					bad(tat+".function.name", "is not one of the route's tools")
				}
			}
		case "tool":
			c := calls[m.ToolCallID]
			switch {
			case m.ToolCallID == "":
				bad(at+".tool_call_id", "is required")
			case c == nil:
				bad(at+".tool_call_id", "names no tool call of an earlier assistant message")
			case c.answered:
				bad(at+".tool_call_id", "answers a tool call already answered")
			case !contains(pending, m.ToolCallID):
				bad(at+".tool_call_id", "must follow the assistant message that made the call, with only tool messages between")
			default:
				c.answered = true
			}
			if m.Content.IsZero() {
				bad(at+".content", "must not be empty")
			}
		}
	}
	unanswered("")
	if fe != nil {
		return &InputError{Fields: fe}
	}
	return nil
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
