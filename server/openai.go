package server

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/tollgate/tollgate/provider"
	"github.com/tollgate/tollgate/tasks"
)

// The OpenAI-compatible surface: existing SDK code points its base URL at
// Tollgate and keeps working, and every call becomes a Tollgate task with
// its reservation, classified failures and replay record.

// taskFailed carries a failed task to the error renderer.
type taskFailed struct {
	task   tasks.Task
	detail tasks.FailureDetail
}

// failedTask is the error for a failed (or blocked) task, with the detail
// its OpenAI answer needs; a detail that cannot be read leaves the
// answer its defaults.
func failedTask(ctx context.Context, d *Deps, owner string, t tasks.Task) error {
	detail, _ := d.Tasks.FailureDetail(ctx, owner, t.ID)
	return &taskFailed{task: t, detail: detail}
}

func (e *taskFailed) Error() string { return "task failed: " + e.task.Error.Code }

// taskPending: the task outlived the synchronous wait.
type taskPending struct {
	taskID string
	keyed  bool // the client sent an Idempotency-Key, so retrying is safe
}

func (e *taskPending) Error() string { return "task still running: " + e.taskID }

// chatCompletions: POST /v1/chat/completions.
func chatCompletions(d *Deps) echo.HandlerFunc {
	return func(c echo.Context) error {
		var in oaiRequest
		if err := decodeLenient(c, d.MaxBodyBytes, &in); err != nil {
			return err
		}
		req, err := in.task()
		if err != nil {
			return err
		}
		key := c.Request().Header.Get("Idempotency-Key")
		keyed := key != ""
		if keyed && !tasks.ValidIdempotencyKey(key) {
			return &apiError{status: http.StatusBadRequest, code: "idempotency_key_missing",
				detail: "An Idempotency-Key must be 1-255 printable ASCII characters."}
		}
		if !keyed {
			key = "chatcmpl/" + uuid.NewString()
		}
		p := principalOf(c)
		ctx := c.Request().Context()
		created, err := d.Tasks.Create(ctx, tasks.Submission{OwnerID: p.OwnerID, Workload: p.Workload,
			IdempotencyKey: key, TraceID: traceIDOf(c), Request: req, Inline: in.Stream, Await: !in.Stream})
		if err != nil {
			return err
		}
		h := c.Response().Header()
		h.Set("X-Tollgate-Task-Id", created.Task.ID)
		h.Set("Idempotent-Replayed", strconv.FormatBool(created.Replayed))
		if in.Stream && !created.Replayed {
			return streamCompletion(c, d, created, in.StreamOptions != nil && in.StreamOptions.IncludeUsage)
		}
		t, err := d.Tasks.AwaitCreatedAnswerable(ctx, created, d.SyncWait)
		if err != nil {
			return err
		}
		if !t.Status.Final() && t.Error != nil {
			// Blocked behind a paused key or an open breaker: answer now
			// with the reason, and cancel the task so that it does not run
			// (and charge) later for a client that has gone.
			if ct, cerr := d.Tasks.Cancel(context.WithoutCancel(ctx), p.OwnerID, t.ID); cerr == nil {
				ct.Error = t.Error
				return failedTask(context.WithoutCancel(ctx), d, p.OwnerID, ct)
			}
		}
		switch {
		case t.Status == tasks.StatusSucceeded && in.Stream:
			// A replayed streaming request gets the stored answer as a stream.
			sse := newSSE(c)
			sse.replay(t)
			return sse.finish(t, in.StreamOptions != nil && in.StreamOptions.IncludeUsage)
		case t.Status == tasks.StatusSucceeded:
			return c.JSON(http.StatusOK, completionOf(t))
		case t.Status.Final():
			return failedTask(ctx, d, p.OwnerID, t)
		}
		return &taskPending{taskID: t.ID, keyed: keyed}
	}
}

// decodeLenient decodes a JSON body accepting unknown fields: OpenAI adds
// fields all the time, and SDKs send them.
func decodeLenient(c echo.Context, limit int64, dst any) error {
	raw, err := readBody(c, limit)
	if err != nil {
		return err
	}
	return decodeBytes(raw, dst, scanLenient, "")
}

// modelsList: GET /v1/models in OpenAI's shape: the configured model names.
func modelsList(d *Deps) echo.HandlerFunc {
	return func(c echo.Context) error {
		type model struct {
			ID      string `json:"id"`
			Object  string `json:"object"`
			Created int64  `json:"created"`
			OwnedBy string `json:"owned_by"`
		}
		out := struct {
			Object string  `json:"object"`
			Data   []model `json:"data"`
		}{Object: "list", Data: []model{}}
		if d.Catalog != nil {
			for _, m := range d.Catalog.Models {
				out.Data = append(out.Data, model{ID: m.Name, Object: "model", OwnedBy: m.Provider})
			}
		}
		return c.JSON(http.StatusOK, out)
	}
}

// oaiAnswer is how a failure is answered on the OpenAI surface: status,
// envelope and the retry headers the official SDKs obey.
type oaiAnswer struct {
	status  int
	typ     string // error.type
	code    string // error.code
	param   string // error.param; "" is null
	message string
	// retry is x-should-retry. A false one stops the SDK's own retries,
	// so that they never multiply Tollgate's (or hammer an empty account).
	retry bool
	// retryAfter is Retry-After for an answer the SDK may retry; at least
	// one second.
	retryAfter time.Duration
}

// openAICodes are the provider codes that are also OpenAI's own public
// codes for a rejected request: SDK users match on them, so they pass
// through as error.code; any other rejection is Tollgate's
// model_incompatible. param is the field OpenAI names with the code.
var openAICodes = map[string]string{
	provider.CodeContextLength:   "messages",
	"invalid_value":              "",
	"invalid_type":               "",
	"unsupported_parameter":      "",
	"unsupported_value":          "",
	"missing_required_parameter": "",
	"integer_below_min_value":    "",
	"integer_above_max_value":    "",
	"decimal_below_min_value":    "",
	"decimal_above_max_value":    "",
	"array_above_max_length":     "",
	"empty_array":                "",
	"model_not_found":            "model",
	"invalid_image_url":          "",
	"image_parse_error":          "",
}

// oaiFailure is the one mapping from a failed task (its public failure and
// the detail the OpenAI surface adds) to the answer an OpenAI SDK
// understands: a rejection is OpenAI's 400, a throttled key its 429 with
// the provider's wait, an empty account its 429 insufficient_quota that no
// retry fixes. Transient failures have used Tollgate's own attempts (and
// fallbacks) already, so the SDK is told not to add its retries to them.
func oaiFailure(f tasks.Failure, d tasks.FailureDetail) oaiAnswer {
	a := oaiAnswer{code: f.Code, message: f.Message}
	switch f.Code {
	case tasks.CodeModelIncompatible:
		a.status, a.typ = http.StatusBadRequest, "invalid_request_error"
		if param, ok := openAICodes[d.ProviderCode]; ok && !f.Moderated {
			a.code, a.param = d.ProviderCode, param
		}
	case tasks.CodeModelRateLimited:
		a.status, a.typ, a.code, a.retry = http.StatusTooManyRequests, "requests", provider.CodeRateLimited, true
		a.retryAfter = max(d.Wait, time.Second)
	case tasks.CodeModelQuotaExhausted:
		a.status, a.typ, a.code = http.StatusTooManyRequests, "insufficient_quota", provider.CodeInsufficientQuota
	case tasks.CodeModelTemporarilyUnavailable:
		// Once Tollgate's own attempts are spent, the client's must not
		// multiply them; a task that ended with attempts left (a stream)
		// may be retried by the client.
		a.status, a.typ = http.StatusServiceUnavailable, "server_error"
		if d.AttemptsLeft {
			a.retry, a.retryAfter = true, time.Second
		}
	case tasks.CodeApplicationFailure:
		// Tollgate's own failure, not the provider's: a retry may pass.
		a.status, a.typ, a.retry, a.retryAfter = http.StatusInternalServerError, "server_error", true, time.Second
	default: // incompatible_model_response, possibly_executed and any new code
		a.status, a.typ = http.StatusBadGateway, "server_error"
	}
	return a
}

// oaiAnswerOf maps any error the OpenAI routes return.
func oaiAnswerOf(err error) oaiAnswer {
	var tf *taskFailed
	var tp *taskPending
	switch {
	case errors.As(err, &tf):
		f := tasks.Failure{Code: tasks.CodeApplicationFailure, Message: "Tollgate failed to run the task."}
		if tf.task.Error != nil {
			f = *tf.task.Error
		}
		a := oaiFailure(f, tf.detail)
		a.message += " (task " + tf.task.ID + ")"
		return a
	case errors.As(err, &tp):
		return oaiAnswer{status: http.StatusServiceUnavailable, typ: "server_error", code: "task_pending", retry: tp.keyed, retryAfter: time.Second,
			message: "The task " + tp.taskID + " is still running; poll GET /v1/tasks/" + tp.taskID + " for its result."}
	}
	p := problemOf(err)
	a := oaiAnswer{status: p.Status, code: p.Code, message: p.Detail, typ: "invalid_request_error"}
	if a.status == http.StatusServiceUnavailable || a.status == http.StatusTooManyRequests {
		a.retry, a.retryAfter = true, time.Duration(retryAfterOf(err))*time.Second
	}
	if len(p.Errors) > 0 {
		a.param = p.Errors[0].Field
		if !strings.Contains(a.message, p.Errors[0].Field) {
			a.message += " " + p.Errors[0].Field + ": " + p.Errors[0].Message + "."
		}
	}
	switch {
	case a.status == http.StatusUnauthorized:
		a.typ = "authentication_error"
	case a.status == http.StatusPaymentRequired:
		a.typ = "insufficient_quota"
	case a.status >= 500:
		a.typ = "server_error"
	}
	return a
}

// oaiError renders any error in OpenAI's envelope.
func oaiError(err error) (int, map[string]any) {
	a := oaiAnswerOf(err)
	return a.status, a.body()
}

func (a oaiAnswer) body() map[string]any {
	var param any // null when no field is at fault
	if a.param != "" {
		param = a.param
	}
	return map[string]any{"error": map[string]any{"message": a.message, "type": a.typ, "param": param, "code": a.code}}
}

// writeOAIError answers err in OpenAI's envelope with the retry headers
// and returns the status it answered.
func writeOAIError(c echo.Context, err error) int {
	a := oaiAnswerOf(err)
	h := c.Response().Header()
	if a.retry {
		secs := max(int((a.retryAfter+time.Second-1)/time.Second), 1)
		h.Set("Retry-After", strconv.Itoa(secs))
		h.Set("retry-after-ms", strconv.Itoa(secs*1000))
		h.Set("x-should-retry", "true")
	} else {
		h.Set("x-should-retry", "false")
	}
	if a.status == http.StatusUnauthorized {
		h.Set("WWW-Authenticate", `Bearer realm="tollgate"`)
	}
	_ = c.JSON(a.status, a.body())
	return a.status
}

// isOpenAIRoute reports whether errors on this route use OpenAI's envelope.
func isOpenAIRoute(c echo.Context) bool {
	return c.Path() == "/v1/chat/completions" || c.Path() == "/v1/models"
}
