package server

import (
	"context"
	"encoding/json"
	"fmt"
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
	Index        int               `json:"index"`
	Message      map[string]string `json:"message"`
	FinishReason string            `json:"finish_reason"`
	Logprobs     *struct{}         `json:"logprobs"`
}

type oaiUsage struct {
	PromptTokens     int64 `json:"prompt_tokens"`
	CompletionTokens int64 `json:"completion_tokens"`
	TotalTokens      int64 `json:"total_tokens"`
}

// usageOut is a task's usage in OpenAI's shape; the total saturates
// rather than wrapping, whatever figures were stored.
func usageOut(u tasks.Usage) oaiUsage {
	return oaiUsage{PromptTokens: u.InputTokens, CompletionTokens: u.OutputTokens, TotalTokens: budget.SaturatingAdd(u.InputTokens, u.OutputTokens)}
}

type oaiCompletion struct {
	ID      string      `json:"id"`
	Object  string      `json:"object"`
	Created int64       `json:"created"`
	Model   string      `json:"model"`
	Choices []oaiChoice `json:"choices"`
	Usage   oaiUsage    `json:"usage"`
}

func completionID(taskID string) string { return "chatcmpl-" + strings.ReplaceAll(taskID, "-", "") }

func completionOf(t tasks.Task) oaiCompletion {
	u := t.Result.Usage
	finish := t.Result.FinishReason
	if finish == "" || finish == "end_turn" {
		finish = "stop"
	}
	return oaiCompletion{
		ID: completionID(t.ID), Object: "chat.completion", Created: t.CreatedAt.Unix(), Model: t.Result.Model,
		Choices: []oaiChoice{{Message: map[string]string{"role": "assistant", "content": t.Result.Output}, FinishReason: finish}},
		Usage:   usageOut(u),
	}
}

// sse writes OpenAI chat.completion.chunk events.
type sse struct {
	c       echo.Context
	started bool
	gone    bool
}

func newSSE(c echo.Context) *sse { return &sse{c: c} }

func (s *sse) start(t tasks.Task) {
	if s.started {
		return
	}
	s.started = true
	h := s.c.Response().Header()
	h.Set(echo.HeaderContentType, "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	s.c.Response().WriteHeader(http.StatusOK)
	s.send(s.chunk(t, map[string]string{"role": "assistant", "content": ""}, nil, nil))
}

func (s *sse) chunk(t tasks.Task, delta map[string]string, finish *string, usage *oaiUsage) map[string]any {
	choices := []map[string]any{}
	if delta != nil || finish != nil {
		if delta == nil {
			delta = map[string]string{}
		}
		choices = append(choices, map[string]any{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": nil})
	}
	return map[string]any{"id": completionID(t.ID), "object": "chat.completion.chunk", "created": t.CreatedAt.Unix(),
		"model": t.Model, "choices": choices, "usage": usage}
}

// send writes one event; it reports false once the client is gone.
func (s *sse) send(v any) bool {
	if s.gone {
		return false
	}
	b, _ := json.Marshal(v)
	if _, err := fmt.Fprintf(s.c.Response(), "data: %s\n\n", b); err != nil || s.c.Request().Context().Err() != nil {
		s.gone = true
		return false
	}
	s.c.Response().Flush()
	return true
}

func (s *sse) content(t tasks.Task, text string) bool {
	s.start(t)
	return s.send(s.chunk(t, map[string]string{"content": text}, nil, nil))
}

func (s *sse) finish(t tasks.Task, withUsage bool) error {
	s.start(t)
	finish := "stop"
	if t.Result != nil && t.Result.FinishReason != "" && t.Result.FinishReason != "end_turn" {
		finish = t.Result.FinishReason
	}
	s.send(s.chunk(t, nil, &finish, nil))
	if withUsage && t.Result != nil {
		usage := usageOut(t.Result.Usage)
		s.send(s.chunk(t, nil, nil, &usage))
	}
	if !s.gone {
		fmt.Fprint(s.c.Response(), "data: [DONE]\n\n")
		s.c.Response().Flush()
	}
	return nil
}

// streamCompletion runs the task inline and relays the provider's stream.
// The upstream call does not depend on this connection: a client that
// leaves does not stop it, and the task is settled all the same.
func streamCompletion(c echo.Context, d *Deps, created tasks.Created, withUsage bool) error {
	out := newSSE(c)
	t, err := d.Tasks.RunInline(c.Request().Context(), created, traceIDOf(c), tasks.Stream{
		Deliver: func(delta provider.Delta) bool { return out.content(created.Task, delta.Content) },
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
