package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/labstack/echo/v4"

	"github.com/tollgate/tollgate/accounts"
	"github.com/tollgate/tollgate/budget"
	"github.com/tollgate/tollgate/limits"
	"github.com/tollgate/tollgate/routes"
	"github.com/tollgate/tollgate/tasks"
)

// Problem is an RFC 9457 problem document with Tollgate's stable code.
type Problem struct {
	// Tombstone accompanies a 410 for an erased record.
	Tombstone *tasks.Tombstone   `json:"tombstone,omitempty"`
	Type      string             `json:"type"`
	Title     string             `json:"title"`
	Status    int                `json:"status"`
	Code      string             `json:"code"`
	Detail    string             `json:"detail,omitempty"`
	TraceID   string             `json:"trace_id"`
	Errors    []tasks.FieldError `json:"errors,omitempty"`
	// NeededMicros and AvailableMicros accompany a 402 whose figures could
	// be read: what the request would reserve, and what its tightest
	// budget has left this period.
	NeededMicros    *int64 `json:"needed_micros,omitempty"`
	AvailableMicros *int64 `json:"available_micros,omitempty"`
}

// apiError is an error the HTTP layer itself raises (bad header, bad JSON).
// Its detail is ours and safe to show.
type apiError struct {
	status     int
	code       string
	detail     string
	fields     []tasks.FieldError
	tombstone  *tasks.Tombstone
	retryAfter int // seconds, for 429 and 503; 1 when unset
}

func (e *apiError) Error() string { return e.code + ": " + e.detail }

func badRequest(detail string, fields ...tasks.FieldError) error {
	return &apiError{status: http.StatusBadRequest, code: "invalid_request", detail: detail, fields: fields}
}

func forbidden(detail string) error {
	return &apiError{status: http.StatusForbidden, code: "forbidden", detail: detail}
}

// titles are the fixed human titles of each code.
var titles = map[string]string{
	"invalid_request":               "The request is invalid",
	"idempotency_key_missing":       "A valid Idempotency-Key header is required",
	"idempotency_key_reused":        "The Idempotency-Key was already used with a different request",
	"payload_too_large":             "The request body is too large",
	"unsupported_media_type":        "The request body must be application/json",
	"budget_exceeded":               "The budget cannot cover this request",
	"unauthorized":                  "A valid API key is required",
	"forbidden":                     "This key may not do that",
	"not_found":                     "Not found",
	"method_not_allowed":            "Method not allowed",
	"internal":                      "Internal error",
	"unavailable":                   "Temporarily unavailable; retry shortly",
	"overloaded":                    "Too much work in progress; retry after Retry-After seconds",
	"conflict":                      "The request conflicts with the resource's state",
	"gone":                          "The record's bodies were erased",
	"rate_limited":                  "Too many requests; retry after Retry-After seconds",
	"model_incompatible":            "The model provider rejected the request",
	"incompatible_model_response":   "The model's answer did not fit the route's output contract",
	"model_quota_exhausted":         "The provider account is out of quota",
	tasks.CodeProviderRedirected:    "The model provider redirected the call, and it was refused",
	"model_rate_limited":            "The provider is rate-limiting this key",
	"model_temporarily_unavailable": "The model is temporarily unavailable",
	"possibly_executed":             "The call may have run but no answer arrived",
	"application_failure":           "Tollgate failed to post-process the answer",
	tasks.CodeModelLacksTools:       "The model does not support tools",
	tasks.CodeModelLacksVision:      "The model does not accept images",
	tasks.CodeModelLacksJSONSchema:  "The model does not support json_schema response formats",
	tasks.CodeModelLacksReasoning:   "The model is not a reasoning model",
	tasks.CodeContextWindowExceeded: "The request does not fit the model's context window",
	tasks.CodeOutputLimitExceeded:   "The output limit exceeds what the model can write",
	tasks.CodeUnsupportedField:      "The model's provider cannot carry a field of the request",
	tasks.CodeModelLacksEmbeddings:  "The model does not compute embeddings",
	tasks.CodeModelLacksChat:        "The model is an embedding model",
}

// validationDetail is the detail of a *tasks.ValidationError, whose
// fields (the problem's errors) say what is wrong where.
const validationDetail = "The request body failed validation; errors names each field and what is wrong with it."

// problemOf is the one place where errors become HTTP statuses and codes.
// Anything it does not recognise is an internal error whose detail stays in
// our logs.
func problemOf(err error) Problem {
	var ae *apiError
	var br *budgetRefusal
	switch {
	case errors.As(err, &ae):
		return Problem{Status: ae.status, Code: ae.code, Detail: ae.detail, Errors: ae.fields, Tombstone: ae.tombstone}
	case errors.As(err, &br):
		p := Problem{Status: http.StatusPaymentRequired, Code: "budget_exceeded", Detail: br.detail()}
		if br.figures {
			needed, left := br.reserve, max(br.available, 0)
			p.NeededMicros, p.AvailableMicros = &needed, &left
		}
		return p
	}
	status, code, detail, fields := classify(err)
	return Problem{Status: status, Code: code, Detail: detail, Errors: fields}
}

// classify maps domain errors; see problemOf. Each kind of error has one
// mapper; the first that knows err answers.
func classify(err error) (status int, code, detail string, fields []tasks.FieldError) {
	for _, known := range []func(error) (int, string, string, []tasks.FieldError, bool){
		routeProblem, webhookProblem, requestProblem, fixedProblem, httpProblem,
	} {
		if status, code, detail, fields, ok := known(err); ok {
			return status, code, detail, fields
		}
	}
	if unavailable(err) {
		return http.StatusServiceUnavailable, "unavailable", "The service is briefly unavailable; retry shortly.", nil
	}
	return http.StatusInternalServerError, "internal", "Something went wrong on our side; quote the trace_id to support.", nil
}

// requestProblem maps the errors that say what is wrong with a request:
// their detail and fields come from the error.
func requestProblem(err error) (int, string, string, []tasks.FieldError, bool) {
	var ve *tasks.ValidationError
	var re *tasks.RefusedError
	var rl *tasks.RateLimitedError
	switch {
	case errors.As(err, &ve):
		return http.StatusBadRequest, "invalid_request", validationDetail, ve.Fields, true
	case errors.As(err, &re):
		if re.Field == "" {
			return http.StatusBadRequest, re.Code, re.Message + ". The idempotency key was not used.", nil, true
		}
		return http.StatusBadRequest, re.Code, re.Message + ". The idempotency key was not used.",
			[]tasks.FieldError{{Field: re.Field, Message: re.Message}}, true
	case errors.As(err, &rl):
		return http.StatusTooManyRequests, "rate_limited", rateLimitedMessage(rl), nil, true
	}
	return invalidProblem(err)
}

// invalidArgument is a domain package's refusal of an argument out of
// range (budget, limits and accounts' InvalidError): what is refused and
// why, and, when it names one field, the field.
type invalidArgument interface {
	error
	InvalidDetail() string
}

// invalidProblem maps an invalidArgument to a 400: its detail and the
// field it names, read from the error's fields, never its text.
func invalidProblem(err error) (int, string, string, []tasks.FieldError, bool) {
	var ia invalidArgument
	if !errors.As(err, &ia) {
		if errors.Is(err, budget.ErrInvalid) || errors.Is(err, limits.ErrInvalid) || errors.Is(err, accounts.ErrInvalid) {
			return http.StatusBadRequest, "invalid_request", "The request parameters are out of range.", nil, true
		}
		return 0, "", "", nil, false
	}
	var fields []tasks.FieldError
	var named interface{ InvalidField() (string, string) }
	if errors.As(err, &named) {
		field, reason := named.InvalidField()
		fields = []tasks.FieldError{{Field: field, Message: reason}}
	}
	return http.StatusBadRequest, "invalid_request", ia.InvalidDetail(), fields, true
}

// fixedProblems are the domain errors whose answer never varies.
var fixedProblems = []struct {
	err           error
	status        int
	code, detail  string
	field, reason string // the field the problem names, when it names one
}{
	{err: tasks.ErrIdempotencyKeyReused, status: http.StatusUnprocessableEntity, code: "idempotency_key_reused",
		detail: "This key names an earlier task with a different request; use a new key for a new request."},
	{err: budget.ErrInsufficient, status: http.StatusPaymentRequired, code: "budget_exceeded",
		detail: "The remaining budget cannot cover this request's reservation. The idempotency key was not used."},
	{err: limits.ErrOwnerNotFound, status: http.StatusNotFound, code: "not_found", detail: "No such owner."},
	{err: tasks.ErrOverloaded, status: http.StatusServiceUnavailable, code: "overloaded",
		detail: "The service is behind and refused this new task without writing anything; the idempotency key is still free. Retry after Retry-After seconds."},
	{err: tasks.ErrNotFound, status: http.StatusNotFound, code: "not_found", detail: "No such task."},
	{err: tasks.ErrNotFinished, status: http.StatusConflict, code: "conflict", detail: "The task has not finished yet."},
	{err: accounts.ErrNotFound, status: http.StatusNotFound, code: "not_found", detail: "No such owner."},
	{err: accounts.ErrKeyNotFound, status: http.StatusNotFound, code: "not_found", detail: "No such active key."},
	{err: tasks.ErrFinished, status: http.StatusConflict, code: "conflict", detail: "The task already finished; there is nothing to cancel."},
	{err: budget.ErrNotFound, status: http.StatusNotFound, code: "not_found", detail: "No such budget."},
	{err: budget.ErrBelowCommitted, status: http.StatusConflict, code: "conflict",
		detail: "The new total is below what is already reserved plus spent this period."},
	{err: tasks.ErrInvalidCursor, status: http.StatusBadRequest, code: "invalid_request", detail: "The cursor is not one this service issued.",
		field: "cursor", reason: "not a cursor this service issued"},
	{err: accounts.ErrUnauthenticated, status: http.StatusUnauthorized, code: "unauthorized",
		detail: "Send a valid API key as Authorization: Bearer YOUR_API_KEY."},
}

// fixedProblem maps err by fixedProblems.
func fixedProblem(err error) (int, string, string, []tasks.FieldError, bool) {
	for _, f := range fixedProblems {
		if !errors.Is(err, f.err) {
			continue
		}
		var fields []tasks.FieldError
		if f.field != "" {
			fields = []tasks.FieldError{{Field: f.field, Message: f.reason}}
		}
		return f.status, f.code, f.detail, fields, true
	}
	return 0, "", "", nil, false
}

// httpProblem maps Echo's own errors: no route, no method, too large, not
// JSON.
func httpProblem(err error) (int, string, string, []tasks.FieldError, bool) {
	var he *echo.HTTPError
	if !errors.As(err, &he) {
		return 0, "", "", nil, false
	}
	switch he.Code {
	case http.StatusNotFound:
		return he.Code, "not_found", "No such resource.", nil, true
	case http.StatusMethodNotAllowed:
		return he.Code, "method_not_allowed", "This resource does not support that method.", nil, true
	case http.StatusRequestEntityTooLarge:
		return he.Code, "payload_too_large", "The request body is too large.", nil, true
	case http.StatusUnsupportedMediaType:
		return he.Code, "unsupported_media_type", "The request body must be application/json.", nil, true
	}
	return 0, "", "", nil, false
}

// unavailable reports whether err is the database or a deadline briefly
// out of reach: worth a retry.
func unavailable(err error) bool {
	var pgErr *pgconn.PgError
	var connErr *pgconn.ConnectError
	return errors.Is(err, context.DeadlineExceeded) || pgconn.SafeToRetry(err) || errors.As(err, &connErr) ||
		errors.As(err, &pgErr) && (pgErr.Code == "57P01" || pgErr.Code == "57P03")
}

// errorHandler renders every error as problem+json, or in the dialect
// its route registered (speaks: OpenAI's envelope on the OpenAI-compatible
// routes, Anthropic's on the Anthropic routes). Every 5xx, whatever the route, is logged
// as an error, in full, on our side, with the trace id the client is told
// to quote.
func errorHandler(log *slog.Logger, speaks map[string]errorDialect) echo.HTTPErrorHandler {
	return func(err error, c echo.Context) {
		if c.Response().Committed {
			// Too late for a problem document (a stream broke mid-way);
			// keep the failure in our logs.
			log.LogAttrs(c.Request().Context(), slog.LevelWarn, "response failed after it started",
				slog.String("trace_id", traceIDOf(c)), slog.String("route", c.Path()), slog.String("error", err.Error()))
			return
		}
		var rl *tasks.RateLimitedError
		if errors.As(err, &rl) {
			setRateLimitHeaders(c.Response().Header(), &rl.Decision)
		}
		if dl := dialectOf(c, speaks); dl != nil {
			logFailure(log, c, dl.writeError(c, err), err)
			return
		}
		p := problemOf(err)
		status, code := p.Status, p.Code
		trace := traceIDOf(c)
		logFailure(log, c, status, err)
		h := c.Response().Header()
		if status == http.StatusUnauthorized {
			h.Set("WWW-Authenticate", `Bearer realm="tollgate"`)
		}
		if status == http.StatusServiceUnavailable || status == http.StatusTooManyRequests {
			h.Set("Retry-After", strconv.Itoa(retryAfterOf(err)))
		}
		if status == http.StatusPaymentRequired || status == http.StatusUnprocessableEntity {
			// The same request cannot pass until someone changes it or
			// the budget: say so to HTTP clients generated like OpenAI's
			// and Anthropic's SDKs, which obey this header.
			h.Set("x-should-retry", "false")
		}
		h.Set(echo.HeaderContentType, "application/problem+json")
		p.Type, p.Title, p.TraceID = "https://tollgate.dev/problems/"+code, titles[code], trace
		if c.Request().Method == http.MethodHead {
			_ = c.NoContent(status)
			return
		}
		_ = writeErrorJSON(c, status, p)
	}
}

// ctxLogged marks a request whose failure is already logged.
const ctxLogged = "tollgate.failure_logged"

// logFailure logs an answer of status 500 or above with its trace id; a
// 4xx is the client's to fix and is only counted.
func logFailure(log *slog.Logger, c echo.Context, status int, err error) {
	if status < 500 {
		return
	}
	c.Set(ctxLogged, true)
	level := slog.LevelError
	if classifiedProviderFailure(err) {
		level = slog.LevelWarn
	}
	log.LogAttrs(c.Request().Context(), level, "request failed",
		slog.String("trace_id", traceIDOf(c)), slog.String("method", c.Request().Method),
		slog.String("route", c.Path()), slog.Int("status", status), slog.String("error", err.Error()))
}

// classifiedProviderFailure reports whether err is a route's answer to a
// provider failure Tollgate classified (a 429, an exhausted account, an
// outage, an unusable answer): the provider's weather, logged at WARN, not
// a failure of Tollgate's own, which stays an ERROR.
func classifiedProviderFailure(err error) bool {
	var rf *routes.Failure
	return errors.As(err, &rf) && rf.Code != tasks.CodeApplicationFailure
}

// logServerErrors logs every answer of 500 or above that no error was
// logged for: one a handler wrote itself (/readyz's 503, the console's
// own), so that no 5xx on any route leaves the trace id the client holds
// out of the logs.
func logServerErrors(log *slog.Logger) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			err := next(c)
			if status := c.Response().Status; err == nil && status >= 500 && c.Get(ctxLogged) == nil {
				log.LogAttrs(c.Request().Context(), slog.LevelError, "request answered with a server error",
					slog.String("trace_id", traceIDOf(c)), slog.String("method", c.Request().Method),
					slog.String("route", c.Path()), slog.Int("status", status))
			}
			return err
		}
	}
}

// retryAfterOf is the Retry-After, in whole seconds, of a 429 or 503: what
// the error asks for, else one second.
func retryAfterOf(err error) int {
	var ae *apiError
	var oe *tasks.OverloadError
	var rl *tasks.RateLimitedError
	switch {
	case errors.As(err, &ae) && ae.retryAfter > 0:
		return ae.retryAfter
	case errors.As(err, &rl):
		return int(wholeSeconds(rl.Decision.RetryAfter) / time.Second)
	case errors.As(err, &oe):
		return max(int((oe.RetryAfter+time.Second-1)/time.Second), 1)
	}
	return 1
}

// writeErrorJSON writes an error body as JSON without HTML escaping, so
// that a message reads as written (`data:image/<type>`, not
// `data:image/\u003ctype\u003e`): every surface's errors are written here,
// and are JSON to their client, never HTML.
func writeErrorJSON(c echo.Context, status int, v any) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return err
	}
	return c.Blob(status, echo.MIMEApplicationJSON, buf.Bytes())
}
