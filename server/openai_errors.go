package server

import (
	"cmp"
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/tollgate/tollgate/provider"
	"github.com/tollgate/tollgate/tasks"
)

// Errors on the OpenAI-compatible surface: the statuses, envelope and retry
// headers OpenAI itself answers with, so that the official SDKs raise the
// error their users match on and retry only where a retry can help and
// cannot multiply Tollgate's own attempts upstream.

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
	// retryAfter is Retry-After (and retry-after-ms), sent when not zero:
	// how long before a retry can pass.
	retryAfter time.Duration
}

// openAICodes are OpenAI's own public codes for a rejected request: SDK
// users match on them, so a provider's code among them passes through as
// error.code; any other rejection is Tollgate's model_incompatible. The
// value is the field OpenAI names with the code when the provider named
// none.
var openAICodes = map[string]string{
	provider.CodeContextLength:    "messages",
	"string_above_max_length":     "messages",
	"model_not_found":             "model",
	"invalid_value":               "",
	"invalid_type":                "",
	"unknown_parameter":           "",
	"unsupported_parameter":       "",
	"unsupported_value":           "",
	"missing_required_parameter":  "",
	"integer_below_min_value":     "",
	"integer_above_max_value":     "",
	"decimal_below_min_value":     "",
	"decimal_above_max_value":     "",
	"array_above_max_length":      "",
	"array_below_min_length":      "",
	"empty_array":                 "",
	"invalid_function_parameters": "",
	"invalid_image_url":           "",
	"invalid_image_format":        "",
	"invalid_image":               "",
	"image_parse_error":           "",
}

// clientMayRetry reports whether a client's retry of a failed task keeps
// one client call within the task's attempt bound upstream. tries is how
// many times the client sent this call before (the Stainless SDKs say so
// in X-Stainless-Retry-Count; 0 when unsaid); each earlier try is taken to
// have cost as many provider calls as this one, and a retry costs at least
// one more.
func clientMayRetry(d tasks.FailureDetail, tries int) bool {
	calls := (tries + 1) * max(d.Attempts, 1)
	return calls < d.MaxAttempts
}

// oaiFailure is the one mapping from a failed task (its public failure and
// the detail the OpenAI surface adds) to the answer an OpenAI SDK
// understands: a rejection is OpenAI's 400 naming the field, a throttled
// key its 429 with the provider's wait, an empty account its 429
// insufficient_quota that no retry fixes, a provider's redirect a 502
// server_error that says so. Transient failures have used
// Tollgate's own attempts (and fallbacks) already, so the SDK is told not
// to add its retries to them; tries is the client's earlier tries of this
// call (see clientMayRetry).
func oaiFailure(f tasks.Failure, d tasks.FailureDetail, tries int) oaiAnswer {
	a := oaiAnswer{code: f.Code, message: f.Message}
	switch f.Code {
	case tasks.CodeModelIncompatible:
		a.status, a.typ = http.StatusBadRequest, "invalid_request_error"
		if f.Moderated {
			break
		}
		param, ok := openAICodes[d.ProviderCode]
		if ok {
			a.code = d.ProviderCode
		}
		if contextRefused(d) {
			a.message = oaiContextMessage(d)
		}
		a.param = cmp.Or(d.ProviderParam, param)
	case tasks.CodeModelRateLimited:
		// The wait is the provider's, whether or not the SDK may retry:
		// a client that retries on its own learns when it can pass.
		a.status, a.typ, a.code = http.StatusTooManyRequests, "requests", provider.CodeRateLimited
		a.retry, a.retryAfter = clientMayRetry(d, tries), max(d.Wait, time.Second)
	case tasks.CodeModelQuotaExhausted:
		a.status, a.typ, a.code = http.StatusTooManyRequests, "insufficient_quota", provider.CodeInsufficientQuota
	case tasks.CodeProviderRedirected:
		// The upstream answered what a gateway may not pass on: OpenAI's
		// server_error under 502, which no retry of the SDK's fixes.
		a.status, a.typ = http.StatusBadGateway, "server_error"
	case tasks.CodeModelTemporarilyUnavailable:
		// Once Tollgate's own attempts are spent, the client's must not
		// multiply them; a task that ended with attempts left (a stream)
		// may be retried by the client, within the same bound.
		a.status, a.typ = http.StatusServiceUnavailable, "server_error"
		if clientMayRetry(d, tries) {
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

// oaiAnswerOf maps any error the OpenAI routes return; tries is the
// client's earlier tries of this call (see clientMayRetry).
func oaiAnswerOf(err error, tries int) oaiAnswer {
	var tf *taskFailed
	var tp *taskPending
	var rl *tasks.RateLimitedError
	switch {
	case errors.As(err, &rl):
		// OpenAI's own answer to its rate limits: type names the limit,
		// code rate_limit_exceeded; the SDK may retry after the wait.
		return oaiAnswer{status: http.StatusTooManyRequests, typ: string(rl.Decision.Exceeded), code: "rate_limit_exceeded",
			message: rateLimitedMessage(rl), retry: true, retryAfter: wholeSeconds(rl.Decision.RetryAfter)}
	case errors.As(err, &tf):
		f := tasks.Failure{Code: tasks.CodeApplicationFailure, Message: "Tollgate failed to run the task."}
		if tf.task.Error != nil {
			f = *tf.task.Error
		}
		a := oaiFailure(f, tf.detail, tries)
		a.message += " (task " + tf.task.ID + ")"
		return a
	case errors.As(err, &tp):
		// Only a keyed retry finds the running task again; an unkeyed one
		// would start another.
		a := oaiAnswer{status: http.StatusServiceUnavailable, typ: "server_error", code: "task_pending", retry: tp.keyed,
			message: "The task " + tp.taskID + " is still running; poll GET /v1/tasks/" + tp.taskID + " for its result."}
		if a.retry {
			a.retryAfter = time.Second
		}
		return a
	}
	p := problemOf(err)
	a := oaiAnswer{status: p.Status, code: p.Code, message: p.Detail, typ: "invalid_request_error"}
	if a.status == http.StatusServiceUnavailable || a.status == http.StatusTooManyRequests {
		a.retry, a.retryAfter = true, time.Duration(retryAfterOf(err))*time.Second
	}
	if len(p.Errors) > 0 {
		a.param, a.message = p.Errors[0].Field, fieldsMessage(a.message, p.Errors)
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

// fieldsMessage is the message of a request refused for its fields, as
// OpenAI words one: the first field and what is wrong with it (never its
// value), then how many more are wrong. A detail that names the field
// already is kept; one that does not (validation's generic detail) gives
// way to the field's own reason.
func fieldsMessage(detail string, fields []tasks.FieldError) string {
	f := fields[0]
	msg := detail
	switch {
	case strings.Contains(detail, f.Field):
	case detail == validationDetail || detail == "":
		msg = "Invalid '" + f.Field + "': " + strings.TrimSuffix(f.Message, ".") + "."
	default:
		msg += " Invalid '" + f.Field + "': " + strings.TrimSuffix(f.Message, ".") + "."
	}
	if n := len(fields) - 1; n == 1 {
		msg += " 1 more field is invalid."
	} else if n > 1 {
		msg += " " + strconv.Itoa(n) + " more fields are invalid."
	}
	return msg
}

// oaiError renders any error in OpenAI's envelope, for a stream that has
// begun (no status or headers left to set).
func oaiError(err error) (int, map[string]any) {
	a := oaiAnswerOf(err, 0)
	return a.status, a.body()
}

func (a oaiAnswer) body() map[string]any {
	var param any // null when no field is at fault
	if a.param != "" {
		param = a.param
	}
	return map[string]any{"error": map[string]any{"message": a.message, "type": a.typ, "param": param, "code": a.code}}
}

// headerRetryCount is the Stainless SDKs' count of a request's earlier
// tries (0 on the first).
const headerRetryCount = "X-Stainless-Retry-Count"

// oaiErrors is OpenAI's error dialect. param, when not nil, renames the
// field an error names in the chat's terms (a provider's refusal names
// the chat it was sent) into the route's own.
type oaiErrors struct{ param func(string) string }

func (e oaiErrors) writeError(c echo.Context, err error) int { return writeOAIError(c, err, e.param) }

// writeOAIError answers err in OpenAI's envelope with the retry headers,
// its param renamed by rename when not nil, and returns the status it
// answered.
func writeOAIError(c echo.Context, err error, rename func(string) string) int {
	tries, _ := strconv.Atoi(c.Request().Header.Get(headerRetryCount))
	a := oaiAnswerOf(err, min(max(tries, 0), 100))
	if rename != nil {
		a.param = rename(a.param)
	}
	h := c.Response().Header()
	if a.retryAfter > 0 {
		secs := max(int((a.retryAfter+time.Second-1)/time.Second), 1)
		h.Set("Retry-After", strconv.Itoa(secs))
		h.Set("retry-after-ms", strconv.Itoa(secs*1000))
	}
	h.Set("x-should-retry", strconv.FormatBool(a.retry))
	if a.status == http.StatusUnauthorized {
		h.Set("WWW-Authenticate", `Bearer realm="tollgate"`)
	}
	_ = writeErrorJSON(c, a.status, a.body())
	return a.status
}
