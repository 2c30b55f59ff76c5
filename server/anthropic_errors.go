package server

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/tollgate/tollgate/internal/anthropicwire"
	"github.com/tollgate/tollgate/tasks"
)

// Errors on the Anthropic surface: Anthropic's statuses, error types and
// envelope, {"type": "error", "error": {"type", "message"}}, with a
// request-id header, so that the official SDKs raise their usual errors
// and retry only where a retry can pass without multiplying Tollgate's
// own attempts upstream (x-should-retry, Retry-After).

// antKind is an Anthropic status and error type.
type antKind struct {
	status int
	typ    string
}

// antKinds is the one mapping from Tollgate's stable codes (problem codes,
// task failure codes, task_pending) to Anthropic's answers. A code not
// listed takes its status's kind (antStatusKinds).
//
// A budget that cannot cover the request is 402 billing_error, the type
// Anthropic itself answers when an account cannot pay: the SDKs raise it
// as an API error and never retry it, and its message gives the figures.
// A provider account out of credit is the same kind of answer, said of
// the provider; a provider that redirected is not (its account may be
// fine), and is Tollgate's 500 api_error, not retried, its message saying
// so. Tollgate's shedding and an unavailable model are 529
// overloaded_error; a task that outlived the synchronous wait is 504
// timeout_error; Tollgate's own failures and answers the Messages shape
// cannot hold are 500 api_error.
var antKinds = map[string]antKind{
	"budget_exceeded":                     {http.StatusPaymentRequired, "billing_error"},
	"idempotency_key_reused":              {http.StatusUnprocessableEntity, "invalid_request_error"},
	"payload_too_large":                   {http.StatusRequestEntityTooLarge, "request_too_large"},
	"unavailable":                         {529, "overloaded_error"},
	"overloaded":                          {529, "overloaded_error"},
	"task_pending":                        {http.StatusGatewayTimeout, "timeout_error"},
	tasks.CodeModelIncompatible:           {http.StatusBadRequest, "invalid_request_error"},
	tasks.CodeModelRateLimited:            {http.StatusTooManyRequests, "rate_limit_error"},
	tasks.CodeModelQuotaExhausted:         {http.StatusPaymentRequired, "billing_error"},
	tasks.CodeProviderRedirected:          {http.StatusInternalServerError, "api_error"},
	tasks.CodeModelTemporarilyUnavailable: {529, "overloaded_error"},
	tasks.CodeApplicationFailure:          {http.StatusInternalServerError, "api_error"},
	tasks.CodeIncompatibleModelResponse:   {http.StatusInternalServerError, "api_error"},
	tasks.CodePossiblyExecuted:            {http.StatusInternalServerError, "api_error"},
}

// antStatusKinds are the error types of the statuses Anthropic answers;
// any other 4xx is invalid_request_error under its own status, any other
// 5xx 500 api_error.
var antStatusKinds = map[int]string{
	http.StatusBadRequest:            "invalid_request_error",
	http.StatusUnauthorized:          "authentication_error",
	http.StatusPaymentRequired:       "billing_error",
	http.StatusForbidden:             "permission_error",
	http.StatusNotFound:              "not_found_error",
	http.StatusRequestEntityTooLarge: "request_too_large",
	http.StatusTooManyRequests:       "rate_limit_error",
	http.StatusInternalServerError:   "api_error",
}

func antKindOf(code string, status int) antKind {
	if k, ok := antKinds[code]; ok {
		return k
	}
	if typ, ok := antStatusKinds[status]; ok {
		return antKind{status, typ}
	}
	if status >= 500 {
		return antKind{http.StatusInternalServerError, "api_error"}
	}
	return antKind{status, "invalid_request_error"}
}

// antAnswer is how a failure is answered on the Anthropic surface.
type antAnswer struct {
	antKind
	message string
	// retry is x-should-retry; retryAfter, when not zero, Retry-After.
	retry      bool
	retryAfter time.Duration
}

// antAnswerOf maps any error the Anthropic routes return; tries is the
// client's earlier tries of this call (see clientMayRetry).
func antAnswerOf(err error, tries int) antAnswer {
	var tf *taskFailed
	var tp *taskPending
	var br *budgetRefusal
	switch {
	case errors.As(err, &tf):
		f := tasks.Failure{Code: tasks.CodeApplicationFailure, Message: "Tollgate failed to run the task."}
		if tf.task.Error != nil {
			f = *tf.task.Error
		}
		msg := f.Message
		if f.Code == tasks.CodeModelIncompatible && !f.Moderated && contextRefused(tf.detail) {
			msg = antContextMessage(tf.detail)
		}
		a := antAnswer{antKind: antKindOf(f.Code, http.StatusBadGateway), message: msg + " (task " + tf.task.ID + ")"}
		switch f.Code {
		case tasks.CodeModelRateLimited:
			a.retry, a.retryAfter = clientMayRetry(tf.detail, tries), max(tf.detail.Wait, time.Second)
		case tasks.CodeModelTemporarilyUnavailable:
			if clientMayRetry(tf.detail, tries) {
				a.retry, a.retryAfter = true, time.Second
			}
		case tasks.CodeApplicationFailure:
			a.retry, a.retryAfter = true, time.Second
		}
		return a
	case errors.As(err, &tp):
		a := antAnswer{antKind: antKindOf("task_pending", http.StatusGatewayTimeout), retry: tp.keyed,
			message: "The task " + tp.taskID + " is still running; poll GET /v1/tasks/" + tp.taskID + " for its result."}
		if a.retry {
			a.retryAfter = time.Second
		}
		return a
	case errors.As(err, &br):
		return antAnswer{antKind: antKindOf("budget_exceeded", http.StatusPaymentRequired), message: "Budget exhausted: " + br.detail()}
	}
	p := problemOf(err)
	a := antAnswer{antKind: antKindOf(p.Code, p.Status), message: p.Detail}
	if len(p.Errors) > 0 {
		parts := make([]string, len(p.Errors))
		for i, f := range p.Errors {
			parts[i] = f.Field + ": " + f.Message
		}
		a.message = strings.Join(parts, "; ")
	}
	if p.Code == "unauthorized" {
		a.message = "Send a valid Tollgate API key in x-api-key (or Authorization: Bearer)."
	}
	if p.Status == http.StatusServiceUnavailable || p.Status == http.StatusTooManyRequests {
		a.retry, a.retryAfter = true, time.Duration(retryAfterOf(err))*time.Second
	}
	return a
}

func (a antAnswer) body(requestID string) anthropicwire.ErrorBody {
	return anthropicwire.Error(a.typ, a.message, requestID)
}

// antRequestID is the request-id Anthropic's SDKs quote in their errors:
// the trace id, under Anthropic's prefix.
func antRequestID(c echo.Context) string { return "req_" + traceIDOf(c) }

// writeAnthropicError answers err in Anthropic's envelope with the retry
// headers and returns the status it answered.
func writeAnthropicError(c echo.Context, err error) int {
	tries, _ := strconv.Atoi(c.Request().Header.Get(headerRetryCount))
	a := antAnswerOf(err, min(max(tries, 0), 100))
	h := c.Response().Header()
	if a.retryAfter > 0 {
		secs := max(int((a.retryAfter+time.Second-1)/time.Second), 1)
		h.Set("Retry-After", strconv.Itoa(secs))
		h.Set("retry-after-ms", strconv.Itoa(secs*1000))
	}
	h.Set("x-should-retry", strconv.FormatBool(a.retry))
	h.Set("request-id", antRequestID(c))
	if a.status == http.StatusUnauthorized {
		h.Set("WWW-Authenticate", `Bearer realm="tollgate"`)
	}
	if c.Request().Method == http.MethodHead {
		_ = c.NoContent(a.status)
		return a.status
	}
	_ = writeErrorJSON(c, a.status, a.body(antRequestID(c)))
	return a.status
}

// antErrors is Anthropic's error dialect.
type antErrors struct{}

func (antErrors) writeError(c echo.Context, err error) int { return writeAnthropicError(c, err) }
