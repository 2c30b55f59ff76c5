package server

import (
	"fmt"
	"strings"

	"github.com/tollgate/tollgate/budget"
	"github.com/tollgate/tollgate/provider"
	"github.com/tollgate/tollgate/tasks"
)

// How a task is answered as OpenAI's Response object: its status, its
// output items, its usage, and the parameters it was created with, all
// read from the task and its stored request, so that a response reads
// the same whenever and wherever it is fetched.

type respObject struct {
	ID                 string            `json:"id"`
	Object             string            `json:"object"`
	CreatedAt          int64             `json:"created_at"`
	CompletedAt        *int64            `json:"completed_at"`
	Status             string            `json:"status"`
	Background         bool              `json:"background"`
	Error              *respError        `json:"error"`
	IncompleteDetails  *respIncomplete   `json:"incomplete_details"`
	Instructions       *string           `json:"instructions"`
	MaxOutputTokens    *int              `json:"max_output_tokens"`
	Model              string            `json:"model"`
	Output             []any             `json:"output"`
	ParallelToolCalls  bool              `json:"parallel_tool_calls"`
	PreviousResponseID *string           `json:"previous_response_id"`
	Reasoning          respReasoningOut  `json:"reasoning"`
	Store              bool              `json:"store"`
	Temperature        *float64          `json:"temperature"`
	Text               respTextOut       `json:"text"`
	ToolChoice         any               `json:"tool_choice"`
	Tools              []respToolOut     `json:"tools"`
	TopP               *float64          `json:"top_p"`
	Truncation         string            `json:"truncation"`
	Usage              *respUsage        `json:"usage"`
	User               *string           `json:"user"`
	SafetyIdentifier   *string           `json:"safety_identifier"`
	Metadata           map[string]string `json:"metadata"`

	asked string // the model the client named, which a stream's first events carry
}

type respError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

type respIncomplete struct {
	Reason string `json:"reason"` // max_output_tokens or content_filter
}

type respReasoningOut struct {
	Effort  *string `json:"effort"`
	Summary *string `json:"summary"`
}

type respTextOut struct {
	Format    any     `json:"format"`
	Verbosity *string `json:"verbosity,omitempty"`
}

type respToolOut struct {
	Type        string  `json:"type"`
	Name        string  `json:"name"`
	Description *string `json:"description"`
	Parameters  any     `json:"parameters"`
	Strict      *bool   `json:"strict"`
}

type respUsage struct {
	InputTokens         int64             `json:"input_tokens"`
	InputTokensDetails  respInputDetails  `json:"input_tokens_details"`
	OutputTokens        int64             `json:"output_tokens"`
	OutputTokensDetails respOutputDetails `json:"output_tokens_details"`
	TotalTokens         int64             `json:"total_tokens"`
}

type respInputDetails struct {
	CachedTokens int64 `json:"cached_tokens"`
}

type respOutputDetails struct {
	ReasoningTokens int64 `json:"reasoning_tokens"`
}

// respMessageOut is an output message item.
type respMessageOut struct {
	ID      string           `json:"id"`
	Type    string           `json:"type"`
	Role    string           `json:"role"`
	Status  string           `json:"status"`
	Content []map[string]any `json:"content"`
}

// respCallOut is an output function_call item.
type respCallOut struct {
	ID        string `json:"id"`
	Type      string `json:"type"`
	CallID    string `json:"call_id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
	Status    string `json:"status"`
}

func outputTextPart(text string) map[string]any {
	return map[string]any{"type": "output_text", "text": text, "annotations": []any{}, "logprobs": []any{}}
}

func refusalPart(text string) map[string]any {
	return map[string]any{"type": "refusal", "refusal": text}
}

// Output item ids are derived from the task, so every rendering of a
// response, live or stored, names its items alike.
func messageItemID(taskID string) string { return "msg_" + strings.ReplaceAll(taskID, "-", "") }

func callItemID(taskID string, i int) string {
	return fmt.Sprintf("fc_%s_%d", strings.ReplaceAll(taskID, "-", ""), i)
}

// responseStatus is a task's status in Responses' terms. A task whose
// cancel waits for its running call is cancelled already: it ends so.
// A length- or filter-cut answer is incomplete, with the reason.
func responseStatus(t tasks.Task) (string, *respIncomplete) {
	switch {
	case t.Status == tasks.StatusSucceeded && t.Result != nil:
		switch t.Result.FinishReason {
		case "length":
			return "incomplete", &respIncomplete{Reason: "max_output_tokens"}
		case "content_filter":
			return "incomplete", &respIncomplete{Reason: "content_filter"}
		}
		return "completed", nil
	case t.Status == tasks.StatusSucceeded:
		return "completed", nil
	case t.Status == tasks.StatusFailed:
		return "failed", nil
	case t.Status == tasks.StatusCanceled, t.CancelRequested:
		return "cancelled", nil
	case t.Status == tasks.StatusRunning:
		return "in_progress", nil
	}
	return "queued", nil
}

// responseOf renders the task t, created from req (the request as the
// client sent it); detail shapes a failed task's error.
func responseOf(t tasks.Task, req tasks.Request, detail tasks.FailureDetail) respObject {
	conv := tasks.Conversation{}
	if req.Conversation != nil {
		conv = *req.Conversation
	}
	out := respObject{ID: responseID(t.ID), Object: "response", CreatedAt: t.CreatedAt.Unix(), Model: t.Model, asked: t.Model,
		Background: conv.Background, Store: !conv.Unstored, Output: []any{}, ParallelToolCalls: true,
		Temperature: req.Temperature, TopP: req.TopP, Truncation: "disabled", Tools: []respToolOut{},
		ToolChoice: "auto", Metadata: map[string]string{}}
	out.Status, out.IncompleteDetails = responseStatus(t)
	echoRequest(&out, req, conv)
	for k, v := range t.Metadata {
		out.Metadata[k] = fmt.Sprint(v)
	}
	if t.Status == tasks.StatusSucceeded && t.Result != nil {
		if t.Result.Model != "" {
			out.Model = t.Result.Model
		}
		out.Output = outputItems(t, out.Status)
		u := t.Result.Usage
		out.Usage = &respUsage{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens,
			TotalTokens:         budget.SaturatingAdd(u.InputTokens, u.OutputTokens),
			InputTokensDetails:  respInputDetails{CachedTokens: u.CachedInputTokens},
			OutputTokensDetails: respOutputDetails{ReasoningTokens: u.ReasoningTokens}}
	}
	if t.FinishedAt != nil && out.Status == "completed" {
		at := t.FinishedAt.Unix()
		out.CompletedAt = &at
	}
	if out.Status == "failed" {
		f := tasks.Failure{Code: tasks.CodeApplicationFailure, Message: "Tollgate failed to run the task."}
		if t.Error != nil {
			f = *t.Error
		}
		a := oaiFailure(f, detail, 0)
		out.Error = &respError{Code: a.code, Message: a.message}
	}
	return out
}

// echoRequest sets the parameters the response was created with.
func echoRequest(out *respObject, req tasks.Request, conv tasks.Conversation) {
	if conv.Instructions && len(req.Messages) > 0 {
		text := req.Messages[0].Content.String()
		out.Instructions = &text
	}
	if conv.Previous != "" {
		prev := responseID(conv.Previous)
		out.PreviousResponseID = &prev
	}
	if req.MaxCompletionTokens > 0 {
		n := req.MaxCompletionTokens
		out.MaxOutputTokens = &n
	}
	if req.ParallelToolCalls != nil {
		out.ParallelToolCalls = *req.ParallelToolCalls
	}
	if req.ReasoningEffort != "" {
		effort := req.ReasoningEffort
		out.Reasoning.Effort = &effort
	}
	out.Text.Format = map[string]any{"type": "text"}
	if rf := req.ResponseFormat; rf != nil {
		f := map[string]any{"type": rf.Type}
		if js := rf.JSONSchema; js != nil {
			f["name"], f["schema"], f["strict"] = js.Name, rawOrNull(js.Schema), js.Strict
			if js.Description != "" {
				f["description"] = js.Description
			}
		}
		out.Text.Format = f
	}
	if req.Verbosity != "" {
		v := req.Verbosity
		out.Text.Verbosity = &v
	}
	for _, tool := range req.Tools {
		o := respToolOut{Type: "function", Name: tool.Function.Name, Parameters: rawOrNull(tool.Function.Parameters), Strict: tool.Function.Strict}
		if d := tool.Function.Description; d != "" {
			o.Description = &d
		}
		out.Tools = append(out.Tools, o)
	}
	if tc := req.ToolChoice; tc != nil {
		out.ToolChoice = tc.Mode
		if tc.Function != "" {
			out.ToolChoice = map[string]any{"type": "function", "name": tc.Function}
		}
	}
	if req.User != "" {
		u := req.User
		out.User = &u
	}
	if req.SafetyIdentifier != "" {
		s := req.SafetyIdentifier
		out.SafetyIdentifier = &s
	}
}

// rawOrNull is a stored JSON value, null when none.
func rawOrNull(raw []byte) any {
	if len(raw) == 0 {
		return nil
	}
	return rawJSON(raw)
}

// rawJSON marshals as the JSON it holds.
type rawJSON []byte

func (r rawJSON) MarshalJSON() ([]byte, error) { return r, nil }

// outputItems are a succeeded task's output: its message (text and
// refusal), then one function_call item per tool call.
func outputItems(t tasks.Task, status string) []any {
	m := answerChoices(t.Result)[0].Message
	itemStatus := "completed"
	if status == "incomplete" {
		itemStatus = "incomplete"
	}
	out := []any{}
	if msg, ok := respMessage(t.ID, m, itemStatus); ok {
		out = append(out, msg)
	}
	for i, tc := range m.ToolCalls {
		out = append(out, respCallOut{ID: callItemID(t.ID, i), Type: "function_call", CallID: tc.ID,
			Name: tc.Function.Name, Arguments: tc.Function.Arguments, Status: itemStatus})
	}
	return out
}

// respMessage is the message item of an answer: its text, its refusal, or
// an empty text when the model said nothing and called no tool.
func respMessage(taskID string, m provider.Message, status string) (respMessageOut, bool) {
	text := m.Content.String()
	if text == "" && m.Refusal == "" && len(m.ToolCalls) > 0 {
		return respMessageOut{}, false
	}
	content := []map[string]any{}
	if text != "" || m.Refusal == "" {
		content = append(content, outputTextPart(text))
	}
	if m.Refusal != "" {
		content = append(content, refusalPart(m.Refusal))
	}
	return respMessageOut{ID: messageItemID(taskID), Type: "message", Role: "assistant", Status: status, Content: content}, true
}

// snapshot is the response as a stream's first events show it: the
// given status, nothing produced yet.
func (r respObject) snapshot(status string) respObject {
	s := r
	s.Status, s.Output, s.Usage, s.Error, s.IncompleteDetails, s.CompletedAt = status, []any{}, nil, nil, nil, nil
	s.Model = r.asked
	return s
}
