package provider

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestClassifyAnthropic(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	body := func(typ, msg string) string {
		return `{"type":"error","error":{"type":"` + typ + `","message":"` + msg + `"},"request_id":"req_011CX"}`
	}
	tests := []struct {
		name   string
		status int
		header map[string]string
		body   string
		want   Error
	}{
		{
			name:   "529 overloaded",
			status: 529,
			body:   body("overloaded_error", "Overloaded"),
			want:   Error{Class: ClassTransient, Status: 529, Code: CodeOverloaded},
		},
		{
			name:   "overloaded behind a 500 is still overloaded",
			status: 500,
			body:   body("overloaded_error", "Overloaded"),
			want:   Error{Class: ClassTransient, Status: 500, Code: CodeOverloaded},
		},
		{
			name:   "rate limit with retry-after",
			status: 429,
			header: map[string]string{"retry-after": "17", "anthropic-ratelimit-requests-remaining": "0"},
			body:   body("rate_limit_error", "Number of requests has exceeded your per-minute rate limit"),
			want:   Error{Class: ClassThrottled, Status: 429, Code: CodeRateLimited, RetryAfter: 17 * time.Second},
		},
		{
			name:   "spend limit arrives as rate_limit_error with a detail code",
			status: 429,
			body:   `{"type":"error","error":{"type":"rate_limit_error","message":"You have reached your usage tier's monthly limit.","details":{"error_code":"enforced_spend_limit_reached"}}}`,
			want:   Error{Class: ClassExhausted, Status: 429, Code: CodeInsufficientQuota},
		},
		{
			name:   "detail of an unexpected shape is ignored",
			status: 429,
			body:   `{"type":"error","error":{"type":"rate_limit_error","message":"slow down","details":"enforced_spend_limit_reached"}}`,
			want:   Error{Class: ClassThrottled, Status: 429, Code: CodeRateLimited},
		},
		{
			name:   "credit balance behind 400 invalid_request_error",
			status: 400,
			body:   body("invalid_request_error", "Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing to upgrade or purchase credits."),
			want:   Error{Class: ClassExhausted, Status: 400, Code: CodeInsufficientQuota},
		},
		{
			name:   "workspace usage limit behind 400",
			status: 400,
			body:   body("invalid_request_error", "You have reached your specified workspace API usage limits. You will regain access on 2026-04-01 at 00:00 UTC."),
			want:   Error{Class: ClassExhausted, Status: 400, Code: CodeInsufficientQuota},
		},
		{
			name:   "402 billing_error",
			status: 402,
			body:   body("billing_error", "There is an issue with your payment method."),
			want:   Error{Class: ClassExhausted, Status: 402, Code: CodeInsufficientQuota},
		},
		{
			name:   "prompt too long",
			status: 400,
			body:   body("invalid_request_error", "prompt is too long: 200251 tokens > 200000 maximum"),
			want:   Error{Class: ClassRejected, Status: 400, Code: CodeContextLength, ContextWindow: 200000, ContextTokens: 200251},
		},
		{
			name:   "other invalid request",
			status: 400,
			body:   body("invalid_request_error", "messages: roles must alternate between \"user\" and \"assistant\""),
			want:   Error{Class: ClassRejected, Status: 400, Code: CodeInvalidRequest},
		},
		{
			name:   "401 invalid key is the account's problem",
			status: 401,
			body:   body("authentication_error", "invalid x-api-key"),
			want:   Error{Class: ClassExhausted, Status: 401, Code: CodeUnauthorized},
		},
		{
			name:   "403 on the account",
			status: 403,
			body:   body("permission_error", "Your API key does not have permission to use the specified resource."),
			want:   Error{Class: ClassExhausted, Status: 403, Code: CodeForbidden},
		},
		{
			name:   "403 on one model",
			status: 403,
			body:   body("permission_error", "Your organization does not have access to this model."),
			want:   Error{Class: ClassRejected, Status: 403, Code: CodeForbidden},
		},
		{
			name:   "404 model",
			status: 404,
			body:   body("not_found_error", "model: claude-9"),
			want:   Error{Class: ClassRejected, Status: 404, Code: CodeNotFound},
		},
		{
			name:   "413",
			status: 413,
			body:   body("request_too_large", "Request exceeds the maximum allowed number of bytes."),
			want:   Error{Class: ClassRejected, Status: 413, Code: CodeRequestTooLarge},
		},
		{
			name:   "500 api_error",
			status: 500,
			body:   body("api_error", "Internal server error"),
			want:   Error{Class: ClassTransient, Status: 500, Code: CodeServerError},
		},
		{
			name:   "504 timeout_error: the provider answered",
			status: 504,
			body:   body("timeout_error", "Request timed out"),
			want:   Error{Class: ClassTransient, Status: 504, Code: CodeUpstreamTimeout},
		},
		{
			name:   "529 from a proxy in HTML",
			status: 529,
			body:   `<html>Site is overloaded</html>`,
			want:   Error{Class: ClassTransient, Status: 529, Code: CodeOverloaded},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := classifyAnthropic(tt.status, header(tt.header), []byte(tt.body), func() time.Time { return now })
			if diff := cmp.Diff(&tt.want, got, ignoreRaw); diff != "" {
				t.Errorf("classifyAnthropic mismatch (-want +got):\n%s", diff)
			}
			assertNoLeak(t, got)
		})
	}
}
