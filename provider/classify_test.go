package provider

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// providerCase is one entry of testdata/provider-errors.json, a copy of real
// provider error bodies with their public sources.
type providerCase struct {
	ID       string            `json:"id"`
	Family   string            `json:"family"`
	Provider string            `json:"provider"`
	Status   int               `json:"status"`
	Headers  map[string]string `json:"headers"`
	Body     string            `json:"body"`
	Class    Class             `json:"class"`
	Source   string            `json:"source"`
	Note     string            `json:"note"`
}

func loadProviderCases(t *testing.T) []providerCase {
	t.Helper()
	data, err := os.ReadFile("testdata/provider-errors.json")
	if err != nil {
		t.Fatal(err)
	}
	var cases []providerCase
	if err := json.Unmarshal(data, &cases); err != nil {
		t.Fatal(err)
	}
	if len(cases) == 0 {
		t.Fatal("testdata/provider-errors.json holds no cases")
	}
	return cases
}

func header(kv map[string]string) http.Header {
	h := http.Header{}
	for k, v := range kv {
		h.Set(k, v)
	}
	return h
}

// ignoreRaw compares the exported, loggable fields only.
var ignoreRaw = cmpopts.IgnoreUnexported(Error{})

// TestClassifyRealCases runs every case in testdata through the classifier
// of its wire format, as Classify dispatches it.
func TestClassifyRealCases(t *testing.T) {
	t.Parallel()
	// Codes and waits the cases imply beyond their class.
	wantCode := map[string]string{
		"openai-429-rate-limit-tpm":     CodeRateLimited,
		"openai-429-insufficient-quota": CodeInsufficientQuota,
		"openai-400-context-length":     CodeContextLength,
		"openai-400-invalid-schema":     CodeInvalidRequest,
		"openai-500-server-error":       CodeServerError,
		"openai-503-model-overloaded":   CodeServerError,
		"anthropic-529-overloaded":      CodeOverloaded,
		"anthropic-429-rate-limit":      CodeRateLimited,
		"anthropic-400-credit-balance":  CodeInsufficientQuota,
		"anthropic-400-prompt-too-long": CodeContextLength,
		"anthropic-500-api-error":       CodeServerError,
		"cf-3036-daily-allocation":      CodeInsufficientQuota,
		"cf-3040-capacity":              CodeOverloaded,
		"cf-3007-timeout":               CodeUpstreamTimeout,
		"cf-5035-paid-plan":             CodeForbidden,
		"cf-5007-no-such-model":         CodeNotFound,
	}
	wantWait := map[string]time.Duration{
		"openai-429-rate-limit-tpm": 174 * time.Millisecond,
		"anthropic-429-rate-limit":  2 * time.Second,
	}
	// The figures of a context-length refusal: window, then tokens.
	wantFigures := map[string][2]int{
		"openai-400-context-length":     {4097, 4294},
		"anthropic-400-prompt-too-long": {200000, 200251},
	}
	wantParam := map[string]string{
		"openai-400-context-length": "messages",
		"openai-400-invalid-schema": "response_format",
	}
	families := map[string]int{}
	for _, pc := range loadProviderCases(t) {
		families[pc.Family]++
		if _, ok := wantCode[pc.ID]; !ok {
			t.Errorf("case %s has no wantCode entry: add one", pc.ID)
		}
		t.Run(pc.ID, func(t *testing.T) {
			t.Parallel()
			got, err := Classify(pc.Family, pc.Status, header(pc.Headers), []byte(pc.Body))
			if err != nil {
				t.Fatalf("Classify(%q): %v", pc.Family, err)
			}
			want := &Error{Class: pc.Class, Status: pc.Status, Code: wantCode[pc.ID], RetryAfter: wantWait[pc.ID], Param: wantParam[pc.ID],
				ContextWindow: wantFigures[pc.ID][0], ContextTokens: wantFigures[pc.ID][1]}
			if diff := cmp.Diff(want, got, ignoreRaw); diff != "" {
				t.Errorf("Classify(%s) mismatch (-want +got):\n%s", pc.ID, diff)
			}
			if got.Unclassified() {
				t.Errorf("Unclassified() = true, want every real case matched by a rule")
			}
			if got.RawMessage() == "" {
				t.Errorf("RawMessage() is empty, want the provider's message")
			}
			assertNoLeak(t, got)
		})
	}
	for _, kind := range Kinds() {
		if families[kind] == 0 {
			t.Errorf("no %s-family cases in testdata", kind)
		}
	}
}

func TestClassifyOpenAI(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name   string
		status int
		header map[string]string
		body   string
		want   Error
	}{
		{
			name:   "429 Retry-After seconds",
			status: 429,
			header: map[string]string{"Retry-After": "2"},
			body:   `{"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}}`,
			want:   Error{Class: ClassThrottled, Status: 429, Code: CodeRateLimited, RetryAfter: 2 * time.Second},
		},
		{
			name:   "retry-after-ms is more precise than Retry-After",
			status: 429,
			header: map[string]string{"Retry-After": "9", "retry-after-ms": "1500"},
			body:   `{"error":{"message":"Rate limit reached","code":"rate_limit_exceeded"}}`,
			want:   Error{Class: ClassThrottled, Status: 429, Code: CodeRateLimited, RetryAfter: 1500 * time.Millisecond},
		},
		{
			name:   "Retry-After date measured against the Date header",
			status: 429,
			header: map[string]string{"Retry-After": "Wed, 21 Oct 2015 07:28:30 GMT", "Date": "Wed, 21 Oct 2015 07:28:00 GMT"},
			body:   `{"error":{"message":"slow down","code":"rate_limit_exceeded"}}`,
			want:   Error{Class: ClassThrottled, Status: 429, Code: CodeRateLimited, RetryAfter: 30 * time.Second},
		},
		{
			name:   "Retry-After date measured against our clock",
			status: 503,
			header: map[string]string{"Retry-After": now.Add(90 * time.Second).Format(http.TimeFormat)},
			body:   `upstream busy`,
			want:   Error{Class: ClassTransient, Status: 503, Code: CodeUnavailable, RetryAfter: 90 * time.Second},
		},
		{
			name:   "Retry-After in the past",
			status: 429,
			header: map[string]string{"Retry-After": now.Add(-time.Minute).Format(http.TimeFormat)},
			body:   `{"error":{"code":"rate_limit_exceeded"}}`,
			want:   Error{Class: ClassThrottled, Status: 429, Code: CodeRateLimited},
		},
		{
			name:   "absurd Retry-After is capped",
			status: 429,
			header: map[string]string{"Retry-After": "99999999999"},
			body:   `{"error":{"code":"rate_limit_exceeded"}}`,
			want:   Error{Class: ClassThrottled, Status: 429, Code: CodeRateLimited, RetryAfter: maxRetryAfter},
		},
		{
			name:   "Go duration hint in the message",
			status: 429,
			body:   `{"error":{"message":"Rate limit reached on requests per day (RPD). Please try again in 6m0s.","type":"requests","code":"rate_limit_exceeded"}}`,
			want:   Error{Class: ClassThrottled, Status: 429, Code: CodeRateLimited, RetryAfter: 6 * time.Minute},
		},
		{
			name:   "Azure: numeric code, words hint",
			status: 429,
			body:   `{"error":{"code":"429","message":"Requests to the ChatCompletions_Create Operation under Azure OpenAI API version 2024-02-01 have exceeded token rate limit of your current OpenAI S0 pricing tier. Please retry after 20 seconds."}}`,
			want:   Error{Class: ClassThrottled, Status: 429, Code: CodeRateLimited, RetryAfter: 20 * time.Second},
		},
		{
			name:   "free-tier rate limit that mentions billing is still a rate limit",
			status: 429,
			body:   `{"error":{"message":"Rate limit reached for default-gpt-3.5-turbo in organization org-x on requests per min. Limit: 3 / min. Please try again in 20s. Please add a payment method to your account to increase your rate limit. Visit https://platform.openai.com/account/billing to add a payment method.","type":"requests","param":null,"code":null}}`,
			want:   Error{Class: ClassThrottled, Status: 429, Code: CodeRateLimited, RetryAfter: 20 * time.Second},
		},
		{
			name:   "Gemini: quota that comes back after a wait is a rate limit",
			status: 429,
			body:   `[{"error":{"code":429,"message":"You exceeded your current quota, please check your plan and billing details. Please retry in 38.17s.","status":"RESOURCE_EXHAUSTED"}}]`,
			want:   Error{Class: ClassThrottled, Status: 429, Code: CodeRateLimited, RetryAfter: 38170 * time.Millisecond},
		},
		{
			name:   "quota gone without a code",
			status: 429,
			body:   `{"error":{"message":"You exceeded your current quota, please check your plan and billing details.","type":null,"code":null}}`,
			want:   Error{Class: ClassExhausted, Status: 429, Code: CodeInsufficientQuota},
		},
		{
			name:   "OpenRouter 402 insufficient credits",
			status: 402,
			body:   `{"error":{"message":"Insufficient credits. Add more using https://openrouter.ai/credits","code":402}}`,
			want:   Error{Class: ClassExhausted, Status: 402, Code: CodeInsufficientQuota},
		},
		{
			name:   "bare 402",
			status: 402,
			body:   ``,
			want:   Error{Class: ClassExhausted, Status: 402, Code: CodeInsufficientQuota},
		},
		{
			name:   "credit balance behind 403 and a misleading type",
			status: 403,
			body:   `{"error":{"message":"Your credit balance is too low to access this API.","type":"permission_error"}}`,
			want:   Error{Class: ClassExhausted, Status: 403, Code: CodeInsufficientQuota},
		},
		{
			name:   "billing hard limit code",
			status: 400,
			body:   `{"error":{"message":"Billing hard limit has been reached","type":"invalid_request_error","param":null,"code":"billing_hard_limit_reached"}}`,
			want:   Error{Class: ClassExhausted, Status: 400, Code: CodeInsufficientQuota},
		},
		{
			name:   "explicit code beats a 5xx status",
			status: 500,
			body:   `{"error":{"message":"out of money","code":"insufficient_quota"}}`,
			want:   Error{Class: ClassExhausted, Status: 500, Code: CodeInsufficientQuota},
		},
		{
			name:   "hints do not override a 5xx",
			status: 503,
			body:   `{"error":{"message":"billing backend unavailable, quota unknown"}}`,
			want:   Error{Class: ClassTransient, Status: 503, Code: CodeUnavailable},
		},
		{
			name:   "one request larger than the whole TPM budget never fits",
			status: 429,
			body:   `{"error":{"message":"Request too large for gpt-4o in organization org-x on tokens per min (TPM): Limit 30000, Requested 45000. The input or output tokens must be reduced in order to run successfully.","type":"tokens","param":null,"code":"rate_limit_exceeded"}}`,
			want:   Error{Class: ClassRejected, Status: 429, Code: CodeRequestTooLarge},
		},
		{
			name:   "429 capacity without a wait is the provider's problem",
			status: 429,
			body:   `{"error":{"message":"Capacity temporarily exceeded, please try again."}}`,
			want:   Error{Class: ClassTransient, Status: 429, Code: CodeOverloaded},
		},
		{
			name:   "bare 429",
			status: 429,
			body:   `Too Many Requests`,
			want:   Error{Class: ClassThrottled, Status: 429, Code: CodeRateLimited},
		},
		{
			name:   "llama.cpp context overflow by message",
			status: 400,
			body:   `{"error":{"code":400,"message":"the request exceeds the available context size, try increasing it","type":"exceed_context_size_error"}}`,
			want:   Error{Class: ClassRejected, Status: 400, Code: CodeContextLength},
		},
		{
			name:   "vLLM top-level error object",
			status: 400,
			body:   `{"object":"error","message":"This model's maximum context length is 4096 tokens. However, you requested 5000 tokens.","type":"BadRequestError","param":null,"code":400}`,
			want:   Error{Class: ClassRejected, Status: 400, Code: CodeContextLength, ContextWindow: 4096, ContextTokens: 5000},
		},
		{
			name:   "string error",
			status: 400,
			body:   `{"error":"Invalid model name"}`,
			want:   Error{Class: ClassRejected, Status: 400, Code: CodeInvalidRequest},
		},
		{
			name:   "the provider's public code and the field it names",
			status: 400,
			body:   `{"error":{"message":"Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.","type":"invalid_request_error","param":"max_tokens","code":"unsupported_parameter"}}`,
			want:   Error{Class: ClassRejected, Status: 400, Code: "unsupported_parameter", Param: "max_tokens"},
		},
		{
			name:   "a nested field is named down to what OpenAI's request calls it",
			status: 400,
			body:   `{"error":{"message":"Invalid schema for function 'lookup': 'secret_city' is not valid","type":"invalid_request_error","param":"tools[0].function.parameters.properties.secret_city","code":"invalid_function_parameters"}}`,
			want:   Error{Class: ClassRejected, Status: 400, Code: "invalid_function_parameters", Param: "tools[0].function.parameters"},
		},
		{
			name:   "one string too long is OpenAI's own code, not the context",
			status: 400,
			body:   `{"error":{"message":"Invalid 'messages[0].content': string too long.","type":"invalid_request_error","param":"messages.[0].content","code":"string_above_max_length"}}`,
			want:   Error{Class: ClassRejected, Status: 400, Code: "string_above_max_length", Param: "messages.[0].content"},
		},
		{
			name:   "a param that names no request field is dropped",
			status: 400,
			body:   `{"error":{"message":"bad","type":"invalid_request_error","param":"sk-live-abc123","code":"invalid_value"}}`,
			want:   Error{Class: ClassRejected, Status: 400, Code: "invalid_value"},
		},
		{
			name:   "a param on a failure that is not a rejection is dropped",
			status: 429,
			body:   `{"error":{"message":"Rate limit reached","type":"tokens","param":"messages","code":"rate_limit_exceeded"}}`,
			want:   Error{Class: ClassThrottled, Status: 429, Code: CodeRateLimited},
		},
		{
			name:   "content policy",
			status: 400,
			body:   `{"error":{"message":"Your request was rejected as a result of our safety system.","type":"invalid_request_error","code":"content_policy_violation"}}`,
			want:   Error{Class: ClassRejected, Status: 400, Code: CodeContentPolicy},
		},
		{
			name:   "bad key is the account's problem",
			status: 401,
			body:   `{"error":{"message":"Incorrect API key provided: sk-abc***xyz.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`,
			want:   Error{Class: ClassExhausted, Status: 401, Code: CodeUnauthorized},
		},
		{
			name:   "deactivated account",
			status: 401,
			body:   `{"error":{"message":"This key is associated with a deactivated account. If you feel this is an error, contact us through our help center at help.openai.com.","type":"invalid_request_error","param":null,"code":"account_deactivated"}}`,
			want:   Error{Class: ClassExhausted, Status: 401, Code: CodeAccountDisabled},
		},
		{
			name:   "bare 401",
			status: 401,
			body:   `Unauthorized`,
			want:   Error{Class: ClassExhausted, Status: 401, Code: CodeUnauthorized},
		},
		{
			name:   "403 on the account",
			status: 403,
			body:   `{"error":{"code":"unsupported_country_region_territory","message":"Country, region, or territory not supported","param":null,"type":"request_forbidden"}}`,
			want:   Error{Class: ClassExhausted, Status: 403, Code: "unsupported_country_region_territory"},
		},
		{
			name:   "403 that names a model is about the model",
			status: 403,
			body:   `{"error":{"message":"You are not allowed to sample from this model","type":"permission_error"}}`,
			want:   Error{Class: ClassRejected, Status: 403, Code: CodeForbidden},
		},
		{
			name:   "a rate-limit code over an empty account is exhausted",
			status: 429,
			body:   `{"error":{"message":"You have reached your monthly spend limit.","code":"rate_limit_exceeded"}}`,
			want:   Error{Class: ClassExhausted, Status: 429, Code: CodeInsufficientQuota},
		},
		{
			name:   "provider's machine code beats a generic type",
			status: 404,
			body:   `{"error":{"message":"The model gpt-9 does not exist","type":"invalid_request_error","code":"model_not_found"}}`,
			want:   Error{Class: ClassRejected, Status: 404, Code: "model_not_found"},
		},
		{
			name:   "provider code pass-through when nothing else is known",
			status: 404,
			body:   `{"error":{"message":"The model gpt-9 does not exist","code":"model_not_found"}}`,
			want:   Error{Class: ClassRejected, Status: 404, Code: "model_not_found"},
		},
		{
			name:   "free text in the code field is not a code",
			status: 404,
			body:   `{"error":{"message":"nope","code":"Model Not Found!"}}`,
			want:   Error{Class: ClassRejected, Status: 404, Code: CodeNotFound},
		},
		{
			name:   "413",
			status: 413,
			body:   `<html>Request Entity Too Large</html>`,
			want:   Error{Class: ClassRejected, Status: 413, Code: CodeRequestTooLarge},
		},
		{
			name:   "a redirect is refused, not followed",
			status: 307,
			header: map[string]string{"Location": "https://elsewhere.example/v1/chat/completions"},
			body:   `<a href="https://elsewhere.example/v1/chat/completions">Temporary Redirect</a>`,
			want:   Error{Class: ClassExhausted, Status: 307, Code: CodeRedirectRefused},
		},
		{
			name:   "a redirect is refused whatever its body claims",
			status: 308,
			body:   `{"error":{"message":"rate limit","code":"rate_limit_exceeded"}}`,
			want:   Error{Class: ClassExhausted, Status: 308, Code: CodeRedirectRefused},
		},
		{
			name:   "unknown 4xx is rejected",
			status: 418,
			body:   `short and stout`,
			want:   Error{Class: ClassRejected, Status: 418, Code: "http_418"},
		},
		{
			name:   "408",
			status: 408,
			body:   `{"error":{"message":"Request timeout"}}`,
			want:   Error{Class: ClassTransient, Status: 408, Code: CodeRequestTimeout},
		},
		{
			name:   "500 HTML page",
			status: 500,
			body:   `<html><body><h1>500 Internal Server Error</h1></body></html>`,
			want:   Error{Class: ClassTransient, Status: 500, Code: CodeServerError},
		},
		{
			name:   "502 plain text",
			status: 502,
			body:   `Bad Gateway`,
			want:   Error{Class: ClassTransient, Status: 502, Code: CodeBadGateway},
		},
		{
			name:   "504 empty",
			status: 504,
			want:   Error{Class: ClassTransient, Status: 504, Code: CodeGatewayTimeout},
		},
		{
			name:   "529 overloaded",
			status: 529,
			body:   `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`,
			want:   Error{Class: ClassTransient, Status: 529, Code: CodeOverloaded},
		},
		{
			name:   "unknown 5xx is transient",
			status: 599,
			body:   `{}`,
			want:   Error{Class: ClassTransient, Status: 599, Code: CodeServerError},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := classifyOpenAI(tt.status, header(tt.header), []byte(tt.body), func() time.Time { return now })
			if diff := cmp.Diff(&tt.want, got, ignoreRaw); diff != "" {
				t.Errorf("classifyOpenAI mismatch (-want +got):\n%s", diff)
			}
			assertNoLeak(t, got)
		})
	}
}

// requestParam keeps the leading path of OpenAI request names in a
// provider's param and nothing else.
func TestRequestParam(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"messages", "messages"},
		{"max_tokens", "max_tokens"},
		{"messages.[0].content", "messages.[0].content"},
		{"messages[12].content[1].image_url.url", "messages[12].content[1].image_url.url"},
		{"tools[0].function.parameters.properties.secret_city", "tools[0].function.parameters"},
		{"response_format.json_schema.schema.required", "response_format.json_schema.schema"},
		{"logit_bias.50256", "logit_bias"},
		{"messages[99999].content", "messages"},
		{"messages[0]content", "messages[0]"},
		{"messages.", "messages"},
		{"messages[", "messages"},
		{"[0].content", ""},
		{".messages", ""},
		{"content", ""}, // not a top-level field
		{"Messages", ""},
		{"sk-live-abc123", ""},
		{"org-66tr5xhH5yhaqZAy6PAIy1Xi", ""},
		{"", ""},
		{"messages" + strings.Repeat(".content", 20), ""}, // longer than maxParam
	}
	for _, tt := range tests {
		if got := requestParam(tt.in); got != tt.want {
			t.Errorf("requestParam(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestClassifyOpenAIRawMessage(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		body string
		want string
	}{
		{"error object", `{"error":{"message":"  secret prompt echo  ","code":"x"}}`, "secret prompt echo"},
		{"plain text", "upstream said no\n", "upstream said no"},
		{"clipped", `{"error":{"message":"` + strings.Repeat("a", maxRawMessage+100) + `"}}`, strings.Repeat("a", maxRawMessage)},
		{"none", ``, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := ClassifyOpenAI(400, nil, []byte(tt.body)).RawMessage()
			if got != tt.want {
				t.Errorf("RawMessage() = %q, want %q", got, tt.want)
			}
		})
	}
}

// assertNoLeak checks that no way of printing e by accident shows the
// provider's message.
func assertNoLeak(t *testing.T, e *Error) {
	t.Helper()
	raw := e.RawMessage()
	if raw == "" {
		return
	}
	for _, s := range []string{e.Error(), fmt.Sprint(e), fmt.Sprintf("%+v", e), fmt.Sprintf("%#v", e), fmt.Sprintf("%+v", *e)} {
		if strings.Contains(s, raw) {
			t.Errorf("printed error %q contains the raw provider message", s)
		}
	}
	if b, err := json.Marshal(e); err != nil || strings.Contains(string(b), raw) {
		t.Errorf("json.Marshal(error) = %s, %v: must not contain the raw provider message", b, err)
	}
}

func TestErrorString(t *testing.T) {
	t.Parallel()
	tests := []struct {
		err  *Error
		want string
	}{
		{&Error{Class: ClassThrottled, Status: 429, Code: CodeRateLimited}, "provider: throttled: rate_limit_exceeded (status 429)"},
		{&Error{Class: ClassTransient, Code: CodeConnectionError}, "provider: transient: connection_error"},
	}
	for _, tt := range tests {
		if got := tt.err.Error(); got != tt.want {
			t.Errorf("Error() = %q, want %q", got, tt.want)
		}
	}
}

func TestRetryable(t *testing.T) {
	t.Parallel()
	want := map[Class]bool{
		ClassTransient: true,
		ClassThrottled: true,
		ClassAmbiguous: true,
		ClassExhausted: false,
		ClassRejected:  false,
	}
	for class, w := range want {
		if got := (&Error{Class: class}).Retryable(); got != w {
			t.Errorf("Error{Class: %s}.Retryable() = %v, want %v", class, got, w)
		}
	}
}

func TestUnclassified(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		kind   string
		status int
		body   string
		want   bool
		class  Class
	}{
		{"unknown 4xx, plain text", KindOpenAI, 418, `short and stout`, true, ClassRejected},
		{"unknown 4xx, unknown code passed through", KindOpenAI, 409, `{"error":{"code":"conflict_thing","message":"??"}}`, true, ClassRejected},
		{"unknown Cloudflare code", KindCloudflare, 400, `{"success":false,"errors":[{"code":9997,"message":"something new"}]}`, true, ClassRejected},
		{"bare 429", KindAnthropic, 429, ``, true, ClassThrottled},
		{"HTML 500", KindOpenAI, 500, `<html>oops</html>`, true, ClassTransient},
		{"type matched", KindAnthropic, 400, `{"type":"error","error":{"type":"invalid_request_error","message":"bad"}}`, false, ClassRejected},
		{"code matched", KindCloudflare, 429, `{"success":false,"errors":[{"code":3040,"message":"x"}]}`, false, ClassTransient},
		{"message hint matched", KindOpenAI, 400, `{"error":{"message":"This model's maximum context length is 10 tokens"}}`, false, ClassRejected},
		{"429 with a wait in the message", KindOpenAI, 429, `{"error":{"message":"quota exceeded, retry in 3s"}}`, false, ClassThrottled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := Classify(tt.kind, tt.status, http.Header{}, []byte(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			if got.Unclassified() != tt.want || got.Class != tt.class {
				t.Errorf("Classify(%s, %d, %q) = %v, Unclassified() %v; want class %s, Unclassified() %v",
					tt.kind, tt.status, tt.body, got, got.Unclassified(), tt.class, tt.want)
			}
		})
	}
	for _, e := range []*Error{
		transportError(nil, http.ErrHandlerTimeout, true, 0),
		malformed(200, nil),
	} {
		if e.Unclassified() {
			t.Errorf("%v: Unclassified() = true, want false for failures Tollgate names itself", e)
		}
	}
}

func TestClassifyDispatch(t *testing.T) {
	t.Parallel()
	body := []byte(`{"success":false,"errors":[{"code":3036,"message":"daily free allocation"}],"type":"error","error":{"type":"overloaded_error"}}`)
	h := http.Header{"Retry-After": {"1"}}
	for kind, fn := range map[string]func(int, http.Header, []byte) *Error{
		KindOpenAI:     ClassifyOpenAI,
		KindAnthropic:  ClassifyAnthropic,
		KindCloudflare: ClassifyCloudflare,
	} {
		got, err := Classify(kind, 429, h, body)
		if err != nil {
			t.Fatalf("Classify(%q): %v", kind, err)
		}
		if diff := cmp.Diff(fn(429, h, body), got, ignoreRaw); diff != "" {
			t.Errorf("Classify(%q) differs from its classifier (-want +got):\n%s", kind, diff)
		}
	}
	if got, err := Classify("gemini", 429, h, body); err == nil || got != nil {
		t.Errorf("Classify(gemini) = %v, %v; want nil and an error", got, err)
	}
}

// A context-length refusal's figures are read as integers from the
// provider's wordings, each kept only when the message gives it.
func TestContextFigures(t *testing.T) {
	t.Parallel()
	cases := []struct {
		msg            string
		window, tokens int
	}{
		{"This model's maximum context length is 128000 tokens. However, your messages resulted in 130001 tokens. Please reduce the length of the messages.", 128000, 130001},
		{"This model's maximum context length is 4096 tokens. However, you requested 5000 tokens (4000 in the messages, 1000 in the completion).", 4096, 5000},
		{"'max_tokens' is too large: 8192. This model's maximum context length is 65536 tokens and your request has 57879 input tokens (8192 > 65536 - 57879).", 65536, 57879},
		{"prompt is too long: 210000 tokens > 200000 maximum", 200000, 210000},
		{"Prompt is too long: 1,000,001 tokens > 1,000,000 maximum", 1_000_000, 1_000_001},
		{"The estimated number of input and maximum output tokens (8810) exceeded this model context window limit (8192)", 8192, 8810},
		{"This model's maximum context length is 10 tokens", 10, 0},
		{"Your input exceeds the context window of this model. Please adjust your input and try again.", 0, 0},
		{"This model's maximum context length is 99999999999 tokens. However, your messages resulted in 0 tokens.", 0, 0},
		{"", 0, 0},
	}
	for _, c := range cases {
		if w, n := contextFigures(c.msg); w != c.window || n != c.tokens {
			t.Errorf("contextFigures(%q) = %d, %d; want %d, %d", c.msg, w, n, c.window, c.tokens)
		}
	}
}
