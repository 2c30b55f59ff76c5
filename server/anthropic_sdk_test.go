package server_test

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/tollgate/tollgate/accounts"
	"github.com/tollgate/tollgate/budget"
	"github.com/tollgate/tollgate/provider/fake"
	"github.com/tollgate/tollgate/tasks"
)

// The Anthropic surface, tried with Anthropic's own Go SDK on an
// Anthropic provider and on an OpenAI-compatible one.

// messagesCatalog: one Anthropic and one OpenAI-compatible provider on
// the fake, a model on each, both priced at 1 micro per input and 2 per
// output token; the Claude model prices cache reads at 0.1 and writes at
// 1.25.
const messagesCatalog = `
providers:
  - {key: claude, kind: anthropic, base_url: fake, api_key_env: TEST_ANTHROPIC_KEY}
  - {key: oai, kind: openai, base_url: fake, api_key_env: TEST_OPENAI_KEY}
default_model: claude-model
models:
  - {name: claude-model, provider: claude, provider_model: claude-test, input_micros_per_mtok: 1000000, output_micros_per_mtok: 2000000,
     cached_input_micros_per_mtok: 100000, cache_write_micros_per_mtok: 1250000, tools: true, vision: true, reasoning: true}
  - {name: gpt-model, provider: oai, provider_model: gpt-test, input_micros_per_mtok: 1000000, output_micros_per_mtok: 2000000,
     tools: true, vision: true, reasoning: true}
`

// messagesModels are the two models, by the provider kind behind them.
var messagesModels = []struct{ kind, model string }{{"anthropic", "claude-model"}, {"openai", "gpt-model"}}

// antAnswers records the headers of every answer the SDK received and
// shortens the waits they ask for, so that the SDK's retries run at once.
type antAnswers struct {
	mu      sync.Mutex
	headers []http.Header
}

func (s *antAnswers) middleware(r *http.Request, next option.MiddlewareNext) (*http.Response, error) {
	res, err := next(r)
	if res != nil {
		s.mu.Lock()
		s.headers = append(s.headers, res.Header.Clone())
		s.mu.Unlock()
		if res.Header.Get("retry-after-ms") != "" {
			res.Header.Set("retry-after-ms", "1")
			res.Header.Del("Retry-After")
		}
	}
	return res, err
}

func (s *antAnswers) all() []http.Header {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]http.Header(nil), s.headers...)
}

// antSDK is the official SDK pointed at Tollgate with a Tollgate key, its
// environment ignored; extra options follow (its retries are the SDK's
// defaults unless one sets them).
// sdkAnthropicVersion is the anthropic-version the SDK in go.mod sends;
// Tollgate passes it on to Anthropic providers as it came.
const sdkAnthropicVersion = "2026-10-21"

func antSDK(e *env, key string, opts ...option.RequestOption) (anthropic.Client, *countingTransport, *antAnswers) {
	ct := &countingTransport{next: e.client.Transport}
	answers := &antAnswers{}
	base := []option.RequestOption{option.WithoutEnvironmentDefaults(), option.WithBaseURL(e.url + "/"), option.WithAPIKey(key),
		option.WithHTTPClient(&http.Client{Transport: ct}), option.WithMiddleware(answers.middleware)}
	return anthropic.NewClient(append(base, opts...)...), ct, answers
}

func newMessagesEnv(t *testing.T, o envOptions) (*env, string) {
	t.Helper()
	o.catalog = messagesCatalog
	e := newEnv(t, o)
	return e, e.owner("acme", accounts.RoleClient, 1_000_000)
}

func antUserText(s string) anthropic.MessageParam {
	return anthropic.NewUserMessage(anthropic.NewTextBlock(s))
}

// taskOf reads the task the answer names, as its owner sees it.
func taskOf(t *testing.T, e *env, key string, h http.Header) tasks.Task {
	t.Helper()
	id := h.Get("X-Tollgate-Task-Id")
	if id == "" {
		t.Fatal("no X-Tollgate-Task-Id header")
	}
	return e.waitFinished(key, id)
}

// lastHeader is the header of the SDK's last answer.
func lastHeader(a *antAnswers) http.Header {
	all := a.all()
	if len(all) == 0 {
		return http.Header{}
	}
	return all[len(all)-1]
}

var antWeatherTool = anthropic.ToolUnionParam{OfTool: &anthropic.ToolParam{
	Name: "get_weather", Description: anthropic.String("The weather in a city"),
	InputSchema: anthropic.ToolInputSchemaParam{Properties: map[string]any{"city": map[string]any{"type": "string"}}, Required: []string{"city"}},
}}

func TestAnthropicSDKPlainTextAndIdempotency(t *testing.T) {
	t.Parallel()
	for _, m := range messagesModels {
		t.Run(m.kind, func(t *testing.T) {
			t.Parallel()
			e, key := newMessagesEnv(t, envOptions{})
			client, ct, answers := antSDK(e, key, option.WithMaxRetries(0))
			ctx := context.Background()
			params := anthropic.MessageNewParams{Model: anthropic.Model(m.model), MaxTokens: 64,
				System:   []anthropic.TextBlockParam{{Text: "You are terse."}},
				Messages: []anthropic.MessageParam{antUserText("Say hi")}, Metadata: anthropic.MetadataParam{UserID: anthropic.String("user-7")}}
			// This SDK no longer models the sampling parameters; a client
			// that still sends them sets them on the body.
			msg, err := client.Messages.New(ctx, params, option.WithJSONSet("temperature", 0.5), option.WithJSONSet("top_k", 5))
			if err != nil {
				t.Fatal(err)
			}
			// top_k is carried on both: Anthropic's own field, and a
			// passthrough field for OpenAI-compatible servers that know it.
			if body := string(e.fake.Calls()[0].Body); !strings.Contains(body, `"top_k":5`) {
				t.Errorf("provider call %s, want top_k carried", body)
			}
			h := lastHeader(answers)
			task := taskOf(t, e, key, h)
			// An Anthropic provider's message comes back as it sent it
			// (native carry): its id and its name for the model.
			wantID, wantModel := "msg_"+strings.ReplaceAll(task.ID, "-", ""), anthropic.Model(m.model)
			if m.kind == "anthropic" {
				wantID, wantModel = "msg_fake_", "claude-test"
			}
			if !strings.HasPrefix(msg.ID, wantID) || msg.Model != wantModel || msg.Role != "assistant" {
				t.Errorf("message = id %s model %s role %s, want %s of %s", msg.ID, msg.Model, msg.Role, wantID, wantModel)
			}
			if len(msg.Content) != 1 || !strings.HasPrefix(msg.Content[0].Text, "fake completion ") || msg.StopReason != anthropic.StopReasonEndTurn {
				t.Errorf("content %+v stop %q, want the fake's text and end_turn", msg.Content, msg.StopReason)
			}
			if msg.Usage.InputTokens != task.Result.Usage.InputTokens || msg.Usage.OutputTokens != task.Result.Usage.OutputTokens || msg.Usage.InputTokens == 0 {
				t.Errorf("usage %+v, want the task's %+v", msg.Usage, task.Result.Usage)
			}
			if !strings.HasPrefix(h.Get("request-id"), "req_") {
				t.Errorf("request-id = %q", h.Get("request-id"))
			}
			// What reached the provider: the system prompt, the user id,
			// the temperature, in the provider's own format.
			var sent map[string]any
			if err := json.Unmarshal(e.fake.Calls()[0].Body, &sent); err != nil {
				t.Fatal(err)
			}
			switch m.kind {
			case "anthropic":
				if meta, _ := sent["metadata"].(map[string]any); meta["user_id"] != "user-7" || sent["temperature"] != 0.5 || sent["system"] == nil {
					t.Errorf("sent %v, want system, metadata.user_id and temperature", sent)
				}
			case "openai":
				if sent["user"] != "user-7" || sent["temperature"] != 0.5 {
					t.Errorf("sent %v, want user and temperature", sent)
				}
			}

			// The same key and body: the same message, no second call; the
			// same key with another body: 422.
			first, err := client.Messages.New(ctx, params, option.WithHeader("Idempotency-Key", "k1"))
			if err != nil {
				t.Fatal(err)
			}
			again, err := client.Messages.New(ctx, params, option.WithHeader("Idempotency-Key", "k1"))
			if err != nil {
				t.Fatal(err)
			}
			if first.ID != again.ID || first.Content[0].Text != again.Content[0].Text || lastHeader(answers).Get("Idempotent-Replayed") != "true" {
				t.Errorf("replay differs: %s %q vs %s %q", first.ID, first.Content[0].Text, again.ID, again.Content[0].Text)
			}
			other := params
			other.Messages = []anthropic.MessageParam{antUserText("Say bye")}
			_, err = client.Messages.New(ctx, other, option.WithHeader("Idempotency-Key", "k1"))
			var apiErr *anthropic.Error
			if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(apiErr.RawJSON(), `"invalid_request_error"`) {
				t.Errorf("same key, other body: %v, want a 422 invalid_request_error", err)
			}
			if n := e.fake.CallCount(); n != 2 {
				t.Errorf("provider calls = %d, want 2", n)
			}
			if n := ct.n.Load(); n != 4 {
				t.Errorf("SDK requests = %d, want 4 (no retries)", n)
			}

			// count_tokens: Tollgate's own estimate of the prompt, as the
			// reservation counts it.
			count, err := client.Messages.CountTokens(ctx, anthropic.MessageCountTokensParams{Model: anthropic.Model(m.model),
				System:   anthropic.MessageCountTokensParamsSystemUnion{OfTextBlockArray: []anthropic.TextBlockParam{{Text: "You are terse."}}},
				Messages: []anthropic.MessageParam{antUserText("Say hi")}})
			if err != nil {
				t.Fatal(err)
			}
			// "You are terse." is 14 bytes, 4 tokens; "Say hi" 6 bytes, 2;
			// each message 4 of framing.
			if count.InputTokens != 14 {
				t.Errorf("count_tokens = %d, want 14", count.InputTokens)
			}
			// The reservation of the same prompt started from that
			// count: at 1 micro an input token and 2 an output one, the
			// count plus twice max_tokens.
			if got, want := e.scalar(`SELECT amount_micros FROM budget_reservations WHERE task_id = $1`, task.ID), count.InputTokens+2*64; got != want {
				t.Errorf("reservation = %d micros, want %d (count_tokens' %d input tokens and 64 output)", got, want, count.InputTokens)
			}
			e.checkInvariants()
		})
	}
}

func TestAnthropicSDKToolRoundTrip(t *testing.T) {
	t.Parallel()
	for _, m := range messagesModels {
		t.Run(m.kind, func(t *testing.T) {
			t.Parallel()
			e, key := newMessagesEnv(t, envOptions{})
			client, _, _ := antSDK(e, key, option.WithMaxRetries(0))
			ctx := context.Background()
			params := anthropic.MessageNewParams{Model: anthropic.Model(m.model), MaxTokens: 256,
				Messages: []anthropic.MessageParam{antUserText("Weather in Paris?")}, Tools: []anthropic.ToolUnionParam{antWeatherTool},
				ToolChoice: anthropic.ToolChoiceUnionParam{OfAuto: &anthropic.ToolChoiceAutoParam{DisableParallelToolUse: anthropic.Bool(true)}}}
			msg, err := client.Messages.New(ctx, params)
			if err != nil {
				t.Fatal(err)
			}
			if msg.StopReason != anthropic.StopReasonToolUse || len(msg.Content) != 1 || msg.Content[0].Type != "tool_use" || msg.Content[0].Name != "get_weather" {
				t.Fatalf("answer %+v stop %q, want one tool_use of get_weather", msg.Content, msg.StopReason)
			}
			use := msg.Content[0]
			var input map[string]any
			if err := json.Unmarshal(use.Input, &input); err != nil || input["city"] == nil {
				t.Errorf("tool input %s, want an object with city", use.Input)
			}
			params.Messages = append(params.Messages, msg.ToParam(), anthropic.NewUserMessage(
				anthropic.NewToolResultBlock(use.ID, "18°C and sunny", false)))
			final, err := client.Messages.New(ctx, params)
			if err != nil {
				t.Fatal(err)
			}
			if final.StopReason != anthropic.StopReasonEndTurn || len(final.Content) != 1 || final.Content[0].Text == "" {
				t.Errorf("final answer %+v stop %q, want text", final.Content, final.StopReason)
			}
			// The provider got the call and its result, paired by id, in
			// its own format.
			body := string(e.fake.Calls()[1].Body)
			switch m.kind {
			case "anthropic":
				// As the SDK wrote it (native carry).
				for _, want := range []string{`{"id":"` + use.ID + `","input":{"city":`, `"type":"tool_use"`, `"tool_use_id":"` + use.ID + `"`, `"disable_parallel_tool_use":true`} {
					if !strings.Contains(body, want) {
						t.Errorf("second call %s lacks %s", body, want)
					}
				}
			case "openai":
				for _, want := range []string{`"tool_calls":[{"id":"` + use.ID + `"`, `"role":"tool"`, `"tool_call_id":"` + use.ID + `"`, `"parallel_tool_calls":false`} {
					if !strings.Contains(body, want) {
						t.Errorf("second call %s lacks %s", body, want)
					}
				}
			}
		})
	}
}

func TestAnthropicSDKStreaming(t *testing.T) {
	t.Parallel()
	for _, m := range messagesModels {
		t.Run(m.kind, func(t *testing.T) {
			t.Parallel()
			e, key := newMessagesEnv(t, envOptions{})
			client, _, answers := antSDK(e, key, option.WithMaxRetries(0))
			ctx := context.Background()
			accumulate := func(params anthropic.MessageNewParams, opts ...option.RequestOption) anthropic.Message {
				t.Helper()
				stream := client.Messages.NewStreaming(ctx, params, opts...)
				var acc anthropic.Message
				events := map[string]int{}
				for stream.Next() {
					ev := stream.Current()
					events[ev.Type]++
					if err := acc.Accumulate(ev); err != nil {
						t.Fatalf("accumulate %s: %v", ev.Type, err)
					}
				}
				if err := stream.Err(); err != nil {
					t.Fatal(err)
				}
				if events["message_start"] != 1 || events["message_stop"] != 1 || events["content_block_start"] != events["content_block_stop"] {
					t.Errorf("events %v, want one message_start and message_stop, each block started and stopped", events)
				}
				return acc
			}
			text := anthropic.MessageNewParams{Model: anthropic.Model(m.model), MaxTokens: 64, Messages: []anthropic.MessageParam{antUserText("Stream me")}}
			acc := accumulate(text, option.WithHeader("Idempotency-Key", "s1"))
			whole, err := client.Messages.New(ctx, text)
			if err != nil {
				t.Fatal(err)
			}
			if len(acc.Content) != 1 || acc.Content[0].Text != whole.Content[0].Text || acc.StopReason != anthropic.StopReasonEndTurn {
				t.Errorf("streamed %+v stop %q, want %q end_turn", acc.Content, acc.StopReason, whole.Content[0].Text)
			}
			task := taskOf(t, e, key, answers.all()[0])
			wantID := "msg_" + strings.ReplaceAll(task.ID, "-", "")
			if m.kind == "anthropic" {
				wantID = "msg_fake_" // the provider's events, relayed (native carry)
			}
			if !strings.HasPrefix(acc.ID, wantID) || acc.Usage.OutputTokens != task.Result.Usage.OutputTokens || acc.Usage.InputTokens != task.Result.Usage.InputTokens {
				t.Errorf("streamed id %s usage %+v, want the task's %s %+v", acc.ID, acc.Usage, task.ID, task.Result.Usage)
			}
			// A repeat with the same key is rebuilt from the stored answer.
			calls := e.fake.CallCount()
			again := accumulate(text, option.WithHeader("Idempotency-Key", "s1"))
			if again.ID != acc.ID || again.Content[0].Text != acc.Content[0].Text || e.fake.CallCount() != calls {
				t.Errorf("replayed stream %s %q after %d calls, want %s %q and no call", again.ID, again.Content[0].Text, e.fake.CallCount()-calls, acc.ID, acc.Content[0].Text)
			}

			tools := anthropic.MessageNewParams{Model: anthropic.Model(m.model), MaxTokens: 256,
				Messages: []anthropic.MessageParam{antUserText("Weather in Paris?")}, Tools: []anthropic.ToolUnionParam{antWeatherTool}}
			e.fake.Script(fake.Scripted{ToolCalls: 2})
			calls2 := accumulate(tools)
			if calls2.StopReason != anthropic.StopReasonToolUse || len(calls2.Content) != 2 {
				t.Fatalf("streamed tool use %+v stop %q, want two tool_use blocks", calls2.Content, calls2.StopReason)
			}
			for i, b := range calls2.Content {
				var input map[string]any
				if b.Type != "tool_use" || b.Name != "get_weather" || json.Unmarshal(b.Input, &input) != nil || input["city"] == nil {
					t.Errorf("block %d = %s %s %s, want a get_weather call with a city", i, b.Type, b.Name, b.Input)
				}
			}
			e.checkInvariants()
		})
	}
}

// Thinking blocks come back with their signatures and go out again
// unchanged in a tool loop: the fake refuses an altered signature, and
// the test compares the block it received byte for byte. On an
// OpenAI-compatible provider a thinking block is refused by name, and
// nothing is called.
func TestAnthropicSDKThinkingPassedBackUnchanged(t *testing.T) {
	t.Parallel()
	e, key := newMessagesEnv(t, envOptions{})
	client, _, _ := antSDK(e, key, option.WithMaxRetries(0))
	ctx := context.Background()
	params := anthropic.MessageNewParams{Model: "claude-model", MaxTokens: 4096, Thinking: anthropic.ThinkingConfigParamOfEnabled(1024),
		Messages: []anthropic.MessageParam{antUserText("Weather in Paris?")}, Tools: []anthropic.ToolUnionParam{antWeatherTool}}
	const signature = "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds+/=="
	e.fake.Script(fake.Scripted{Thinking: "The user wants Paris.", Signature: signature, RedactedThinking: "EmwKAhgBEgy3va3pzix/LafPsn4a", Tool: "get_weather"})
	stream := client.Messages.NewStreaming(ctx, params, option.WithHeader("anthropic-beta", "interleaved-thinking-2025-05-14"))
	var msg anthropic.Message
	for stream.Next() {
		if err := msg.Accumulate(stream.Current()); err != nil {
			t.Fatal(err)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if len(msg.Content) != 3 || msg.Content[0].Type != "thinking" || msg.Content[0].Signature != signature ||
		msg.Content[0].Thinking != "The user wants Paris." || msg.Content[1].Type != "redacted_thinking" || msg.Content[2].Type != "tool_use" {
		t.Fatalf("answer %+v, want thinking (signed), redacted_thinking, tool_use", msg.Content)
	}
	params.Messages = append(params.Messages, msg.ToParam(),
		anthropic.NewUserMessage(anthropic.NewToolResultBlock(msg.Content[2].ID, "18°C", false)))
	final, err := client.Messages.New(ctx, params, option.WithHeader("anthropic-beta", "interleaved-thinking-2025-05-14"))
	if err != nil {
		t.Fatal(err)
	}
	if final.Content[0].Type != "thinking" || final.StopReason != anthropic.StopReasonEndTurn {
		t.Errorf("final answer %+v, want thinking then text", final.Content)
	}
	calls := e.fake.Calls()
	var sent struct {
		Messages []struct {
			Content []json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(calls[1].Body, &sent); err != nil {
		t.Fatal(err)
	}
	// The blocks as the SDK wrote them, its key order included (native
	// carry).
	want := []string{
		`{"signature":"` + signature + `","thinking":"The user wants Paris.","type":"thinking"}`,
		`{"data":"EmwKAhgBEgy3va3pzix/LafPsn4a","type":"redacted_thinking"}`,
	}
	for i, w := range want {
		if got := string(sent.Messages[1].Content[i]); got != w {
			t.Errorf("block %d at the provider = %s, want %s", i, got, w)
		}
	}
	for i, c := range calls {
		if c.Headers["anthropic-beta"] != "interleaved-thinking-2025-05-14" || c.Headers["anthropic-version"] != sdkAnthropicVersion {
			t.Errorf("call %d headers %v, want the client's anthropic-beta and version", i, c.Headers)
		}
	}

	// The same conversation on an OpenAI-compatible provider: refused by
	// name, no call.
	params.Model, params.Thinking = "gpt-model", anthropic.ThinkingConfigParamUnion{}
	_, err = client.Messages.New(ctx, params)
	var apiErr *anthropic.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusBadRequest || !strings.Contains(apiErr.RawJSON(), "messages[1].content[0]") {
		t.Errorf("thinking on an OpenAI-compatible provider: %v, want a 400 naming messages[1].content[0]", err)
	}
	if n := e.fake.CallCount(); n != 2 {
		t.Errorf("provider calls = %d, want 2", n)
	}
}

// cache_control reaches an Anthropic provider where the client put it,
// the cache figures come back as Anthropic counts them, and the task is
// charged each class at its price. An OpenAI-compatible provider has no
// cache_control: refused by name.
func TestAnthropicSDKPromptCache(t *testing.T) {
	t.Parallel()
	e, key := newMessagesEnv(t, envOptions{})
	client, _, answers := antSDK(e, key, option.WithMaxRetries(0))
	ctx := context.Background()
	cached := anthropic.NewCacheControlEphemeralParam()
	tool := antWeatherTool
	toolParam := *tool.OfTool
	toolParam.CacheControl = cached
	tool.OfTool = &toolParam
	params := anthropic.MessageNewParams{Model: "claude-model", MaxTokens: 64,
		System:   []anthropic.TextBlockParam{{Text: strings.Repeat("A long, stable system prompt. ", 40), CacheControl: cached}},
		Messages: []anthropic.MessageParam{antUserText("Hi")}, Tools: []anthropic.ToolUnionParam{tool},
		ToolChoice: anthropic.ToolChoiceUnionParam{OfNone: &anthropic.ToolChoiceNoneParam{}}}
	e.fake.Script(fake.Scripted{Text: true, CachedTokens: 30000, CacheWriteTokens: 8000})
	msg, err := client.Messages.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	if msg.Usage.CacheReadInputTokens != 30000 || msg.Usage.CacheCreationInputTokens != 8000 {
		t.Errorf("usage %+v, want the provider's cache figures", msg.Usage)
	}
	task := taskOf(t, e, key, lastHeader(answers))
	u := task.Result.Usage
	if u.CachedInputTokens != 30000 || u.CacheWriteTokens != 8000 || u.InputTokens != msg.Usage.InputTokens+38000 {
		t.Errorf("task usage %+v, want the whole prompt (%d + 38000) with its cache classes", u, msg.Usage.InputTokens)
	}
	cachedPrice, writePrice := int64(100_000), int64(1_250_000)
	price := budget.Price{InputPerMTok: 1_000_000, OutputPerMTok: 2_000_000, CachedInputPerMTok: &cachedPrice, CacheWritePerMTok: &writePrice}
	want := price.CostOf(budget.Tokens{Input: u.InputTokens, Output: u.OutputTokens, CachedInput: u.CachedInputTokens, CacheWrite: u.CacheWriteTokens})
	if task.Result.CostMicros != want || want >= price.Cost(u.InputTokens, u.OutputTokens) {
		t.Errorf("cost = %d, want %d (cache classes at their prices, below %d)", task.Result.CostMicros, want, price.Cost(u.InputTokens, u.OutputTokens))
	}
	body := string(e.fake.Calls()[0].Body)
	// As the SDK wrote it (native carry).
	for _, w := range []string{`"system":[{"text":"A long`, `"cache_control":{"type":"ephemeral"},"type":"text"}]`, `"input_schema":{`} {
		if !strings.Contains(body, w) {
			t.Errorf("call %s lacks %s", body, w)
		}
	}
	if n := strings.Count(body, `"cache_control":{"type":"ephemeral"}`); n != 2 {
		t.Errorf("call carries %d cache_control, want 2 (system and tool): %s", n, body)
	}

	params.Model = "gpt-model"
	_, err = client.Messages.New(ctx, params)
	var apiErr *anthropic.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusBadRequest || !strings.Contains(apiErr.RawJSON(), "system[0].cache_control") {
		t.Errorf("cache_control on an OpenAI-compatible provider: %v, want a 400 naming system[0].cache_control", err)
	}
	if n := e.fake.CallCount(); n != 1 {
		t.Errorf("provider calls = %d, want 1", n)
	}
}

// Failures reach the SDK as Anthropic would answer them: its error with
// Anthropic's status and type, and retry headers it obeys, its default
// retries never multiplying Tollgate's attempts upstream.
func TestAnthropicSDKErrors(t *testing.T) {
	t.Parallel()
	const maxAttempts = 3
	anthropic429 := fake.Scripted{Status: 429, Headers: map[string]string{"retry-after": "30"},
		Body: `{"type":"error","error":{"type":"rate_limit_error","message":"Number of request tokens has exceeded your per-minute rate limit (org secret)"}}`}
	openai429 := fake.Scripted{Status: 429, Headers: map[string]string{"Retry-After": "30"},
		Body: `{"error":{"message":"Rate limit reached for gpt-test in organization org-secret","type":"requests","param":null,"code":"rate_limit_exceeded"}}`}
	cases := []struct {
		name    string
		model   string
		budget  int64
		script  []fake.Scripted
		opts    []option.RequestOption
		status  int
		typ     string
		text    string   // in the message
		retry   []string // x-should-retry of each answer
		minWait int
		calls   int
	}{
		{name: "rate limited upstream, Anthropic, no SDK retries", model: "claude-model", script: []fake.Scripted{anthropic429},
			opts:   []option.RequestOption{option.WithMaxRetries(0)},
			status: 429, typ: "rate_limit_error", retry: []string{"true"}, minWait: 25, calls: 1},
		{name: "rate limited upstream, OpenAI-compatible", model: "gpt-model", script: []fake.Scripted{openai429},
			opts:   []option.RequestOption{option.WithMaxRetries(0)},
			status: 429, typ: "rate_limit_error", retry: []string{"true"}, minWait: 25, calls: 1},
		{name: "budget exhausted, with its figures", model: "claude-model", budget: 10,
			status: 402, typ: "billing_error", text: "Budget exhausted: The remaining budget cannot cover this request's reservation: it needs up to", retry: []string{"false"}},
		{name: "overloaded after Tollgate's attempts", model: "claude-model",
			script: repeat(fake.Scripted{Status: 529, Body: `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`}, maxAttempts),
			status: 529, typ: "overloaded_error", retry: []string{"false"}, calls: maxAttempts},
		{name: "rejected upstream", model: "claude-model",
			script: []fake.Scripted{{Status: 400, Body: `{"type":"error","error":{"type":"invalid_request_error","message":"max_tokens: secret is not valid"}}`}},
			status: 400, typ: "invalid_request_error", text: "The model provider rejected this request", retry: []string{"false"}, calls: 1},
		// A context-length refusal keeps the wording clients detect
		// (LangChain's ContextOverflowError: a 400 saying "prompt is too
		// long"), with the figures the provider gave, in Tollgate's words.
		{name: "context length upstream", model: "claude-model",
			script: []fake.Scripted{{Status: 400, Body: `{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 210000 tokens > 200000 maximum (secret)"}}`}},
			status: 400, typ: "invalid_request_error", text: "prompt is too long: 210000 tokens > 200000 maximum", retry: []string{"false"}, calls: 1},
		{name: "context length upstream, no figures", model: "claude-model",
			script: []fake.Scripted{{Status: 400, Body: `{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: secret"}}`}},
			status: 400, typ: "invalid_request_error", text: "prompt is too long for the model's context window", retry: []string{"false"}, calls: 1},
		{name: "context length upstream, OpenAI-compatible", model: "gpt-model",
			script: []fake.Scripted{{Status: 400, Body: `{"error":{"message":"This model's maximum context length is 128000 tokens. However, your messages resulted in 130001 tokens. org-secret","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`}},
			status: 400, typ: "invalid_request_error", text: "prompt is too long: 130001 tokens > 128000 maximum", retry: []string{"false"}, calls: 1},
		{name: "provider account out of credit", model: "claude-model",
			script: []fake.Scripted{{Status: 400, Body: `{"type":"error","error":{"type":"invalid_request_error","message":"Your credit balance is too low to access the Anthropic API."}}`}},
			status: 402, typ: "billing_error", retry: []string{"false"}, calls: 1},
		{name: "provider redirected", model: "claude-model",
			script: []fake.Scripted{{Status: 301, Headers: map[string]string{"Location": "https://elsewhere.example/v1/messages"}}},
			status: 500, typ: "api_error", text: "redirected the call, and it was refused", retry: []string{"false"}, calls: 1},
		{name: "unknown model names the field", model: "no-such-model",
			status: 400, typ: "invalid_request_error", text: "model: is not a model this service offers", retry: []string{"false"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			o := envOptions{probeEvery: 1 << 62, maxAttempts: maxAttempts, catalog: messagesCatalog}
			e := newEnv(t, o)
			key := e.owner("acme", accounts.RoleClient, cmp.Or(c.budget, 1_000_000))
			client, ct, answers := antSDK(e, key, c.opts...)
			e.fake.Script(c.script...)
			_, err := client.Messages.New(context.Background(), anthropic.MessageNewParams{Model: anthropic.Model(c.model), MaxTokens: 64,
				Messages: []anthropic.MessageParam{antUserText("hello")}})
			var apiErr *anthropic.Error
			if !errors.As(err, &apiErr) {
				t.Fatalf("err = %v, want an *anthropic.Error", err)
			}
			var body struct {
				Type  string `json:"type"`
				Error struct{ Type, Message string }
			}
			if err := json.Unmarshal([]byte(apiErr.RawJSON()), &body); err != nil {
				t.Fatalf("error body %s: %v", apiErr.RawJSON(), err)
			}
			if apiErr.StatusCode != c.status || body.Type != "error" || body.Error.Type != c.typ || !strings.Contains(body.Error.Message, c.text) {
				t.Errorf("error = %d %s, want %d %s with %q", apiErr.StatusCode, apiErr.RawJSON(), c.status, c.typ, c.text)
			}
			if !strings.HasPrefix(apiErr.RequestID, "req_") {
				t.Errorf("request id %q, want Tollgate's req_<trace id>", apiErr.RequestID)
			}
			for _, secret := range []string{"secret", "org-"} {
				if strings.Contains(apiErr.RawJSON(), secret) {
					t.Errorf("the provider's text reached the client: %s", apiErr.RawJSON())
				}
			}
			var retries []string
			for i, h := range answers.all() {
				retries = append(retries, h.Get("x-should-retry"))
				if c.minWait > 0 {
					if wait, err := strconv.Atoi(h.Get("Retry-After")); err != nil || wait < c.minWait {
						t.Errorf("answer %d: Retry-After %q, want at least %d", i, h.Get("Retry-After"), c.minWait)
					}
				}
			}
			if strings.Join(retries, " ") != strings.Join(c.retry, " ") || ct.n.Load() != int64(len(c.retry)) {
				t.Errorf("x-should-retry per answer %q over %d requests, want %q", retries, ct.n.Load(), c.retry)
			}
			if n := e.fake.CallCount(); n != c.calls {
				t.Errorf("provider calls = %d, want %d", n, c.calls)
			}
			e.checkInvariants()
		})
	}
}

// A number out of the range Anthropic documents reaches the SDK as
// Anthropic's 400 invalid_request_error naming the field and the range,
// whatever the number (0, beyond int64, a fraction, NaN), never in Go's
// terms; nothing is reserved or called.
func TestAnthropicSDKNumbersSpeakTheirRange(t *testing.T) {
	t.Parallel()
	e, key := newMessagesEnv(t, envOptions{})
	client, _, _ := antSDK(e, key, option.WithMaxRetries(0))
	params := func(maxTokens int64) anthropic.MessageNewParams {
		return anthropic.MessageNewParams{Model: "claude-model", MaxTokens: maxTokens, Messages: []anthropic.MessageParam{antUserText("hello")}}
	}
	raw := func(field, value string) option.RequestOption {
		return option.WithRequestBody("application/json",
			[]byte(`{"model":"claude-model","max_tokens":64,"messages":[{"role":"user","content":"hello"}],"`+field+`":`+value+`}`))
	}
	cases := []struct {
		name   string
		params anthropic.MessageNewParams
		opts   []option.RequestOption
		want   string // the error's message
	}{
		{"max_tokens 0", params(0), nil, "max_tokens: must be between 1 and 1000000"},
		{"max_tokens -1", params(-1), nil, "max_tokens: must be between 1 and 1000000"},
		{"max_tokens 1e30", params(64), []option.RequestOption{option.WithJSONSet("max_tokens", json.RawMessage("1e30"))}, "max_tokens: must be between 1 and 1000000"},
		{"max_tokens 1.5", params(64), []option.RequestOption{option.WithJSONSet("max_tokens", 1.5)}, "max_tokens: must be a whole number between 1 and 1000000"},
		{"top_k beyond int64", params(64), []option.RequestOption{option.WithJSONSet("top_k", json.RawMessage("9223372036854775808"))}, "top_k: must be between 0 and 1000000"},
		{"temperature above Anthropic's 1", params(64), []option.RequestOption{option.WithJSONSet("temperature", 1.5)}, "temperature: must be between 0 and 1"},
		{"temperature NaN", params(64), []option.RequestOption{raw("temperature", "NaN")}, "temperature: must be a number between 0 and 1 (NaN is not a number)"},
		{"top_p -Infinity", params(64), []option.RequestOption{raw("top_p", "-Infinity")}, "top_p: must be a number between 0 and 1 (-Infinity is not a finite number)"},
		{"thinking budget 1e30", params(64), []option.RequestOption{option.WithJSONSet("thinking", map[string]any{"type": "enabled", "budget_tokens": json.RawMessage("1e30")})},
			"thinking.budget_tokens: must be between 1024 and 999999"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := client.Messages.New(context.Background(), c.params, c.opts...)
			var apiErr *anthropic.Error
			if !errors.As(err, &apiErr) {
				t.Fatalf("err = %v, want an *anthropic.Error", err)
			}
			var body struct {
				Type  string `json:"type"`
				Error struct{ Type, Message string }
			}
			if err := json.Unmarshal([]byte(apiErr.RawJSON()), &body); err != nil {
				t.Fatalf("error body %s: %v", apiErr.RawJSON(), err)
			}
			if apiErr.StatusCode != http.StatusBadRequest || body.Type != "error" || body.Error.Type != "invalid_request_error" {
				t.Errorf("error = %d %s, want 400 invalid_request_error", apiErr.StatusCode, apiErr.RawJSON())
			}
			if body.Error.Message != c.want {
				t.Errorf("message %q, want %q", body.Error.Message, c.want)
			}
			if goSpeak([]byte(apiErr.RawJSON())) {
				t.Errorf("the error speaks Go: %s", apiErr.RawJSON())
			}
		})
	}
	e.checkNothingWritten()
}
