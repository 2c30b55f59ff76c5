package server

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/tollgate/tollgate/budget"
	"github.com/tollgate/tollgate/tasks"
)

// The one mapping from a failed task to its OpenAI answer, row by row.
func TestOAIFailureTable(t *testing.T) {
	t.Parallel()
	rejected := tasks.Failure{Code: tasks.CodeModelIncompatible}
	spent := tasks.FailureDetail{Attempts: 3, MaxAttempts: 3}
	stream := tasks.FailureDetail{Attempts: 1, MaxAttempts: 3}
	with := func(d tasks.FailureDetail, code, param string, wait time.Duration) tasks.FailureDetail {
		d.ProviderCode, d.ProviderParam, d.Wait = code, param, wait
		return d
	}
	cases := []struct {
		name   string
		f      tasks.Failure
		d      tasks.FailureDetail
		tries  int // X-Stainless-Retry-Count
		status int
		typ    string
		code   string
		param  string
		retry  bool
		wait   time.Duration
	}{
		{"context length", rejected, with(spent, "context_length_exceeded", "", 0), 0,
			400, "invalid_request_error", "context_length_exceeded", "messages", false, 0},
		{"context length, the provider's field", rejected, with(spent, "context_length_exceeded", "messages.[3].content", 0), 0,
			400, "invalid_request_error", "context_length_exceeded", "messages.[3].content", false, 0},
		{"an OpenAI code with the field the provider named", rejected, with(spent, "unsupported_parameter", "max_tokens", 0), 0,
			400, "invalid_request_error", "unsupported_parameter", "max_tokens", false, 0},
		{"an OpenAI code, no field named", rejected, with(spent, "unsupported_parameter", "", 0), 0,
			400, "invalid_request_error", "unsupported_parameter", "", false, 0},
		{"one string too long", rejected, with(spent, "string_above_max_length", "", 0), 0,
			400, "invalid_request_error", "string_above_max_length", "messages", false, 0},
		{"model not found", rejected, with(spent, "model_not_found", "", 0), 0,
			400, "invalid_request_error", "model_not_found", "model", false, 0},
		{"a vendor's own code stays Tollgate's", rejected, with(spent, "vendor_refusal", "", 0), 0,
			400, "invalid_request_error", "model_incompatible", "", false, 0},
		{"no OpenAI code, but a field", rejected, with(spent, "invalid_request", "response_format", 0), 0,
			400, "invalid_request_error", "model_incompatible", "response_format", false, 0},
		{"no provider code", rejected, spent, 0,
			400, "invalid_request_error", "model_incompatible", "", false, 0},
		{"moderated", tasks.Failure{Code: tasks.CodeModelIncompatible, Moderated: true}, with(spent, "context_length_exceeded", "messages", 0), 0,
			400, "invalid_request_error", "model_incompatible", "", false, 0},
		{"rate limited with the pause left", tasks.Failure{Code: tasks.CodeModelRateLimited}, with(stream, "rate_limit_exceeded", "", 20*time.Second), 0,
			429, "requests", "rate_limit_exceeded", "", true, 20 * time.Second},
		{"rate limited, no pause left", tasks.Failure{Code: tasks.CodeModelRateLimited}, stream, 0,
			429, "requests", "rate_limit_exceeded", "", true, time.Second},
		{"rate limited, a retry would pass the attempt bound", tasks.Failure{Code: tasks.CodeModelRateLimited}, with(stream, "rate_limit_exceeded", "", 20*time.Second), 2,
			429, "requests", "rate_limit_exceeded", "", false, 20 * time.Second},
		{"quota exhausted", tasks.Failure{Code: tasks.CodeModelQuotaExhausted}, with(stream, "insufficient_quota", "", 0), 0,
			429, "insufficient_quota", "insufficient_quota", "", false, 0},
		{"provider redirected", tasks.Failure{Code: tasks.CodeProviderRedirected}, with(stream, "redirect_refused", "", 0), 0,
			502, "server_error", "provider_redirected", "", false, 0},
		{"transient after Tollgate's attempts", tasks.Failure{Code: tasks.CodeModelTemporarilyUnavailable}, with(spent, "server_error", "", 0), 0,
			503, "server_error", "model_temporarily_unavailable", "", false, 0},
		{"transient with attempts left (a stream)", tasks.Failure{Code: tasks.CodeModelTemporarilyUnavailable}, with(stream, "server_error", "", 0), 0,
			503, "server_error", "model_temporarily_unavailable", "", true, time.Second},
		{"a stream's second try, one attempt left", tasks.Failure{Code: tasks.CodeModelTemporarilyUnavailable}, with(stream, "server_error", "", 0), 1,
			503, "server_error", "model_temporarily_unavailable", "", true, time.Second},
		{"a stream's third try spends the bound", tasks.Failure{Code: tasks.CodeModelTemporarilyUnavailable}, with(stream, "server_error", "", 0), 2,
			503, "server_error", "model_temporarily_unavailable", "", false, 0},
		{"blocked before any call", tasks.Failure{Code: tasks.CodeModelTemporarilyUnavailable}, tasks.FailureDetail{MaxAttempts: 2}, 0,
			503, "server_error", "model_temporarily_unavailable", "", true, time.Second},
		{"malformed answers after Tollgate's attempts", tasks.Failure{Code: tasks.CodeIncompatibleModelResponse}, spent, 0,
			502, "server_error", "incompatible_model_response", "", false, 0},
		{"possibly executed", tasks.Failure{Code: tasks.CodePossiblyExecuted}, stream, 0,
			502, "server_error", "possibly_executed", "", false, 0},
		{"Tollgate's own failure", tasks.Failure{Code: tasks.CodeApplicationFailure}, tasks.FailureDetail{}, 0,
			500, "server_error", "application_failure", "", true, time.Second},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := oaiFailure(c.f, c.d, c.tries)
			if a.status != c.status || a.typ != c.typ || a.code != c.code || a.param != c.param || a.retry != c.retry || a.retryAfter != c.wait {
				t.Errorf("oaiFailure = %d %q %q %q retry %v after %s; want %d %q %q %q retry %v after %s",
					a.status, a.typ, a.code, a.param, a.retry, a.retryAfter, c.status, c.typ, c.code, c.param, c.retry, c.wait)
			}
		})
	}
}

// Answers that are not a task's failure, with the headers they carry.
func TestOAIErrorHeaders(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name       string
		err        error
		tries      string
		status     int
		code       string
		param      string
		retry      string
		retryAfter string
	}{
		{"budget exceeded", budget.ErrInsufficient, "", http.StatusPaymentRequired, "budget_exceeded", "", "false", ""},
		{"same key, other body", tasks.ErrIdempotencyKeyReused, "", http.StatusUnprocessableEntity, "idempotency_key_reused", "", "false", ""},
		{"validation names the field", &tasks.ValidationError{Fields: []tasks.FieldError{{Field: "messages[1].role", Message: "must be one of"}}}, "",
			http.StatusBadRequest, "invalid_request", "messages[1].role", "false", ""},
		{"overloaded", tasks.ErrOverloaded, "", http.StatusServiceUnavailable, "overloaded", "", "true", "1"},
		{"pending, keyed", &taskPending{taskID: "t", keyed: true}, "", http.StatusServiceUnavailable, "task_pending", "", "true", "1"},
		{"pending, not keyed", &taskPending{taskID: "t"}, "", http.StatusServiceUnavailable, "task_pending", "", "false", ""},
		{"rate limited, first try", &taskFailed{task: tasks.Task{ID: "t", Error: &tasks.Failure{Code: tasks.CodeModelRateLimited}},
			detail: tasks.FailureDetail{Attempts: 1, MaxAttempts: 3, Wait: 2500 * time.Millisecond}}, "0",
			http.StatusTooManyRequests, "rate_limit_exceeded", "", "true", "3"},
		{"rate limited, last try", &taskFailed{task: tasks.Task{ID: "t", Error: &tasks.Failure{Code: tasks.CodeModelRateLimited}},
			detail: tasks.FailureDetail{Attempts: 1, MaxAttempts: 3, Wait: 2500 * time.Millisecond}}, "2",
			http.StatusTooManyRequests, "rate_limit_exceeded", "", "false", "3"},
		{"a retry count that is not a number is no retry", &taskFailed{task: tasks.Task{ID: "t", Error: &tasks.Failure{Code: tasks.CodeModelTemporarilyUnavailable}},
			detail: tasks.FailureDetail{Attempts: 1, MaxAttempts: 3}}, "many",
			http.StatusServiceUnavailable, "model_temporarily_unavailable", "", "true", "1"},
		{"a negative retry count is no retry", &taskFailed{task: tasks.Task{ID: "t", Error: &tasks.Failure{Code: tasks.CodeModelTemporarilyUnavailable}},
			detail: tasks.FailureDetail{Attempts: 1, MaxAttempts: 3}}, "-9",
			http.StatusServiceUnavailable, "model_temporarily_unavailable", "", "true", "1"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			req := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", nil)
			if c.tries != "" {
				req.Header.Set(headerRetryCount, c.tries)
			}
			rec := httptest.NewRecorder()
			ctx := echo.New().NewContext(req, rec)
			if got := writeOAIError(ctx, c.err, nil); got != c.status || rec.Code != c.status {
				t.Fatalf("status = %d (recorded %d), want %d", got, rec.Code, c.status)
			}
			a := oaiAnswerOf(c.err, 0)
			if a.code != c.code || a.param != c.param {
				t.Errorf("code %q param %q, want %q %q", a.code, a.param, c.code, c.param)
			}
			h := rec.Header()
			if h.Get("x-should-retry") != c.retry || h.Get("Retry-After") != c.retryAfter {
				t.Errorf("x-should-retry %q Retry-After %q, want %q %q", h.Get("x-should-retry"), h.Get("Retry-After"), c.retry, c.retryAfter)
			}
			if c.retryAfter != "" && h.Get("retry-after-ms") != c.retryAfter+"000" {
				t.Errorf("retry-after-ms %q, want %s000", h.Get("retry-after-ms"), c.retryAfter)
			}
		})
	}
}
