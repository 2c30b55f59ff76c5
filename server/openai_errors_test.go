package server

import (
	"net/http"
	"testing"
	"time"

	"github.com/tollgate/tollgate/budget"
	"github.com/tollgate/tollgate/tasks"
)

// The one mapping from a failed task to its OpenAI answer, row by row.
func TestOAIFailureTable(t *testing.T) {
	t.Parallel()
	rejected := tasks.Failure{Code: tasks.CodeModelIncompatible}
	cases := []struct {
		name   string
		f      tasks.Failure
		d      tasks.FailureDetail
		status int
		typ    string
		code   string
		param  string
		retry  bool
		wait   time.Duration
	}{
		{"context length", rejected, tasks.FailureDetail{ProviderCode: "context_length_exceeded"},
			400, "invalid_request_error", "context_length_exceeded", "messages", false, 0},
		{"an OpenAI code without a known field", rejected, tasks.FailureDetail{ProviderCode: "unsupported_parameter"},
			400, "invalid_request_error", "unsupported_parameter", "", false, 0},
		{"model not found", rejected, tasks.FailureDetail{ProviderCode: "model_not_found"},
			400, "invalid_request_error", "model_not_found", "model", false, 0},
		{"a vendor's own code stays Tollgate's", rejected, tasks.FailureDetail{ProviderCode: "vendor_refusal"},
			400, "invalid_request_error", "model_incompatible", "", false, 0},
		{"no provider code", rejected, tasks.FailureDetail{},
			400, "invalid_request_error", "model_incompatible", "", false, 0},
		{"moderated", tasks.Failure{Code: tasks.CodeModelIncompatible, Moderated: true}, tasks.FailureDetail{ProviderCode: "context_length_exceeded"},
			400, "invalid_request_error", "model_incompatible", "", false, 0},
		{"rate limited with the pause left", tasks.Failure{Code: tasks.CodeModelRateLimited}, tasks.FailureDetail{ProviderCode: "rate_limit_exceeded", Wait: 20 * time.Second},
			429, "requests", "rate_limit_exceeded", "", true, 20 * time.Second},
		{"rate limited, no pause left", tasks.Failure{Code: tasks.CodeModelRateLimited}, tasks.FailureDetail{},
			429, "requests", "rate_limit_exceeded", "", true, time.Second},
		{"quota exhausted", tasks.Failure{Code: tasks.CodeModelQuotaExhausted}, tasks.FailureDetail{ProviderCode: "insufficient_quota"},
			429, "insufficient_quota", "insufficient_quota", "", false, 0},
		{"transient after Tollgate's attempts", tasks.Failure{Code: tasks.CodeModelTemporarilyUnavailable}, tasks.FailureDetail{ProviderCode: "server_error"},
			503, "server_error", "model_temporarily_unavailable", "", false, 0},
		{"transient with attempts left (a stream)", tasks.Failure{Code: tasks.CodeModelTemporarilyUnavailable}, tasks.FailureDetail{ProviderCode: "server_error", AttemptsLeft: true},
			503, "server_error", "model_temporarily_unavailable", "", true, time.Second},
		{"malformed answers after Tollgate's attempts", tasks.Failure{Code: tasks.CodeIncompatibleModelResponse}, tasks.FailureDetail{},
			502, "server_error", "incompatible_model_response", "", false, 0},
		{"possibly executed", tasks.Failure{Code: tasks.CodePossiblyExecuted}, tasks.FailureDetail{},
			502, "server_error", "possibly_executed", "", false, 0},
		{"Tollgate's own failure", tasks.Failure{Code: tasks.CodeApplicationFailure}, tasks.FailureDetail{},
			500, "server_error", "application_failure", "", true, time.Second},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := oaiFailure(c.f, c.d)
			if a.status != c.status || a.typ != c.typ || a.code != c.code || a.param != c.param || a.retry != c.retry || a.retryAfter != c.wait {
				t.Errorf("oaiFailure = %d %q %q %q retry %v after %s; want %d %q %q %q retry %v after %s",
					a.status, a.typ, a.code, a.param, a.retry, a.retryAfter, c.status, c.typ, c.code, c.param, c.retry, c.wait)
			}
		})
	}
	// Answers that are not a task's failure.
	for _, c := range []struct {
		name   string
		err    error
		status int
		code   string
		retry  bool
	}{
		{"budget exceeded", budget.ErrInsufficient, http.StatusPaymentRequired, "budget_exceeded", false},
		{"same key, other body", tasks.ErrIdempotencyKeyReused, http.StatusUnprocessableEntity, "idempotency_key_reused", false},
		{"pending, keyed", &taskPending{taskID: "t", keyed: true}, http.StatusServiceUnavailable, "task_pending", true},
		{"pending, not keyed", &taskPending{taskID: "t"}, http.StatusServiceUnavailable, "task_pending", false},
	} {
		a := oaiAnswerOf(c.err)
		if a.status != c.status || a.code != c.code || a.retry != c.retry {
			t.Errorf("%s: %d %q retry %v, want %d %q retry %v", c.name, a.status, a.code, a.retry, c.status, c.code, c.retry)
		}
	}
}
