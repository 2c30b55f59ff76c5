package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	antoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/tollgate/tollgate/accounts"
	"github.com/tollgate/tollgate/provider/fake"
)

// sdkFailure is how an SDK saw a failed call: its status, its error's
// type and code (Anthropic's have no code), and the headers of the answer.
type sdkFailure struct {
	status     int
	typ, code  string
	header     http.Header
	callFailed bool // the call failed with the SDK's API error
}

// replayClient sends one call of a dialect through its official SDK, with
// no retries of the SDK's: a client that retries by itself sends the same
// call again, as the tests do. It returns how the call failed.
type replayClient func(t *testing.T, e *env, key, text string) sdkFailure

func openAIChatCall(t *testing.T, e *env, key, text string) sdkFailure {
	t.Helper()
	client, _, answers := sdkWithDefaultRetries(e, key)
	_, err := client.Chat.Completions.New(context.Background(), chatParams(text), option.WithMaxRetries(0))
	f := sdkFailure{header: lastAnswer(answers.all())}
	var apiErr *openai.Error
	if errors.As(err, &apiErr) {
		f.callFailed, f.status, f.typ, f.code = true, apiErr.StatusCode, apiErr.Type, apiErr.Code
	}
	return f
}

func openAIResponsesCall(t *testing.T, e *env, key, text string) sdkFailure {
	t.Helper()
	client, _, answers := sdkWithDefaultRetries(e, key)
	_, err := client.Responses.New(context.Background(), respParams(text), option.WithMaxRetries(0))
	f := sdkFailure{header: lastAnswer(answers.all())}
	var apiErr *openai.Error
	if errors.As(err, &apiErr) {
		f.callFailed, f.status, f.typ, f.code = true, apiErr.StatusCode, apiErr.Type, apiErr.Code
	}
	return f
}

func anthropicMessagesCall(t *testing.T, e *env, key, text string) sdkFailure {
	t.Helper()
	client, _, answers := antSDK(e, key, antoption.WithMaxRetries(0))
	_, err := client.Messages.New(context.Background(), anthropic.MessageNewParams{
		Model: "test-model", MaxTokens: 16, Messages: []anthropic.MessageParam{antUserText(text)}})
	f := sdkFailure{header: lastHeader(answers)}
	var apiErr *anthropic.Error
	if errors.As(err, &apiErr) {
		var body struct{ Error struct{ Type string } }
		if err := json.Unmarshal([]byte(apiErr.RawJSON()), &body); err != nil {
			t.Fatalf("error body %s: %v", apiErr.RawJSON(), err)
		}
		f.callFailed, f.status, f.typ = true, apiErr.StatusCode, body.Error.Type
	}
	return f
}

func lastAnswer(hs []http.Header) http.Header {
	if len(hs) == 0 {
		return http.Header{}
	}
	return hs[len(hs)-1]
}

// A client that retries by itself, with no Idempotency-Key and deaf to
// x-should-retry (the Vercel AI SDK, LangChain), repeats a call that
// failed after Tollgate's attempts: the repeat is answered with the same
// failure, the same error class in its SDK, and no provider call, task or
// charge; X-Tollgate-Replayed-Failure names the failed task. Another body
// or owner, or the same call once the window has passed, is called.
func TestFailureReplayedToAClientRetryingByItself(t *testing.T) {
	t.Parallel()
	const maxAttempts = 2
	unavailable := repeat(fake.Scripted{Status: 500, Body: `{"error":{"message":"boom","type":"server_error","param":null,"code":null}}`}, maxAttempts)
	rejected := []fake.Scripted{{Status: 400, Body: `{"error":{"message":"This model's maximum context length is 4097 tokens","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`}}
	cases := []struct {
		name   string
		call   replayClient
		script []fake.Scripted
		calls  int // provider calls of the failed call
		want   sdkFailure
	}{
		{"OpenAI, unavailable after Tollgate's attempts", openAIChatCall, unavailable, maxAttempts,
			sdkFailure{status: http.StatusServiceUnavailable, typ: "server_error", code: "model_temporarily_unavailable"}},
		{"OpenAI, rejected", openAIChatCall, rejected, 1,
			sdkFailure{status: http.StatusBadRequest, typ: "invalid_request_error", code: "context_length_exceeded"}},
		{"Responses, rejected", openAIResponsesCall, rejected, 1,
			sdkFailure{status: http.StatusBadRequest, typ: "invalid_request_error", code: "context_length_exceeded"}},
		{"Anthropic, unavailable after Tollgate's attempts", anthropicMessagesCall, unavailable, maxAttempts,
			sdkFailure{status: 529, typ: "overloaded_error"}},
		{"Anthropic, rejected", anthropicMessagesCall, rejected, 1,
			sdkFailure{status: http.StatusBadRequest, typ: "invalid_request_error"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, envOptions{probeEvery: 1 << 62, maxAttempts: maxAttempts})
			key := e.owner("acme", accounts.RoleClient, 1_000_000)
			other := e.owner("globex", accounts.RoleClient, 1_000_000)
			e.fake.Script(c.script...)
			first := c.call(t, e, key, "hello")
			if !first.callFailed || first.status != c.want.status || first.typ != c.want.typ || first.code != c.want.code {
				t.Fatalf("first call: %+v, want %+v", first, c.want)
			}
			if n := e.fake.CallCount(); n != c.calls {
				t.Fatalf("provider calls = %d, want %d", n, c.calls)
			}
			failed := first.header.Get("X-Tollgate-Task-Id")
			if first.header.Get("X-Tollgate-Replayed-Failure") != "" {
				t.Errorf("first call: X-Tollgate-Replayed-Failure = %q, want none", first.header.Get("X-Tollgate-Replayed-Failure"))
			}
			spent := e.balance("acme").SpentMicros
			tasksBefore := e.scalar(`SELECT count(*) FROM tasks`)

			again := c.call(t, e, key, "hello")
			if again.status != first.status || again.typ != first.typ || again.code != first.code || !again.callFailed {
				t.Errorf("repeat: %+v, want the first call's failure %+v", again, first)
			}
			if got := again.header.Get("X-Tollgate-Replayed-Failure"); got != failed || failed == "" {
				t.Errorf("repeat: X-Tollgate-Replayed-Failure = %q, want the failed task %q", got, failed)
			}
			if got := again.header.Get("x-should-retry"); got != "false" {
				t.Errorf("repeat: x-should-retry = %q, want false", got)
			}
			if n := e.fake.CallCount(); n != c.calls {
				t.Errorf("provider calls after the repeat = %d, want still %d", n, c.calls)
			}
			if n := e.scalar(`SELECT count(*) FROM tasks`); n != tasksBefore {
				t.Errorf("tasks after the repeat = %d, want still %d", n, tasksBefore)
			}
			if got := e.balance("acme"); got.SpentMicros != spent || got.ReservedMicros != 0 {
				t.Errorf("after the repeat: spent %d reserved %d, want %d and 0", got.SpentMicros, got.ReservedMicros, spent)
			}

			for _, other := range []struct {
				name, key, text string
			}{{"another body", key, "hello again"}, {"another owner", other, "hello"}} {
				calls := e.fake.CallCount()
				if f := c.call(t, e, other.key, other.text); f.callFailed || f.header.Get("X-Tollgate-Replayed-Failure") != "" {
					t.Errorf("%s: %+v, want an answer", other.name, f)
				}
				if n := e.fake.CallCount(); n != calls+1 {
					t.Errorf("%s: provider calls = %d, want %d", other.name, n, calls+1)
				}
			}

			e.clock.Set(time.Now().Add(61 * time.Second))
			calls := e.fake.CallCount()
			if f := c.call(t, e, key, "hello"); f.callFailed || f.header.Get("X-Tollgate-Replayed-Failure") != "" {
				t.Errorf("once the window has passed: %+v, want an answer", f)
			}
			if n := e.fake.CallCount(); n != calls+1 {
				t.Errorf("once the window has passed: provider calls = %d, want %d", n, calls+1)
			}
			e.clock.Set(time.Time{})
			e.checkInvariants()
		})
	}
}

// With TOLLGATE_FAILURE_REPLAY_WINDOW_S at 0, every repeat is called.
func TestFailureReplayWindowOff(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{probeEvery: 1 << 62, failureReplayWindow: -1})
	key := e.owner("acme", accounts.RoleClient, 1_000_000)
	rejected := fake.Scripted{Status: 400, Body: `{"error":{"message":"Unsupported parameter","type":"invalid_request_error","param":"max_tokens","code":"unsupported_parameter"}}`}
	e.fake.Script(rejected, rejected)
	for i := range 2 {
		f := openAIChatCall(t, e, key, "hello")
		if f.status != http.StatusBadRequest || f.code != "unsupported_parameter" || f.header.Get("X-Tollgate-Replayed-Failure") != "" {
			t.Errorf("call %d: %+v, want the provider's rejection, not replayed", i, f)
		}
	}
	if n := e.fake.CallCount(); n != 2 {
		t.Errorf("provider calls = %d, want 2", n)
	}
	e.checkInvariants()
}

// A request with an Idempotency-Key is answered by its key's task, a
// failed one as before (Idempotent-Replayed, no call), and never by the
// window: another key with the same body is a new task.
func TestFailureReplayLeavesKeyedRequestsToTheirKeys(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{probeEvery: 1 << 62})
	key := e.owner("acme", accounts.RoleClient, 1_000_000)
	e.fake.Script(fake.Scripted{Status: 400, Body: `{"error":{"message":"Unsupported parameter","type":"invalid_request_error","param":"max_tokens","code":"unsupported_parameter"}}`})
	client, _, answers := sdkWithDefaultRetries(e, key)
	call := func(idem string) (*openai.Error, http.Header) {
		_, err := client.Chat.Completions.New(context.Background(), chatParams("hello"), option.WithMaxRetries(0), option.WithHeader("Idempotency-Key", idem))
		var apiErr *openai.Error
		errors.As(err, &apiErr)
		return apiErr, lastAnswer(answers.all())
	}
	first, h1 := call("k1")
	if first == nil || first.StatusCode != http.StatusBadRequest {
		t.Fatalf("first call: %v, want a 400", first)
	}
	again, h2 := call("k1")
	if again == nil || again.StatusCode != http.StatusBadRequest || again.Code != first.Code || h2.Get("Idempotent-Replayed") != "true" ||
		h2.Get("X-Tollgate-Task-Id") != h1.Get("X-Tollgate-Task-Id") || h2.Get("X-Tollgate-Replayed-Failure") != "" {
		t.Errorf("same key: %v %v, want the key's failed task, Idempotent-Replayed: true", again, h2)
	}
	if n := e.fake.CallCount(); n != 1 {
		t.Errorf("provider calls = %d, want 1", n)
	}
	if other, h := call("k2"); other != nil || h.Get("X-Tollgate-Replayed-Failure") != "" {
		t.Errorf("another key: %v %v, want an answer", other, h)
	}
	if n := e.fake.CallCount(); n != 2 {
		t.Errorf("provider calls = %d, want 2", n)
	}
	e.checkInvariants()
}

// A stream repeated without a key after a failure gets the failure before
// any event, as the first stream did, and calls no provider.
func TestFailureReplayedToAStream(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{probeEvery: 1 << 62})
	key := e.owner("acme", accounts.RoleClient, 1_000_000)
	e.fake.Script(fake.Scripted{Status: 400, Body: `{"error":{"message":"This model's maximum context length is 4097 tokens","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`})
	client, _, answers := sdkWithDefaultRetries(e, key)
	stream := func() (*openai.Error, http.Header) {
		s := client.Chat.Completions.NewStreaming(context.Background(), chatParams("stream me"), option.WithMaxRetries(0))
		for s.Next() {
			t.Error("a chunk of a failed stream")
		}
		var apiErr *openai.Error
		errors.As(s.Err(), &apiErr)
		return apiErr, lastAnswer(answers.all())
	}
	first, h1 := stream()
	if first == nil || first.StatusCode != http.StatusBadRequest || first.Code != "context_length_exceeded" {
		t.Fatalf("first stream: %v, want a 400 context_length_exceeded", first)
	}
	again, h2 := stream()
	if again == nil || again.StatusCode != first.StatusCode || again.Code != first.Code || again.Type != first.Type ||
		h2.Get("X-Tollgate-Replayed-Failure") != h1.Get("X-Tollgate-Task-Id") {
		t.Errorf("repeated stream: %v %v, want the first stream's failure, replayed", again, h2)
	}
	if n := e.fake.CallCount(); n != 1 {
		t.Errorf("provider calls = %d, want 1", n)
	}
	if n := e.counter("tollgate_tasks_created_total", map[string]string{"outcome": "failure_replayed"}); n != 1 {
		t.Errorf("tollgate_tasks_created_total{outcome=failure_replayed} = %v, want 1", n)
	}
	e.checkInvariants()
}
