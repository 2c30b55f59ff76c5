package server

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/tollgate/tollgate/provider"
	"github.com/tollgate/tollgate/tasks"
)

// How a task is answered in Anthropic's Message shape.

type antMessageOut struct {
	ID           string        `json:"id"`
	Type         string        `json:"type"`
	Role         string        `json:"role"`
	Model        string        `json:"model"`
	Content      []antBlockOut `json:"content"`
	StopReason   *string       `json:"stop_reason"`
	StopSequence *string       `json:"stop_sequence"`
	Usage        antUsage      `json:"usage"`
}

// antBlockOut is a content block of an answer: text, thinking,
// redacted_thinking or tool_use.
type antBlockOut struct {
	Type      string          `json:"type"`
	Text      *string         `json:"text,omitempty"`
	Thinking  *string         `json:"thinking,omitempty"`
	Signature *string         `json:"signature,omitempty"`
	Data      string          `json:"data,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
}

// antUsage is Anthropic's usage: input_tokens counts only the prompt
// tokens neither read from nor written to the cache, which are counted
// apart.
type antUsage struct {
	InputTokens              int64 `json:"input_tokens"`
	OutputTokens             int64 `json:"output_tokens"`
	CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
}

// antUsageOf is a task's usage in Anthropic's terms: Tollgate counts the
// whole prompt as input, cache reads and writes included, so they are
// taken out of it (never below zero, whatever a provider reported).
func antUsageOf(u tasks.Usage) antUsage {
	in := u.InputTokens
	for _, c := range []int64{u.CachedInputTokens, u.CacheWriteTokens} {
		if c > 0 {
			in -= min(c, in)
		}
	}
	return antUsage{InputTokens: max(in, 0), OutputTokens: u.OutputTokens,
		CacheCreationInputTokens: max(u.CacheWriteTokens, 0), CacheReadInputTokens: max(u.CachedInputTokens, 0)}
}

func antMessageID(taskID string) string { return "msg_" + strings.ReplaceAll(taskID, "-", "") }

// antAnswerChoice is a succeeded task's one answer.
func antAnswerChoice(t tasks.Task) tasks.Choice {
	if t.Result == nil {
		return tasks.Choice{Message: provider.Message{Role: "assistant"}}
	}
	return answerChoices(t.Result)[0]
}

// antStop is the answer's stop_reason and stop_sequence: the provider's
// own reason when it was kept, else the one its finish reason stands for
// (a refusal is refusal).
func antStop(c tasks.Choice) (reason string, sequence *string) {
	reason = c.StopReason
	if reason == "" {
		reason = provider.AnthropicStopReason(finishOut(c.FinishReason, c.Message))
		if c.Message.Refusal != "" && reason == "end_turn" {
			reason = "refusal"
		}
	}
	if c.StopSequence != "" {
		s := c.StopSequence
		sequence = &s
	}
	return reason, sequence
}

// errToolInput: the model called a tool with arguments that are not a
// JSON object (an OpenAI-compatible model may), which a tool_use block
// cannot hold.
var errToolInput = &apiError{status: http.StatusBadGateway, code: tasks.CodeIncompatibleModelResponse,
	detail: "The model called a tool with arguments that are not a JSON object, which the Messages API cannot carry; the task holds the answer as the model gave it."}

// antToolInput is a tool call's arguments as a tool_use input.
func antToolInput(args string) (json.RawMessage, bool) {
	if strings.TrimSpace(args) == "" {
		return json.RawMessage(`{}`), true
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, []byte(args)); err != nil || buf.Len() == 0 || buf.Bytes()[0] != '{' {
		return nil, false
	}
	return buf.Bytes(), true
}

// antBlocksOf is an answer's blocks, in order: its parts (thinking,
// redacted thinking, text) or its text, its refusal as text, then its
// tool calls.
func antBlocksOf(m provider.Message) ([]antBlockOut, error) {
	out := []antBlockOut{}
	text := func(s string) { out = append(out, antBlockOut{Type: "text", Text: &s}) }
	if m.Content.Parts == nil && m.Content.Text != "" {
		text(m.Content.Text)
	}
	for _, p := range m.Content.Parts {
		switch p.Type {
		case provider.PartText:
			text(p.Text)
		case provider.PartThinking:
			thinking, signature := p.Thinking, p.Signature
			out = append(out, antBlockOut{Type: "thinking", Thinking: &thinking, Signature: &signature})
		case provider.PartRedactedThinking:
			out = append(out, antBlockOut{Type: "redacted_thinking", Data: p.Data})
		}
	}
	if m.Refusal != "" {
		text(m.Refusal)
	}
	for _, tc := range m.ToolCalls {
		input, ok := antToolInput(tc.Function.Arguments)
		if !ok {
			return nil, errToolInput
		}
		out = append(out, antBlockOut{Type: "tool_use", ID: tc.ID, Name: tc.Function.Name, Input: input})
	}
	return out, nil
}

// antMessageOf is a succeeded task as a Message.
func antMessageOf(t tasks.Task) (antMessageOut, error) {
	c := antAnswerChoice(t)
	blocks, err := antBlocksOf(c.Message)
	if err != nil {
		return antMessageOut{}, err
	}
	reason, sequence := antStop(c)
	return antMessageOut{ID: antMessageID(t.ID), Type: "message", Role: "assistant", Model: t.Result.Model,
		Content: blocks, StopReason: &reason, StopSequence: sequence, Usage: antUsageOf(t.Result.Usage)}, nil
}
