package server_test

import (
	"bufio"
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/tollgate/tollgate/accounts"
	"github.com/tollgate/tollgate/provider/fake"
	"github.com/tollgate/tollgate/tasks"
)

// countingTransport counts the requests the SDK makes, so a test can prove
// the SDK did not retry.
type countingTransport struct {
	next http.RoundTripper
	n    atomic.Int64
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return c.next.RoundTrip(r)
}

func sdk(e *env, key string, opts ...option.RequestOption) (openai.Client, *countingTransport) {
	ct := &countingTransport{next: e.client.Transport}
	base := []option.RequestOption{
		option.WithBaseURL(e.url + "/v1"), option.WithAPIKey(key),
		option.WithHTTPClient(&http.Client{Transport: ct}), option.WithMaxRetries(2),
	}
	return openai.NewClient(append(base, opts...)...), ct
}

func chatParams(content string) openai.ChatCompletionNewParams {
	return openai.ChatCompletionNewParams{
		Model:     "test-model",
		Messages:  []openai.ChatCompletionMessageParamUnion{openai.UserMessage(content)},
		MaxTokens: openai.Int(16),
	}
}

func TestOpenAISDKCompletionAndIdempotency(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	key := e.owner("acme", accounts.RoleClient, 1_000_000)
	client, _ := sdk(e, key)
	ctx := context.Background()

	var hdr http.Header
	got, err := client.Chat.Completions.New(ctx, chatParams("hello there"), option.WithResponseInto(new(*http.Response)),
		option.WithMiddleware(func(r *http.Request, next option.MiddlewareNext) (*http.Response, error) {
			res, err := next(r)
			if res != nil {
				hdr = res.Header
			}
			return res, err
		}))
	if err != nil {
		t.Fatal(err)
	}
	if got.Choices[0].Message.Content == "" || got.Usage.TotalTokens == 0 || got.Model != "test-model" {
		t.Errorf("completion = %+v", got)
	}
	if hdr.Get("X-Tollgate-Task-Id") == "" {
		t.Error("no X-Tollgate-Task-Id header")
	}

	first, err := client.Chat.Completions.New(ctx, chatParams("same"), option.WithHeader("Idempotency-Key", "k1"))
	if err != nil {
		t.Fatal(err)
	}
	second, err := client.Chat.Completions.New(ctx, chatParams("same"), option.WithHeader("Idempotency-Key", "k1"))
	if err != nil {
		t.Fatal(err)
	}
	if first.ID != second.ID || first.Choices[0].Message.Content != second.Choices[0].Message.Content {
		t.Errorf("replay differs: %s %q vs %s %q", first.ID, first.Choices[0].Message.Content, second.ID, second.Choices[0].Message.Content)
	}
	if n := e.fake.CallCount(); n != 2 {
		t.Errorf("provider calls = %d, want 2 (one per distinct request)", n)
	}

	_, err = client.Chat.Completions.New(ctx, chatParams("different"), option.WithHeader("Idempotency-Key", "k1"))
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusUnprocessableEntity || apiErr.Code != "idempotency_key_reused" {
		t.Errorf("changed body with the same key: %v, want a 422 idempotency_key_reused", err)
	}
	models, err := client.Models.List(ctx)
	if err != nil || len(models.Data) == 0 {
		t.Errorf("models: %v %+v", err, models)
	}
}

// Each failure reaches the official SDK as OpenAI itself would answer it
// (status, type, code, param, retry headers), and the SDK's default retries
// (2) never multiply Tollgate's own attempts upstream: the provider calls
// one SDK call causes stay within TOLLGATE_MAX_ATTEMPTS.
func TestOpenAISDKErrorsAsOpenAIAnswers(t *testing.T) {
	t.Parallel()
	const maxAttempts = 3
	rateLimited := `{"error":{"message":"Rate limit reached for gpt-4o-mini in organization org-secret on requests per min","type":"requests","param":null,"code":"rate_limit_exceeded"}}`
	cases := []struct {
		name    string
		budget  int64
		script  []fake.Scripted
		reuse   bool // send the request with a key already used for another body
		status  int
		typ     string
		code    string
		param   string // "" wants null
		retry   string // x-should-retry
		minWait int    // Retry-After at least this, when retry is "true"
		sdkReqs int64
		calls   [2]int // provider calls, at least and at most
		opts    []option.RequestOption
	}{
		{name: "budget exceeded", budget: 1, status: http.StatusPaymentRequired, typ: "insufficient_quota", code: "budget_exceeded",
			retry: "false", sdkReqs: 1},
		{name: "same key, other body", budget: 1_000_000, reuse: true, status: http.StatusUnprocessableEntity, typ: "invalid_request_error",
			code: "idempotency_key_reused", retry: "false", sdkReqs: 1, calls: [2]int{1, 1}},
		{name: "context length", budget: 1_000_000,
			script: []fake.Scripted{{Status: 400, Body: `{"error":{"message":"This model's maximum context length is 4097 tokens; secret prompt text","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`}},
			status: http.StatusBadRequest, typ: "invalid_request_error", code: "context_length_exceeded", param: "messages", retry: "false", sdkReqs: 1, calls: [2]int{1, 1}},
		{name: "unsupported parameter", budget: 1_000_000,
			script: []fake.Scripted{{Status: 400, Body: `{"error":{"message":"Unsupported parameter: 'max_tokens'","type":"invalid_request_error","param":"max_tokens","code":"unsupported_parameter"}}`}},
			status: http.StatusBadRequest, typ: "invalid_request_error", code: "unsupported_parameter", retry: "false", sdkReqs: 1, calls: [2]int{1, 1}},
		{name: "a rejection with a vendor code", budget: 1_000_000,
			script: []fake.Scripted{{Status: 422, Body: `{"error":{"message":"bad input sk-live-123","type":"invalid_request_error","code":"vendor_specific_refusal"}}`}},
			status: http.StatusBadRequest, typ: "invalid_request_error", code: "model_incompatible", retry: "false", sdkReqs: 1, calls: [2]int{1, 1}},
		{name: "rate limited: the provider's wait", budget: 1_000_000,
			script: []fake.Scripted{{Status: 429, Headers: map[string]string{"Retry-After": "30"}, Body: rateLimited}},
			status: http.StatusTooManyRequests, typ: "requests", code: "rate_limit_exceeded", retry: "true", minWait: 25,
			sdkReqs: 1, calls: [2]int{1, 1},
			// The SDK would wait the 30 s; this case checks the answer.
			opts: []option.RequestOption{option.WithMaxRetries(0)}},
		{name: "rate limited: SDK retries call no paused key", budget: 1_000_000,
			script: []fake.Scripted{
				{Status: 429, Headers: map[string]string{"Retry-After": "1"}, Body: rateLimited},
				{Status: 429, Headers: map[string]string{"Retry-After": "1"}, Body: rateLimited},
				{Status: 429, Headers: map[string]string{"Retry-After": "1"}, Body: rateLimited}},
			status: http.StatusTooManyRequests, typ: "requests", code: "rate_limit_exceeded", retry: "true", minWait: 1,
			// Each SDK retry is a new task: it calls the provider only if
			// the pause has ended by then.
			sdkReqs: 3, calls: [2]int{1, 3}},
		{name: "provider quota exhausted", budget: 1_000_000,
			script: []fake.Scripted{{Status: 429, Body: `{"error":{"message":"You exceeded your current quota","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}`}},
			status: http.StatusTooManyRequests, typ: "insufficient_quota", code: "insufficient_quota", retry: "false", sdkReqs: 1, calls: [2]int{1, 1}},
		{name: "transient after Tollgate's attempts", budget: 1_000_000,
			script: repeat(fake.Scripted{Status: 500, Body: `{"error":{"message":"boom","type":"server_error","param":null,"code":null}}`}, 3*maxAttempts),
			status: http.StatusServiceUnavailable, typ: "server_error", code: "model_temporarily_unavailable", retry: "false",
			sdkReqs: 1, calls: [2]int{maxAttempts, maxAttempts}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, envOptions{probeEvery: 1 << 62, maxAttempts: maxAttempts, retryMax: time.Minute})
			key := e.owner("acme", accounts.RoleClient, c.budget)
			client, ct := sdk(e, key)
			ctx := context.Background()
			var opts []option.RequestOption
			if c.reuse {
				if _, err := client.Chat.Completions.New(ctx, chatParams("first"), option.WithHeader("Idempotency-Key", "k1")); err != nil {
					t.Fatal(err)
				}
				ct.n.Store(0)
				opts = append(opts, option.WithHeader("Idempotency-Key", "k1"))
			}
			e.fake.Script(c.script...)
			var hdrs []http.Header
			opts = append(opts, option.WithMiddleware(func(r *http.Request, next option.MiddlewareNext) (*http.Response, error) {
				res, err := next(r)
				if res != nil {
					hdrs = append(hdrs, res.Header.Clone())
				}
				return res, err
			}))
			_, err := client.Chat.Completions.New(ctx, chatParams("hello"), append(opts, c.opts...)...)
			var apiErr *openai.Error
			if !errors.As(err, &apiErr) {
				t.Fatalf("err = %v, want an API error", err)
			}
			if apiErr.StatusCode != c.status || apiErr.Type != c.typ || apiErr.Code != c.code || apiErr.Param != c.param {
				t.Errorf("error = %d type %q code %q param %q, want %d %q %q %q",
					apiErr.StatusCode, apiErr.Type, apiErr.Code, apiErr.Param, c.status, c.typ, c.code, c.param)
			}
			if strings.Contains(apiErr.Message, "secret") || strings.Contains(apiErr.Message, "sk-live") || strings.Contains(apiErr.Message, "org-") {
				t.Errorf("the provider's text reached the client: %q", apiErr.Message)
			}
			for i, h := range hdrs {
				if got := h.Get("x-should-retry"); got != c.retry {
					t.Errorf("response %d: x-should-retry = %q, want %q", i, got, c.retry)
				}
				if c.retry == "true" {
					if wait, err := strconv.Atoi(h.Get("Retry-After")); err != nil || wait < c.minWait {
						t.Errorf("response %d: Retry-After = %q, want at least %d", i, h.Get("Retry-After"), c.minWait)
					}
				}
			}
			if n := ct.n.Load(); n != c.sdkReqs {
				t.Errorf("the SDK sent %d requests, want %d", n, c.sdkReqs)
			}
			if n := e.fake.CallCount(); n < c.calls[0] || n > c.calls[1] {
				t.Errorf("provider calls = %d, want %d to %d", n, c.calls[0], c.calls[1])
			}
			e.checkInvariants()
		})
	}
	t.Run("transient retried by Tollgate", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, envOptions{})
		key := e.owner("acme", accounts.RoleClient, 1_000_000)
		e.fake.Script(fake.Scripted{Status: 500, Body: `{"error":{"message":"boom","type":"server_error","param":null,"code":null}}`})
		client, ct := sdk(e, key)
		got, err := client.Chat.Completions.New(context.Background(), chatParams("hello"))
		if err != nil || got.Choices[0].Message.Content == "" {
			t.Fatalf("completion after a transient failure: %v", err)
		}
		if ct.n.Load() != 1 || e.fake.CallCount() != 2 {
			t.Errorf("SDK requests = %d, provider calls = %d; want 1 and 2", ct.n.Load(), e.fake.CallCount())
		}
	})
}

func repeat(s fake.Scripted, n int) []fake.Scripted {
	out := make([]fake.Scripted, n)
	for i := range out {
		out[i] = s
	}
	return out
}

func TestOpenAISDKStreaming(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	key := e.owner("acme", accounts.RoleClient, 1_000_000)
	client, _ := sdk(e, key)
	params := chatParams("stream me")
	params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	stream := client.Chat.Completions.NewStreaming(context.Background(), params)
	var acc openai.ChatCompletionAccumulator
	for stream.Next() {
		acc.AddChunk(stream.Current())
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if acc.Choices[0].Message.Content == "" || acc.Usage.TotalTokens == 0 {
		t.Fatalf("streamed completion = %+v", acc.ChatCompletion)
	}
	// The streamed answer is a task like any other, settled and replayable.
	id := e.scalar(`SELECT count(*) FROM tasks WHERE status = 'succeeded'`)
	if id != 1 || e.scalar(`SELECT count(*) FROM usage_records WHERE source = 'reported'`) != 1 {
		t.Error("the streamed task was not settled from reported usage")
	}
	e.checkInvariants()
}

// A stream makes one attempt: when it fails before its first chunk with
// Tollgate's attempts unspent, the answer lets the SDK retry, and the retry
// (a new task) streams the answer; one failed and one good provider call.
func TestOpenAISDKRetriesAStreamThatFailedBeforeItsFirstChunk(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{probeEvery: 1 << 62, maxAttempts: 3})
	key := e.owner("acme", accounts.RoleClient, 1_000_000)
	client, ct := sdk(e, key)
	e.fake.Script(fake.Scripted{Status: 500, Body: `{"error":{"message":"boom","type":"server_error","param":null,"code":null}}`})
	var retryHeaders []string
	stream := client.Chat.Completions.NewStreaming(context.Background(), chatParams("stream me"),
		option.WithMiddleware(func(r *http.Request, next option.MiddlewareNext) (*http.Response, error) {
			res, err := next(r)
			if res != nil {
				retryHeaders = append(retryHeaders, res.Header.Get("x-should-retry"))
			}
			return res, err
		}))
	var acc openai.ChatCompletionAccumulator
	for stream.Next() {
		acc.AddChunk(stream.Current())
	}
	if err := stream.Err(); err != nil {
		t.Fatalf("stream: %v (x-should-retry per answer %q)", err, retryHeaders)
	}
	if acc.Choices[0].Message.Content == "" {
		t.Fatalf("streamed completion = %+v", acc.ChatCompletion)
	}
	if got := ct.n.Load(); got != 2 || len(retryHeaders) != 2 || retryHeaders[0] != "true" {
		t.Errorf("SDK requests = %d, x-should-retry per answer %q; want 2, the first \"true\"", got, retryHeaders)
	}
	if calls := e.fake.CallCount(); calls != 2 {
		t.Errorf("provider calls = %d, want 2", calls)
	}
	e.checkInvariants()
}

// A client that leaves mid-stream does not stop the upstream call: the task
// completes and is settled, and the replay record says when it left.
func TestStreamClientDisconnectStillSettles(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	key := e.owner("acme", accounts.RoleClient, 1_000_000)
	e.fake.Script(fake.Scripted{ChunkDelayMS: 100})
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, e.url+"/v1/chat/completions",
		strings.NewReader(`{"model":"test-model","stream":true,"messages":[{"role":"user","content":"a long story please"}]}`))
	req.Header.Set("Authorization", "Bearer "+key)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	taskID := res.Header.Get("X-Tollgate-Task-Id")
	r := bufio.NewReader(res.Body)
	if _, err := r.ReadString('\n'); err != nil { // the first event arrived
		t.Fatal(err)
	}
	cancel()
	res.Body.Close()
	task := e.waitFinished(key, taskID)
	if task.Status != tasks.StatusSucceeded {
		t.Fatalf("task after the client left = %s %+v, want succeeded", task.Status, task.Error)
	}
	e.waitFor("the disconnect recorded", func() bool {
		return e.scalar(`SELECT count(*) FROM replay_records WHERE task_id = $1 AND stream->>'client_disconnected_at' IS NOT NULL`, taskID) == 1
	})
	e.checkInvariants()
}

// An upstream stream cut mid-way keeps its partial output in the replay
// record; the attempt is ambiguous and the settlement says so.
func TestCutUpstreamStreamKeepsThePartialOutput(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	key := e.owner("acme", accounts.RoleClient, 1_000_000)
	e.fake.Script(fake.Scripted{StreamCutAfter: 2})
	client, _ := sdk(e, key)
	stream := client.Chat.Completions.NewStreaming(context.Background(), chatParams("cut me"))
	var got strings.Builder
	for stream.Next() {
		for _, ch := range stream.Current().Choices {
			got.WriteString(ch.Delta.Content)
		}
	}
	if stream.Err() == nil {
		t.Error("the SDK saw no error for a cut stream")
	}
	if got.Len() == 0 {
		t.Error("the client got none of the partial output")
	}
	if n := e.scalar(`SELECT count(*) FROM replay_records WHERE state = 'ambiguous' AND response->>'content' <> ''`); n != 1 {
		t.Errorf("replay records with partial output = %d, want 1", n)
	}
	if n := e.scalar(`SELECT count(*) FROM usage_records WHERE source = 'possibly_charged'`); n != 1 {
		t.Errorf("possibly charged settlements = %d, want 1", n)
	}
	e.checkInvariants()
}

// Streaming relays the provider's own stream for Anthropic models too,
// and a cut Anthropic stream keeps its partial output.
func TestStreamingThroughTheAnthropicAdapter(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	key := e.owner("acme", accounts.RoleClient, 1_000_000)
	client, _ := sdk(e, key)
	params := chatParams("stream me from claude")
	params.Model = "backup-model"
	params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	stream := client.Chat.Completions.NewStreaming(context.Background(), params)
	var acc openai.ChatCompletionAccumulator
	chunks := 0
	for stream.Next() {
		acc.AddChunk(stream.Current())
		chunks++
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if acc.Choices[0].Message.Content == "" || acc.Usage.TotalTokens == 0 || chunks < 4 {
		t.Fatalf("streamed %d chunks: %+v", chunks, acc.ChatCompletion)
	}
	if calls := e.fake.Calls(); len(calls) != 1 || calls[0].Model != "claude-test" {
		t.Errorf("provider calls = %+v, want one to claude-test", calls)
	}

	e.fake.Script(fake.Scripted{StreamCutAfter: 1})
	params.Messages = []openai.ChatCompletionMessageParamUnion{openai.UserMessage("cut me")}
	stream = client.Chat.Completions.NewStreaming(context.Background(), params)
	for stream.Next() {
	}
	if stream.Err() == nil {
		t.Error("no error for a cut Anthropic stream")
	}
	if n := e.scalar(`SELECT count(*) FROM replay_records WHERE state = 'ambiguous' AND response->>'content' <> ''`); n != 1 {
		t.Errorf("partial output records = %d, want 1", n)
	}
	e.checkInvariants()
}
