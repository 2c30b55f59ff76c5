package server

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/tollgate/tollgate/budget"
	"github.com/tollgate/tollgate/provider"
	"github.com/tollgate/tollgate/tasks"
)

// How a task is answered in OpenAI's chat completion shapes, whole or
// streamed.

type oaiChoice struct {
	Index        int             `json:"index"`
	Message      oaiMessageOut   `json:"message"`
	FinishReason string          `json:"finish_reason"`
	Logprobs     json.RawMessage `json:"logprobs"`
}

// oaiMessageOut is an assistant message as OpenAI answers it: content null
// when the model only called tools or refused, refusal null when it did
// not refuse.
type oaiMessageOut struct {
	Role      string              `json:"role"`
	Content   *string             `json:"content"`
	Refusal   *string             `json:"refusal"`
	ToolCalls []provider.ToolCall `json:"tool_calls,omitempty"`
}

func messageOut(m provider.Message) oaiMessageOut {
	out := oaiMessageOut{Role: "assistant", ToolCalls: m.ToolCalls}
	if text := m.Content.String(); text != "" || (len(m.ToolCalls) == 0 && m.Refusal == "") {
		out.Content = &text
	}
	if m.Refusal != "" {
		out.Refusal = &m.Refusal
	}
	return out
}

type oaiUsage struct {
	PromptTokens            int64                `json:"prompt_tokens"`
	CompletionTokens        int64                `json:"completion_tokens"`
	TotalTokens             int64                `json:"total_tokens"`
	PromptTokensDetails     oaiPromptDetails     `json:"prompt_tokens_details"`
	CompletionTokensDetails oaiCompletionDetails `json:"completion_tokens_details"`
}

type oaiPromptDetails struct {
	CachedTokens int64 `json:"cached_tokens"`
}

type oaiCompletionDetails struct {
	ReasoningTokens int64 `json:"reasoning_tokens"`
}

// usageOut is a task's usage in OpenAI's shape, its classes as OpenAI's
// details; the total saturates rather than wrapping, whatever figures were
// stored.
func usageOut(u tasks.Usage) oaiUsage {
	return oaiUsage{PromptTokens: u.InputTokens, CompletionTokens: u.OutputTokens, TotalTokens: budget.SaturatingAdd(u.InputTokens, u.OutputTokens),
		PromptTokensDetails:     oaiPromptDetails{CachedTokens: u.CachedInputTokens},
		CompletionTokensDetails: oaiCompletionDetails{ReasoningTokens: u.ReasoningTokens}}
}

type oaiCompletion struct {
	ID                string      `json:"id"`
	Object            string      `json:"object"`
	Created           int64       `json:"created"`
	Model             string      `json:"model"`
	Choices           []oaiChoice `json:"choices"`
	Usage             oaiUsage    `json:"usage"`
	SystemFingerprint string      `json:"system_fingerprint,omitempty"`
}

func completionID(taskID string) string { return "chatcmpl-" + strings.ReplaceAll(taskID, "-", "") }

// finishOut is a choice's finish reason as OpenAI names it: a provider's
// own "end_turn", or none, is stop, or tool_calls when the model called
// tools.
func finishOut(reason string, m provider.Message) string {
	if reason == "" || reason == "end_turn" {
		if len(m.ToolCalls) > 0 {
			return "tool_calls"
		}
		return "stop"
	}
	return reason
}

// answerChoices is every choice of a succeeded task, the first from its
// message when it had one choice.
func answerChoices(r *tasks.Result) []tasks.Choice {
	if len(r.Choices) > 0 {
		return r.Choices
	}
	m := provider.Message{Role: "assistant", Content: provider.Text(r.Output)}
	if r.Message != nil {
		m = *r.Message
	}
	return []tasks.Choice{{Message: m, FinishReason: r.FinishReason, Logprobs: r.Logprobs}}
}

// nullJSON is null for an absent JSON value.
func nullJSON(v json.RawMessage) json.RawMessage {
	if len(v) == 0 {
		return json.RawMessage("null")
	}
	return v
}

func completionOf(t tasks.Task) oaiCompletion {
	out := oaiCompletion{
		ID: completionID(t.ID), Object: "chat.completion", Created: t.CreatedAt.Unix(), Model: t.Result.Model,
		Usage: usageOut(t.Result.Usage), SystemFingerprint: t.Result.SystemFingerprint,
	}
	for i, c := range answerChoices(t.Result) {
		out.Choices = append(out.Choices, oaiChoice{Index: choiceIndex(i, c), Message: messageOut(c.Message),
			FinishReason: finishOut(c.FinishReason, c.Message), Logprobs: nullJSON(c.Logprobs)})
	}
	return out
}

// choiceIndex is the i-th choice's index: its own, or its position when
// the provider numbered none.
func choiceIndex(i int, c tasks.Choice) int {
	if c.Index == 0 {
		return i
	}
	return c.Index
}

// sse writes OpenAI chat.completion.chunk events.
type sse struct {
	eventStream
	// opened are the choices whose first chunk (the role) was sent.
	opened map[int]bool
}

func newSSE(c echo.Context) *sse { return &sse{eventStream: eventStream{c: c}, opened: map[int]bool{}} }

// openChoice sends a choice's first chunk, its role, once.
func (s *sse) openChoice(t tasks.Task, choice int) {
	if s.opened[choice] {
		return
	}
	s.opened[choice] = true
	s.send(s.chunk(t, choice, map[string]any{"role": "assistant", "content": ""}, nil, nil))
}

func (s *sse) chunk(t tasks.Task, choice int, delta map[string]any, finish *string, usage *oaiUsage) map[string]any {
	choices := []map[string]any{}
	if delta != nil || finish != nil {
		if delta == nil {
			delta = map[string]any{}
		}
		choices = append(choices, map[string]any{"index": choice, "delta": delta, "finish_reason": finish, "logprobs": nil})
	}
	out := map[string]any{"id": completionID(t.ID), "object": "chat.completion.chunk", "created": t.CreatedAt.Unix(),
		"model": t.Model, "choices": choices, "usage": usage}
	if t.Result != nil && t.Result.SystemFingerprint != "" {
		out["system_fingerprint"] = t.Result.SystemFingerprint
	}
	return out
}

// send writes one chunk; it reports false once the client is gone.
func (s *sse) send(v any) bool { return s.event("", v) }

// delta relays one piece of the answer in OpenAI's chunk format: text,
// refusal, or a tool call's fragment (its first fragment carries id, type
// and name; later ones more arguments).
func (s *sse) delta(t tasks.Task, d provider.Delta) bool {
	if d.Content == "" && d.Refusal == "" && d.ToolCall == nil {
		// Thinking: chat completions have no place for it.
		return !s.gone
	}
	s.openChoice(t, d.Choice)
	delta := map[string]any{}
	if d.Content != "" {
		delta["content"] = d.Content
	}
	if d.Refusal != "" {
		delta["refusal"] = d.Refusal
	}
	if tc := d.ToolCall; tc != nil {
		call := map[string]any{"index": tc.Index}
		fn := map[string]any{"arguments": tc.Arguments}
		if tc.ID != "" {
			call["id"], call["type"] = tc.ID, "function"
		}
		if tc.Name != "" {
			fn["name"] = tc.Name
		}
		call["function"] = fn
		delta["tool_calls"] = []any{call}
	}
	return s.send(s.chunk(t, d.Choice, delta, nil, nil))
}

// replay streams a stored answer: each choice as the deltas a stream of it
// would have carried.
func (s *sse) replay(t tasks.Task) {
	for i, c := range answerChoices(t.Result) {
		idx := choiceIndex(i, c)
		s.openChoice(t, idx)
		if text := c.Message.Content.String(); text != "" {
			s.delta(t, provider.Delta{Choice: idx, Content: text})
		}
		if c.Message.Refusal != "" {
			s.delta(t, provider.Delta{Choice: idx, Refusal: c.Message.Refusal})
		}
		for j, tc := range c.Message.ToolCalls {
			s.delta(t, provider.Delta{Choice: idx, ToolCall: &provider.ToolCallDelta{Index: j, ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments}})
		}
	}
}

// finish ends the stream: each choice's finish reason, then the usage
// when asked for.
func (s *sse) finish(t tasks.Task, withUsage bool) error {
	s.begin()
	var choices []tasks.Choice
	if t.Result != nil {
		choices = answerChoices(t.Result)
	} else {
		choices = []tasks.Choice{{}}
	}
	for i, c := range choices {
		idx := choiceIndex(i, c)
		s.openChoice(t, idx)
		finish := finishOut(c.FinishReason, c.Message)
		s.send(s.chunk(t, idx, nil, &finish, nil))
	}
	if withUsage && t.Result != nil {
		usage := usageOut(t.Result.Usage)
		s.send(s.chunk(t, 0, nil, nil, &usage))
	}
	s.raw("data: [DONE]\n\n")
	return nil
}

// streamCompletion runs the task inline and relays the provider's stream.
// The upstream call does not depend on this connection: a client that
// leaves does not stop it, and the task is settled all the same.
func streamCompletion(c echo.Context, d *Deps, created tasks.Created, withUsage bool) error {
	out := newSSE(c)
	t, err := d.Tasks.RunInline(c.Request().Context(), created, traceIDOf(c), tasks.Stream{
		Deliver: func(delta provider.Delta) bool { return out.delta(created.Task, delta) },
	})
	if err != nil {
		if out.started {
			// Too late for a status: the client gets the error in the
			// stream, and the failure is logged like any 500.
			logFailure(d.Logger, c, http.StatusInternalServerError, err)
			out.send(map[string]any{"error": map[string]any{"message": "Tollgate failed to finish the stream.", "type": "server_error", "code": "application_failure", "param": nil}})
			return nil
		}
		return err
	}
	if t.Status != tasks.StatusSucceeded {
		if out.started {
			// Too late for a status code: the error goes in the stream,
			// as OpenAI sends it.
			_, body := oaiError(&taskFailed{task: t})
			out.send(body)
			return nil
		}
		return failedTask(context.WithoutCancel(c.Request().Context()), d, created.Task.OwnerID, t)
	}
	return out.finish(t, withUsage)
}
