package tasks

import (
	"fmt"
	"slices"

	"github.com/tollgate/tollgate/provider"
)

// The rules of a tool loop, in one place: which messages carry tool calls
// and answers, what a tool call and a tool's name must be, and how tool
// messages answer calls. A chat request (checkChat) and a route's
// continuation (routes.Route.Continue) both follow their messages through
// a ToolLoop, and a route's declared tools meet ValidToolName and
// ValidToolChoiceMode, so the surfaces cannot disagree on what a tool loop
// is.

// ValidToolName reports whether name may name a function tool: OpenAI's
// rule (1-64 letters, digits, '_' or '-'), which every provider kind
// accepts.
func ValidToolName(name string) bool { return namePattern.MatchString(name) }

// ValidToolChoiceMode reports whether mode is a tool_choice mode: "none",
// "auto" or "required" (a named function is the other form).
func ValidToolChoiceMode(mode string) bool { return toolChoiceModes[mode] }

// ToolLoop follows the messages of a conversation, in order, and reports
// every problem of its tool loop through Report. For each message, call
// Begin first, then Carriers and Answer, and Call for each of an assistant
// message's tool calls; End after the last message.
//
// A chat request's loop needs only that a tool message answer a call made
// before it. A route's continuation is Paired: each call must be answered,
// once, by the tool messages right after its assistant message, as
// providers require, so that a broken loop is refused before anything is
// spent.
type ToolLoop struct {
	// Paired asks for the pairing of a continuation: its calls must name
	// one of Declared (a route's tools), and a missing id is worded as a
	// continuation's other input errors are ("is required").
	Paired   bool
	Declared []provider.Tool
	// Report receives each problem: the JSON path of the field at fault
	// and what is wrong with it.
	Report func(field, problem string)

	calls   map[string]*loopCall // every call so far, by id
	pending []string             // ids of the last assistant message's calls (Paired)
}

// loopCall is one tool call as the loop follows it.
type loopCall struct {
	at       string // the field of its id
	answered bool
}

// missing is how a missing id is worded.
func (l *ToolLoop) missing(otherwise string) string {
	if l.Paired {
		return "is required"
	}
	return otherwise
}

// Begin starts the message m at field at ("messages[3]"). A message other
// than a tool's ends the answers to the last assistant message's calls:
// in a Paired loop, each call still unanswered is reported.
func (l *ToolLoop) Begin(at string, m provider.Message) {
	if m.Role != "tool" {
		l.unanswered(" before " + at)
	}
}

// End ends the conversation: in a Paired loop, each call of the last
// assistant message still unanswered is reported.
func (l *ToolLoop) End() { l.unanswered("") }

// unanswered reports the pending calls no tool message answered, before
// the message named by before ("" at the end).
func (l *ToolLoop) unanswered(before string) {
	for _, id := range l.pending {
		if c := l.calls[id]; !c.answered {
			l.Report(c.at, "has no tool message answering it"+before)
		}
	}
	l.pending = nil
}

// Carriers reports what m carries that only an assistant message may:
// tool calls and a refusal.
func (l *ToolLoop) Carriers(at string, m provider.Message) {
	if len(m.ToolCalls) > 0 && m.Role != "assistant" {
		l.Report(at+".tool_calls", "only an assistant message carries tool calls")
	}
	if m.Refusal != "" && m.Role != "assistant" {
		l.Report(at+".refusal", "only an assistant message carries a refusal")
	}
}

// Call checks the j-th tool call of the assistant message at field at,
// and records it for the tool messages that answer it: a unique id, the
// function type, and a name (one of Declared in a Paired loop).
func (l *ToolLoop) Call(at string, j int, tc provider.ToolCall) {
	if l.calls == nil {
		l.calls = map[string]*loopCall{}
	}
	tat := fmt.Sprintf("%s.tool_calls[%d]", at, j)
	switch {
	case tc.ID == "":
		l.Report(tat+".id", l.missing("must not be empty"))
	case l.calls[tc.ID] != nil:
		l.Report(tat+".id", "repeats the id of an earlier tool call")
	default:
		l.calls[tc.ID] = &loopCall{at: tat + ".id"}
		if l.Paired {
			l.pending = append(l.pending, tc.ID)
		}
	}
	if tc.Type != "function" {
		l.Report(tat+".type", `must be "function"`)
	}
	switch {
	case l.Paired && !declares(l.Declared, tc.Function.Name):
		l.Report(tat+".function.name", "is not one of the route's tools")
	case !l.Paired && tc.Function.Name == "":
		l.Report(tat+".function.name", "must not be empty")
	}
}

// declares reports whether tools holds a function named name.
func declares(tools []provider.Tool, name string) bool {
	return slices.ContainsFunc(tools, func(t provider.Tool) bool { return t.Function.Name == name })
}

// Answer checks the tool_call_id of m, the message at field at: only a
// tool message answers a tool call, and it must name a call of an earlier
// assistant message; in a Paired loop, one not answered yet, of the
// assistant message right before the tool messages.
func (l *ToolLoop) Answer(at string, m provider.Message) {
	field := at + ".tool_call_id"
	switch {
	case m.Role != "tool":
		if m.ToolCallID != "" {
			l.Report(field, "only a tool message answers a tool call")
		}
		return
	case m.ToolCallID == "":
		l.Report(field, l.missing("must name the tool call this message answers"))
		return
	}
	c := l.calls[m.ToolCallID]
	switch {
	case c == nil:
		l.Report(field, "names no tool call of an earlier assistant message")
	case !l.Paired:
	case c.answered:
		l.Report(field, "answers a tool call already answered")
	case !slices.Contains(l.pending, m.ToolCallID):
		l.Report(field, "must follow the assistant message that made the call, with only tool messages between")
	default:
		c.answered = true
	}
}
