package provider

import (
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestClassifyCloudflare(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	env := func(code int, msg string) string {
		return `{"result":null,"success":false,"errors":[{"code":` + strconv.Itoa(code) + `,"message":"` + msg + `"}],"messages":[]}`
	}
	tests := []struct {
		name   string
		status int
		header map[string]string
		body   string
		want   Error
	}{
		{"3036 daily allocation", 429, nil, env(3036, "You have used up your daily free allocation of 10,000 neurons."),
			Error{Class: ClassExhausted, Status: 429, Code: CodeInsufficientQuota}},
		{"3036 even with a Retry-After", 429, map[string]string{"Retry-After": "3600"}, env(3036, "Account limited"),
			Error{Class: ClassExhausted, Status: 429, Code: CodeInsufficientQuota, RetryAfter: time.Hour}},
		{"3040 capacity is the provider's problem", 429, nil, env(3040, "No more data centers to forward the request to"),
			Error{Class: ClassTransient, Status: 429, Code: CodeOverloaded}},
		{"3007 upstream timeout", 408, nil, env(3007, "Request timeout"),
			Error{Class: ClassTransient, Status: 408, Code: CodeUpstreamTimeout}},
		{"3008 aborted", 408, nil, env(3008, "Request was aborted"),
			Error{Class: ClassTransient, Status: 408, Code: CodeRequestTimeout}},
		{"10000 authentication", 401, nil, env(10000, "Authentication error"),
			Error{Class: ClassExhausted, Status: 401, Code: CodeUnauthorized}},
		{"9109 token refused", 403, nil, env(9109, "Unauthorized to access requested resource"),
			Error{Class: ClassExhausted, Status: 403, Code: CodeUnauthorized}},
		{"3023 account blocked", 403, nil, env(3023, "Service unavailable for account"),
			Error{Class: ClassExhausted, Status: 403, Code: CodeAccountDisabled}},
		{"5035 model needs another plan", 403, nil, env(5035, "AiError: Model @cf/x is not available on the Workers Free plan"),
			Error{Class: ClassRejected, Status: 403, Code: CodeForbidden}},
		{"5016 model agreement", 403, nil, env(5016, "User has not agreed to Llama3.2 model terms"),
			Error{Class: ClassRejected, Status: 403, Code: CodeForbidden}},
		{"5007 no such model", 400, nil, env(5007, "No such model @cf/meta/llama-9 or task"),
			Error{Class: ClassRejected, Status: 400, Code: CodeNotFound}},
		{"3042 invalid model name", 404, nil, env(3042, "The model name is invalid"),
			Error{Class: ClassRejected, Status: 404, Code: CodeNotFound}},
		{"5006 bad input", 400, nil, env(5006, "AiError: Bad input: Error: oneOf at '/' not met, 0 matches"),
			Error{Class: ClassRejected, Status: 400, Code: CodeInvalidRequest}},
		{"5021 context window", 400, nil, env(5021, "The estimated number of input and maximum output tokens (8810) exceeded this model context window limit (8192)"),
			Error{Class: ClassRejected, Status: 400, Code: CodeContextLength, ContextWindow: 8192, ContextTokens: 8810}},
		{"3006 request too large", 413, nil, env(3006, "Request is too large"),
			Error{Class: ClassRejected, Status: 413, Code: CodeRequestTooLarge}},
		{"code in the message prefix", 500, nil, `{"error":{"message":"4006: you have used up your daily free allocation of 10,000 neurons","code":"internal_error"}}`,
			Error{Class: ClassExhausted, Status: 500, Code: CodeInsufficientQuota}},
		{"unknown code, context hint", 413, nil, env(9999, "3010 AiError: exceeded this model context window limit (24000)"),
			Error{Class: ClassRejected, Status: 413, Code: CodeContextLength, ContextWindow: 24000}},
		{"429 without a known code is throttled", 429, map[string]string{"Retry-After": "5"}, env(9998, "slow down"),
			Error{Class: ClassThrottled, Status: 429, Code: CodeRateLimited, RetryAfter: 5 * time.Second}},
		{"bare 429", 429, nil, ``,
			Error{Class: ClassThrottled, Status: 429, Code: CodeRateLimited}},
		{"unknown 4xx is rejected", 400, nil, env(9997, "something new"),
			Error{Class: ClassRejected, Status: 400, Code: CodeInvalidRequest}},
		{"502 HTML from the edge", 502, nil, `<html><title>502 Bad Gateway</title></html>`,
			Error{Class: ClassTransient, Status: 502, Code: CodeBadGateway}},
		{"500 internal", 500, nil, env(7010, "Internal error"),
			Error{Class: ClassTransient, Status: 500, Code: CodeServerError}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := classifyCloudflare(tt.status, header(tt.header), []byte(tt.body), func() time.Time { return now })
			if diff := cmp.Diff(&tt.want, got, ignoreRaw); diff != "" {
				t.Errorf("classifyCloudflare mismatch (-want +got):\n%s", diff)
			}
			assertNoLeak(t, got)
		})
	}
}
