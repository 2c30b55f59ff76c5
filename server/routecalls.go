package server

import (
	"encoding/json"
	"errors"
	"maps"
	"net/http"
	"slices"

	"github.com/labstack/echo/v4"

	"github.com/tollgate/tollgate/provider"
	"github.com/tollgate/tollgate/routes"
	"github.com/tollgate/tollgate/tasks"
)

type routeCall struct {
	Input map[string]any `json:"input"`
	User  string         `json:"user"`
	// Messages continue the conversation after the route's prompt: the
	// assistant's tool calls, the tools' results, more user turns.
	Messages []provider.Message `json:"messages"`
}

type routeAnswer struct {
	OK       bool             `json:"ok"`
	Data     any              `json:"data"`
	Fallback *routes.Fallback `json:"fallback"`
	// ToolCalls and Message: the model asked for tool calls (data is
	// null); the client runs them and calls again with Message and a
	// tool message per call appended to its messages.
	ToolCalls    []provider.ToolCall `json:"tool_calls,omitempty"`
	Message      *provider.Message   `json:"message,omitempty"`
	FinishReason string              `json:"finish_reason,omitempty"`
	TraceID      string              `json:"trace_id"`
	TaskID       *string             `json:"task_id"`
}

// listRoutes: GET /v1/routes, every route with what a caller needs to call
// it (its input schema, prompt version, output and fallbacks).
func listRoutes(d *Deps) echo.HandlerFunc {
	return func(c echo.Context) error {
		out := struct {
			Data []routes.Summary `json:"data"`
		}{Data: []routes.Summary{}}
		if d.Routes != nil {
			out.Data = d.Routes.List()
		}
		return c.JSON(http.StatusOK, out)
	}
}

// callRoute: POST /v1/routes/{name}. Answers synchronously: with the
// route's data, the tool calls the model asked for, a same-shape fallback
// naming the guard and reason (on_failure: fallback), or a stable error
// (on_failure: error).
func callRoute(d *Deps) echo.HandlerFunc {
	return func(c echo.Context) error {
		if d.Routes == nil {
			return routes.ErrNotFound
		}
		key := c.Request().Header.Get("Idempotency-Key")
		if !tasks.ValidIdempotencyKey(key) {
			return &apiError{status: http.StatusBadRequest, code: "idempotency_key_missing",
				detail: "Send an Idempotency-Key header of 1-255 printable ASCII characters."}
		}
		var in routeCall
		if err := decodeJSON(c, d.MaxBodyBytes, &in); err != nil {
			return err
		}
		if len(in.User) > 200 {
			return badRequest("user must be at most 200 characters.", tasks.FieldError{Field: "user", Message: "too long"})
		}
		p := principalOf(c)
		ans, err := d.Routes.Answer(c.Request().Context(), routes.Call{Route: c.Param("name"), Input: in.Input, User: in.User,
			Messages: in.Messages, OwnerID: p.OwnerID, Workload: p.Workload, IdempotencyKey: key, TraceID: traceIDOf(c)})
		if err != nil {
			return err
		}
		out := routeAnswer{OK: true, Data: ans.Data, Fallback: ans.Fallback, FinishReason: ans.FinishReason, TraceID: traceIDOf(c)}
		if ans.Message != nil {
			out.Message, out.ToolCalls = ans.Message, ans.Message.ToolCalls
		}
		if ans.TaskID != "" {
			out.TaskID = &ans.TaskID
			c.Response().Header().Set("X-Tollgate-Task-Id", ans.TaskID)
		}
		setRateLimitHeaders(c.Response().Header(), ans.RateLimit)
		return c.JSON(http.StatusOK, out)
	}
}

// routeTask is the submission of POST /v1/tasks {"route", "input", ...}:
// messages continue the route's prompt as in a route call, metadata and
// deadline_s are the task's own; every other field is the route's to fix,
// and is refused by name rather than ignored.
func routeTask(d *Deps, req tasks.Request, call routes.Call) (tasks.Submission, error) {
	if d.Routes == nil {
		return tasks.Submission{}, routes.ErrNotFound
	}
	call.Messages = req.Messages
	rest := req
	rest.Messages, rest.Metadata, rest.DeadlineS = nil, nil, 0
	raw, err := json.Marshal(rest)
	if err != nil {
		return tasks.Submission{}, err
	}
	var set map[string]json.RawMessage
	if err := json.Unmarshal(raw, &set); err != nil {
		return tasks.Submission{}, err
	}
	delete(set, "messages") // encoded as null
	if len(set) > 0 {
		name := slices.Sorted(maps.Keys(set))[0]
		return tasks.Submission{}, badRequest("A route fixes its model and parameters: with route, send only input, messages, metadata and deadline_s.",
			tasks.FieldError{Field: name, Message: "not allowed with route"})
	}
	sub, err := d.Routes.Submission(call)
	if err != nil {
		return tasks.Submission{}, err
	}
	sub.Request.Metadata, sub.Request.DeadlineS = req.Metadata, req.DeadlineS
	return sub, nil
}

// routeStatus is how a failed route call is answered (on_failure: error).
var routeStatus = map[string]int{
	"rate_limited":                        http.StatusTooManyRequests,
	"budget_exceeded":                     http.StatusPaymentRequired,
	"overloaded":                          http.StatusServiceUnavailable,
	tasks.CodeModelIncompatible:           http.StatusBadGateway,
	tasks.CodeIncompatibleModelResponse:   http.StatusBadGateway,
	tasks.CodePossiblyExecuted:            http.StatusBadGateway,
	tasks.CodeModelQuotaExhausted:         http.StatusServiceUnavailable,
	tasks.CodeProviderRedirected:          http.StatusBadGateway,
	tasks.CodeModelRateLimited:            http.StatusServiceUnavailable,
	tasks.CodeModelTemporarilyUnavailable: http.StatusServiceUnavailable,
	tasks.CodeApplicationFailure:          http.StatusInternalServerError,
}

// routeProblem maps route errors for problemOf.
func routeProblem(err error) (status int, code, detail string, fields []tasks.FieldError, ok bool) {
	var ie *routes.InputError
	var rf *routes.Failure
	switch {
	case errors.As(err, &ie):
		for _, f := range ie.Fields {
			fields = append(fields, tasks.FieldError{Field: f.Field, Message: f.Message})
		}
		return http.StatusBadRequest, "invalid_request", "The route's input failed validation; nothing was spent.", fields, true
	case errors.Is(err, routes.ErrNotFound):
		return http.StatusNotFound, "not_found", "No such route.", nil, true
	case errors.As(err, &rf):
		status := routeStatus[rf.Code]
		if status == 0 {
			status = http.StatusInternalServerError
		}
		return status, rf.Code, "The route's " + rf.Guard + " guard failed: " + rf.Reason + ".", nil, true
	}
	return 0, "", "", nil, false
}
