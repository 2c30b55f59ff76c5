package server_test

import (
	"bufio"
	"context"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

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
