package server_test

import (
	"cmp"
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/tollgate/tollgate/accounts"
	"github.com/tollgate/tollgate/provider/fake"
)

// sdkAnswers records the headers of every answer the SDK received, and
// shortens the wait an answer asks for to a millisecond, so that the SDK's
// own retries (its default MaxRetries, 2) run at once; Tollgate's pause on
// the provider key is the database's and is not shortened.
type sdkAnswers struct {
	mu      sync.Mutex
	headers []http.Header
}

func (s *sdkAnswers) middleware(r *http.Request, next option.MiddlewareNext) (*http.Response, error) {
	res, err := next(r)
	if res != nil {
		s.mu.Lock()
		s.headers = append(s.headers, res.Header.Clone())
		s.mu.Unlock()
		if res.Header.Get("retry-after-ms") != "" {
			res.Header.Set("retry-after-ms", "1")
		}
	}
	return res, err
}

func (s *sdkAnswers) all() []http.Header {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]http.Header(nil), s.headers...)
}

// sdkWithDefaultRetries is the official SDK as an application builds it:
// only the base URL and key are set, so its retries are the defaults.
func sdkWithDefaultRetries(e *env, key string) (openai.Client, *countingTransport, *sdkAnswers) {
	ct := &countingTransport{next: e.client.Transport}
	answers := &sdkAnswers{}
	return openai.NewClient(option.WithBaseURL(e.url+"/v1"), option.WithAPIKey(key),
		option.WithHTTPClient(&http.Client{Transport: ct}), option.WithMiddleware(answers.middleware)), ct, answers
}

// Each failure reaches the official SDK as OpenAI itself would answer it
// (status, type, code, param, retry headers), on each provider kind, and
// the SDK's default retries never multiply Tollgate's own attempts: the
// provider calls one SDK call causes stay within TOLLGATE_MAX_ATTEMPTS.
func TestOpenAISDKErrorsAsOpenAIAnswers(t *testing.T) {
	t.Parallel()
	const maxAttempts = 3
	rateLimited := `{"error":{"message":"Rate limit reached for gpt-4o-mini in organization org-secret on requests per min","type":"requests","param":null,"code":"rate_limit_exceeded"}}`
	wait30 := map[string]string{"Retry-After": "30"}
	cases := []struct {
		name    string
		model   string // "" is test-model (OpenAI kind)
		budget  int64  // 0 is plenty
		script  []fake.Scripted
		reuse   bool // send the request with a key already used for another body
		status  int
		typ     string
		code    string
		param   string   // "" wants null
		retry   []string // x-should-retry of each answer, one per SDK request
		minWait int      // every answer's Retry-After at least this
		calls   int      // provider calls for the SDK call
		// pauseCap is the longest pause of a provider key
		// (tasks.Config.RetryMax); 0 is a minute.
		pauseCap time.Duration
		opts     []option.RequestOption
		text     string // in the message, when set
	}{
		{name: "budget exceeded", budget: 1,
			status: http.StatusPaymentRequired, typ: "insufficient_quota", code: "budget_exceeded", retry: []string{"false"}},
		{name: "same key, other body", reuse: true,
			status: http.StatusUnprocessableEntity, typ: "invalid_request_error", code: "idempotency_key_reused", retry: []string{"false"}},
		{name: "validation names the field", model: "no-such-model",
			status: http.StatusBadRequest, typ: "invalid_request_error", code: "invalid_request", param: "model", retry: []string{"false"}},
		// A context-length refusal keeps the wording clients detect
		// (LangChain's ContextOverflowError: "maximum context length"),
		// with the figures the provider gave, in Tollgate's sentence.
		{name: "context length",
			script: []fake.Scripted{{Status: 400, Body: `{"error":{"message":"This model's maximum context length is 128000 tokens. However, your messages resulted in 130001 tokens; secret prompt text","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`}},
			status: http.StatusBadRequest, typ: "invalid_request_error", code: "context_length_exceeded", param: "messages", retry: []string{"false"}, calls: 1,
			text: "This model's maximum context length is 128000 tokens. However, your messages resulted in 130001 tokens. Please reduce the length of the messages."},
		{name: "context length, no figures",
			script: []fake.Scripted{{Status: 400, Body: `{"error":{"message":"Your input exceeds the context window of this model; secret","type":"invalid_request_error","param":"input","code":"context_length_exceeded"}}`}},
			status: http.StatusBadRequest, typ: "invalid_request_error", code: "context_length_exceeded", param: "messages", retry: []string{"false"}, calls: 1,
			text: "Your messages exceed this model's maximum context length."},
		{name: "context length, Anthropic", model: "backup-model",
			script: []fake.Scripted{{Status: 400, Body: `{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 200251 tokens > 200000 maximum"},"request_id":"req_011CWdepJvA2D819tdYYq4h7"}`}},
			status: http.StatusBadRequest, typ: "invalid_request_error", code: "context_length_exceeded", param: "messages", retry: []string{"false"}, calls: 1,
			text: "This model's maximum context length is 200000 tokens. However, your messages resulted in 200251 tokens."},
		{name: "unsupported parameter names it",
			script: []fake.Scripted{{Status: 400, Body: `{"error":{"message":"Unsupported parameter: 'max_tokens' is not supported with this model.","type":"invalid_request_error","param":"max_tokens","code":"unsupported_parameter"}}`}},
			status: http.StatusBadRequest, typ: "invalid_request_error", code: "unsupported_parameter", param: "max_tokens", retry: []string{"false"}, calls: 1},
		{name: "a field named without an OpenAI code",
			script: []fake.Scripted{{Status: 400, Body: `{"error":{"message":"Invalid schema for response_format 'secret_name'","type":"invalid_request_error","param":"response_format","code":null}}`}},
			status: http.StatusBadRequest, typ: "invalid_request_error", code: "model_incompatible", param: "response_format", retry: []string{"false"}, calls: 1},
		{name: "a rejection with a vendor code",
			script: []fake.Scripted{{Status: 422, Body: `{"error":{"message":"bad input sk-live-123","type":"invalid_request_error","param":"sk-live-123","code":"vendor_specific_refusal"}}`}},
			status: http.StatusBadRequest, typ: "invalid_request_error", code: "model_incompatible", retry: []string{"false"}, calls: 1},
		{name: "rate limited: the provider's wait, retries call no paused key",
			script: []fake.Scripted{{Status: 429, Headers: wait30, Body: rateLimited}, {Status: 429, Headers: wait30, Body: rateLimited}},
			status: http.StatusTooManyRequests, typ: "requests", code: "rate_limit_exceeded", minWait: 25,
			// The third try would be a call past the attempt bound.
			retry: []string{"true", "true", "false"}, calls: 1},
		{name: "rate limited: the provider's wait beyond the key's pause",
			script: []fake.Scripted{{Status: 429, Headers: wait30, Body: rateLimited}}, pauseCap: 20 * time.Second,
			status: http.StatusTooManyRequests, typ: "requests", code: "rate_limit_exceeded", minWait: 25,
			// The key's pause ends before the provider's wait, which the
			// answer still asks for (an answer asking for the pause's
			// 20 s would fail minWait), and long after this test has
			// counted its calls: the task's next call waits for it.
			opts:  []option.RequestOption{option.WithMaxRetries(0)},
			retry: []string{"true"}, calls: 1},
		{name: "rate limited, Anthropic", model: "backup-model",
			script: []fake.Scripted{{Status: 429, Headers: map[string]string{"retry-after": "30"},
				Body: `{"type":"error","error":{"type":"rate_limit_error","message":"Number of request tokens has exceeded your per-minute rate limit"}}`}},
			status: http.StatusTooManyRequests, typ: "requests", code: "rate_limit_exceeded", minWait: 25,
			retry: []string{"true", "true", "false"}, calls: 1},
		{name: "provider quota exhausted",
			script: []fake.Scripted{{Status: 429, Body: `{"error":{"message":"You exceeded your current quota","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}`}},
			status: http.StatusTooManyRequests, typ: "insufficient_quota", code: "insufficient_quota", retry: []string{"false"}, calls: 1},
		{name: "credit exhausted, Anthropic", model: "backup-model",
			script: []fake.Scripted{{Status: 400, Body: `{"type":"error","error":{"type":"invalid_request_error","message":"Your credit balance is too low to access the Anthropic API."}}`}},
			status: http.StatusTooManyRequests, typ: "insufficient_quota", code: "insufficient_quota", retry: []string{"false"}, calls: 1},
		{name: "daily allocation used up, Workers AI", model: "cf-model",
			script: []fake.Scripted{{Status: 429, Body: `{"success":false,"errors":[{"code":3036,"message":"You have used up your daily free allocation of 10,000 neurons."}]}`}},
			status: http.StatusTooManyRequests, typ: "insufficient_quota", code: "insufficient_quota", retry: []string{"false"}, calls: 1},
		// A redirect is refused and opens the key's breaker, but the
		// account is not out of quota: the answer says what happened.
		{name: "provider redirected",
			script: []fake.Scripted{{Status: 302, Headers: map[string]string{"Location": "https://elsewhere.example/v1/chat/completions"}}},
			status: http.StatusBadGateway, typ: "server_error", code: "provider_redirected", retry: []string{"false"}, calls: 1,
			text: "redirected the call, and it was refused"},
		{name: "provider redirected, Anthropic", model: "backup-model",
			script: []fake.Scripted{{Status: 308, Headers: map[string]string{"Location": "https://elsewhere.example/v1/messages"}}},
			status: http.StatusBadGateway, typ: "server_error", code: "provider_redirected", retry: []string{"false"}, calls: 1,
			text: "redirected the call, and it was refused"},
		{name: "transient after Tollgate's attempts",
			script: repeat(fake.Scripted{Status: 500, Body: `{"error":{"message":"boom","type":"server_error","param":null,"code":null}}`}, 3*maxAttempts),
			status: http.StatusServiceUnavailable, typ: "server_error", code: "model_temporarily_unavailable", retry: []string{"false"}, calls: maxAttempts},
		{name: "overloaded after Tollgate's attempts, Anthropic", model: "backup-model",
			script: repeat(fake.Scripted{Status: 529, Body: `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`}, 3*maxAttempts),
			status: http.StatusServiceUnavailable, typ: "server_error", code: "model_temporarily_unavailable", retry: []string{"false"}, calls: maxAttempts},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, envOptions{probeEvery: 1 << 62, maxAttempts: maxAttempts, retryMax: cmp.Or(c.pauseCap, time.Minute)})
			key := e.owner("acme", accounts.RoleClient, cmp.Or(c.budget, 1_000_000))
			client, ct, answers := sdkWithDefaultRetries(e, key)
			ctx := context.Background()
			params := chatParams("hello")
			if c.model != "" {
				params.Model = c.model
			}
			opts := c.opts
			callsBefore := 0
			if c.reuse {
				if _, err := client.Chat.Completions.New(ctx, chatParams("first"), option.WithHeader("Idempotency-Key", "k1")); err != nil {
					t.Fatal(err)
				}
				ct.n.Store(0)
				answers.headers = nil
				callsBefore = e.fake.CallCount()
				opts = append(opts, option.WithHeader("Idempotency-Key", "k1"))
			}
			e.fake.Script(c.script...)
			_, err := client.Chat.Completions.New(ctx, params, opts...)
			var apiErr *openai.Error
			if !errors.As(err, &apiErr) {
				t.Fatalf("err = %v, want an API error", err)
			}
			if apiErr.StatusCode != c.status || apiErr.Type != c.typ || apiErr.Code != c.code || apiErr.Param != c.param {
				t.Errorf("error = %d type %q code %q param %q, want %d %q %q %q",
					apiErr.StatusCode, apiErr.Type, apiErr.Code, apiErr.Param, c.status, c.typ, c.code, c.param)
			}
			if !strings.Contains(apiErr.Message, c.text) || c.text != "" && strings.Contains(apiErr.Message, "quota") {
				t.Errorf("message %q, want one saying %q and nothing of quota", apiErr.Message, c.text)
			}
			for _, secret := range []string{"secret", "sk-live", "org-", "req_011", "neurons"} {
				if strings.Contains(apiErr.Message, secret) || strings.Contains(apiErr.Param, secret) {
					t.Errorf("the provider's text reached the client: %q (param %q)", apiErr.Message, apiErr.Param)
				}
			}
			hdrs := answers.all()
			var retries []string
			for i, h := range hdrs {
				retries = append(retries, h.Get("x-should-retry"))
				if c.minWait > 0 {
					if wait, err := strconv.Atoi(h.Get("Retry-After")); err != nil || wait < c.minWait {
						t.Errorf("answer %d: Retry-After = %q, want at least %d", i, h.Get("Retry-After"), c.minWait)
					}
				}
			}
			if strings.Join(retries, " ") != strings.Join(c.retry, " ") {
				t.Errorf("x-should-retry per answer = %q, want %q", retries, c.retry)
			}
			if n := ct.n.Load(); n != int64(len(c.retry)) {
				t.Errorf("the SDK sent %d requests, want %d", n, len(c.retry))
			}
			if n := e.fake.CallCount() - callsBefore; n != c.calls {
				t.Errorf("provider calls = %d, want %d", n, c.calls)
			}
			if n := e.fake.CallCount() - callsBefore; n > maxAttempts {
				t.Errorf("provider calls = %d, more than TOLLGATE_MAX_ATTEMPTS (%d)", n, maxAttempts)
			}
			e.checkInvariants()
		})
	}
	t.Run("transient retried by Tollgate", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, envOptions{})
		key := e.owner("acme", accounts.RoleClient, 1_000_000)
		e.fake.Script(fake.Scripted{Status: 500, Body: `{"error":{"message":"boom","type":"server_error","param":null,"code":null}}`})
		client, ct, _ := sdkWithDefaultRetries(e, key)
		got, err := client.Chat.Completions.New(context.Background(), chatParams("hello"))
		if err != nil || got.Choices[0].Message.Content == "" {
			t.Fatalf("completion after a transient failure: %v", err)
		}
		if ct.n.Load() != 1 || e.fake.CallCount() != 2 {
			t.Errorf("SDK requests = %d, provider calls = %d; want 1 and 2", ct.n.Load(), e.fake.CallCount())
		}
	})
}

// A stream makes one attempt, so its failure leaves retries to the client,
// but only as many as the attempt bound allows: with TOLLGATE_MAX_ATTEMPTS
// at 2, the SDK's default two retries become one, and one streaming call
// makes two provider calls.
func TestOpenAISDKStreamRetriesStayWithinTheAttemptBound(t *testing.T) {
	t.Parallel()
	const maxAttempts = 2
	e := newEnv(t, envOptions{probeEvery: 1 << 62, maxAttempts: maxAttempts})
	key := e.owner("acme", accounts.RoleClient, 1_000_000)
	client, ct, answers := sdkWithDefaultRetries(e, key)
	e.fake.Script(repeat(fake.Scripted{Status: 500, Body: `{"error":{"message":"boom","type":"server_error","param":null,"code":null}}`}, 3)...)
	stream := client.Chat.Completions.NewStreaming(context.Background(), chatParams("stream me"))
	for stream.Next() {
	}
	var apiErr *openai.Error
	if err := stream.Err(); !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusServiceUnavailable || apiErr.Code != "model_temporarily_unavailable" {
		t.Fatalf("stream error = %v, want a 503 model_temporarily_unavailable", err)
	}
	var retries []string
	for _, h := range answers.all() {
		retries = append(retries, h.Get("x-should-retry"))
	}
	if got := strings.Join(retries, " "); ct.n.Load() != 2 || got != "true false" {
		t.Errorf("SDK requests = %d, x-should-retry per answer %q; want 2, \"true false\"", ct.n.Load(), got)
	}
	if calls := e.fake.CallCount(); calls != maxAttempts {
		t.Errorf("provider calls = %d, want %d", calls, maxAttempts)
	}
	e.checkInvariants()
}

// The native API's answers that no retry can change say so to HTTP
// clients built like the official SDKs.
func TestNativeProblemsSayWhenNotToRetry(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	poor := e.owner("poor", accounts.RoleClient, 1)
	rich := e.owner("rich", accounts.RoleClient, 1_000_000)
	body := func(content string) []byte {
		return []byte(`{"model":"test-model","max_tokens":16,"messages":[{"role":"user","content":"` + content + `"}]}`)
	}
	e.submit(rich, "k1", body("first"))
	for _, c := range []struct {
		name   string
		res    response
		status int
	}{
		{"budget exceeded", e.post(poor, "k1", body("hello"), nil), http.StatusPaymentRequired},
		{"same key, other body", e.post(rich, "k1", body("other"), nil), http.StatusUnprocessableEntity},
	} {
		if c.res.status != c.status || c.res.header.Get("x-should-retry") != "false" {
			t.Errorf("%s: %d x-should-retry %q, want %d \"false\"", c.name, c.res.status, c.res.header.Get("x-should-retry"), c.status)
		}
	}
	if res := e.post(rich, "", body("no key"), nil); res.header.Get("x-should-retry") != "" {
		t.Errorf("a 400 carries x-should-retry %q, want none", res.header.Get("x-should-retry"))
	}
}
