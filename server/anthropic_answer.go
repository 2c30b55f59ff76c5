package server

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/tollgate/tollgate/internal/anthropicwire"
	"github.com/tollgate/tollgate/provider"
	"github.com/tollgate/tollgate/tasks"
)

// How a task is answered in Anthropic's Message shape.

// antUsageOf is a task's usage in Anthropic's terms: Tollgate counts the
// whole prompt as input, cache reads and writes included, so they are
// taken out of it (never below zero, whatever a provider reported).
func antUsageOf(u tasks.Usage) anthropicwire.Usage {
	in := u.InputTokens
	for _, c := range []int64{u.CachedInputTokens, u.CacheWriteTokens} {
		if c > 0 {
			in -= min(c, in)
		}
	}
	return anthropicwire.FullUsage(max(in, 0), u.OutputTokens, max(u.CacheWriteTokens, 0), max(u.CachedInputTokens, 0))
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
func antBlocksOf(m provider.Message) ([]anthropicwire.ResponseBlock, error) {
	out := []anthropicwire.ResponseBlock{}
	text := func(s string) { out = append(out, anthropicwire.ResponseBlock{Type: "text", Text: &s}) }
	if m.Content.Parts == nil && m.Content.Text != "" {
		text(m.Content.Text)
	}
	for _, p := range m.Content.Parts {
		switch p.Type {
		case provider.PartText:
			text(p.Text)
		case provider.PartThinking:
			thinking, signature := p.Thinking, p.Signature
			out = append(out, anthropicwire.ResponseBlock{Type: "thinking", Thinking: &thinking, Signature: &signature})
		case provider.PartRedactedThinking:
			out = append(out, anthropicwire.ResponseBlock{Type: "redacted_thinking", Data: p.Data})
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
		out = append(out, anthropicwire.ResponseBlock{Type: "tool_use", ID: tc.ID, Name: tc.Function.Name, Input: input})
	}
	return out, nil
}

// antMessageOf is a succeeded task as a Message.
func antMessageOf(t tasks.Task) (anthropicwire.Response, error) {
	c := antAnswerChoice(t)
	blocks, err := antBlocksOf(c.Message)
	if err != nil {
		return anthropicwire.Response{}, err
	}
	reason, sequence := antStop(c)
	usage := antUsageOf(t.Result.Usage)
	return anthropicwire.Response{ID: antMessageID(t.ID), Type: "message", Role: "assistant", Model: t.Result.Model,
		Content: blocks, StopReason: &reason, StopSequence: sequence, Usage: &usage}, nil
}
