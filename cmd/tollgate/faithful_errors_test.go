package main

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"

	"github.com/tollgate/tollgate/provider/fake"
)

// providerErrors are each kind's own answers to the failures the OpenAI
// surface maps, as the fake serves them on its lane.
var providerErrors = map[string]map[string]fake.Scripted{
	"ctxlen": {
		kindOpenAI:     {Status: 400, Body: `{"error":{"message":"This model's maximum context length is 128000 tokens.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`},
		kindAnthropic:  {Status: 400, Body: `{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 200251 tokens > 200000 maximum"}}`},
		kindCloudflare: {Status: 400, Body: `{"success":false,"errors":[{"code":5021,"message":"The estimated number of input and maximum output tokens (30000) exceeded this model context window limit (24000)."}],"result":null,"messages":[]}`},
	},
	"ratelimit": {
		kindOpenAI: {Status: 429, Headers: map[string]string{"Retry-After": "30"},
			Body: `{"error":{"message":"Rate limit reached for requests","type":"requests","param":null,"code":"rate_limit_exceeded"}}`},
		kindAnthropic: {Status: 429, Headers: map[string]string{"retry-after": "30"},
			Body: `{"type":"error","error":{"type":"rate_limit_error","message":"Number of request tokens has exceeded your per-minute rate limit"}}`},
		kindCloudflare: {Status: 429, Headers: map[string]string{"Retry-After": "30"},
			Body: `{"success":false,"errors":[{"code":971,"message":"Please wait and consider throttling your request speed"}],"result":null,"messages":[]}`},
	},
	"quota": {
		kindOpenAI:     {Status: 429, Body: `{"error":{"message":"You exceeded your current quota","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}`},
		kindAnthropic:  {Status: 400, Body: `{"type":"error","error":{"type":"invalid_request_error","message":"Your credit balance is too low to access the Anthropic API."}}`},
		kindCloudflare: {Status: 429, Body: `{"success":false,"errors":[{"code":3036,"message":"You have used up your daily free allocation of 10,000 neurons."}],"result":null,"messages":[]}`},
	},
	"transient": {
		kindOpenAI:     {Status: 500, Body: `{"error":{"message":"The server had an error","type":"server_error","param":null,"code":null}}`},
		kindAnthropic:  {Status: 529, Body: `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`},
		kindCloudflare: {Status: 500, Body: `{"success":false,"errors":[{"code":5000,"message":"Internal server error"}],"result":null,"messages":[]}`},
	},
}

// Each failure reaches the official SDK, with its default retries, as
// OpenAI itself answers it, and one SDK call never causes more than
// TOLLGATE_MAX_ATTEMPTS provider calls.
func testFaithfulErrors(t *testing.T, w *faithfulWorld) {
	cases := []struct {
		lane        string
		status      int
		typ         string
		code        string
		param       string // "" is any
		minWait     int    // Retry-After of every answer at least this, in seconds
		lastRetry   string // x-should-retry of the last answer
		sdkRequests int    // 0 is any
		calls       int    // provider calls; 0 is from 1 to TOLLGATE_MAX_ATTEMPTS
	}{
		{lane: "ctxlen", status: http.StatusBadRequest, typ: "invalid_request_error", code: "context_length_exceeded", param: "messages",
			lastRetry: "false", sdkRequests: 1, calls: 1},
		{lane: "ratelimit", status: http.StatusTooManyRequests, code: "rate_limit_exceeded", minWait: 25, lastRetry: "false", calls: 1},
		{lane: "quota", status: http.StatusTooManyRequests, typ: "insufficient_quota", code: "insufficient_quota",
			lastRetry: "false", sdkRequests: 1, calls: 1},
		{lane: "transient", status: http.StatusServiceUnavailable, typ: "server_error", lastRetry: "false"},
	}
	for _, c := range cases {
		for _, kind := range kinds {
			t.Run(c.lane+"/"+kind, func(t *testing.T) {
				t.Parallel()
				fp := w.fake(c.lane, kind)
				// Enough answers that no attempt, Tollgate's or the SDK's,
				// finds the queue empty.
				for range 3 * faithfulMaxAttempts {
					fp.Script(providerErrors[c.lane][kind])
				}
				client, log := w.sdk()
				_, err := client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
					Model:    c.lane + "-" + kind,
					Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Hello [" + c.lane + " " + kind + "]")},
				})
				var apiErr *openai.Error
				if !errors.As(err, &apiErr) {
					t.Fatalf("err = %v; want an API error %d\nlogs:\n%s", err, c.status, w.logs)
				}
				if apiErr.StatusCode != c.status || (c.typ != "" && apiErr.Type != c.typ) || (c.code != "" && apiErr.Code != c.code) ||
					(c.param != "" && apiErr.Param != c.param) {
					t.Errorf("error = %d type %q code %q param %q; want %d type %q code %q param %q",
						apiErr.StatusCode, apiErr.Type, apiErr.Code, apiErr.Param, c.status, c.typ, c.code, c.param)
				}
				headers := log.answerHeaders()
				for i, h := range headers {
					if c.minWait > 0 {
						if wait, err := strconv.Atoi(h.Get("Retry-After")); err != nil || wait < c.minWait {
							t.Errorf("answer %d: Retry-After = %q; want at least %d", i, h.Get("Retry-After"), c.minWait)
						}
					}
				}
				if len(headers) == 0 || headers[len(headers)-1].Get("x-should-retry") != c.lastRetry {
					var got []string
					for _, h := range headers {
						got = append(got, h.Get("x-should-retry"))
					}
					t.Errorf("x-should-retry per answer = %s; want the last %q", strings.Join(got, " "), c.lastRetry)
				}
				if c.sdkRequests != 0 && log.requests() != c.sdkRequests {
					t.Errorf("the SDK sent %d requests; want %d", log.requests(), c.sdkRequests)
				}
				calls := fp.CallCount()
				switch {
				case c.calls != 0 && calls != c.calls:
					t.Errorf("provider calls = %d; want %d", calls, c.calls)
				case calls < 1 || calls > faithfulMaxAttempts:
					t.Errorf("provider calls = %d for one SDK call (%d requests); want 1 to TOLLGATE_MAX_ATTEMPTS (%d)", calls, log.requests(), faithfulMaxAttempts)
				}
			})
		}
	}
}
