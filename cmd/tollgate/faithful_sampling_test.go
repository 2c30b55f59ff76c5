package main

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/shared"
)

func testFaithfulSampling(t *testing.T, w *faithfulWorld) {
	t.Run("every parameter/openai", func(t *testing.T) { t.Parallel(); testEverySamplingParameter(t, w) })
	t.Run("metadata/openai", func(t *testing.T) { t.Parallel(); testMetadataCarried(t, w) })
	t.Run("translated/anthropic", func(t *testing.T) { t.Parallel(); testAnthropicSampling(t, w) })
	t.Run("translated/cloudflare", func(t *testing.T) { t.Parallel(); testWorkersAISampling(t, w) })
	for _, kind := range []string{kindAnthropic, kindCloudflare} {
		t.Run("passthrough refused/"+kind, func(t *testing.T) { t.Parallel(); passthroughRefused(t, w, kind) })
	}
	t.Run("reasoning model", func(t *testing.T) { t.Parallel(); testReasoningModel(t, w) })
	t.Run("same key, changed parameter", func(t *testing.T) { t.Parallel(); testKeyReusedWithChange(t, w) })
}

// Every sampling and control parameter reaches an OpenAI-kind provider as
// the SDK sent it, and a field Tollgate does not act on (service_tier)
// arrives at the top level.
func testEverySamplingParameter(t *testing.T, w *faithfulWorld) {
	ctx := context.Background()
	client, log := w.sdk()
	marker := "[sampling openai]"
	got, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
		Model:            "main-openai",
		Messages:         []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Tell me a story. " + marker)},
		Temperature:      openai.Float(0.7),
		TopP:             openai.Float(0.9),
		Seed:             openai.Int(42),
		Stop:             openai.ChatCompletionNewParamsStopUnion{OfStringArray: []string{"END", "STOP"}},
		PresencePenalty:  openai.Float(0.5),
		FrequencyPenalty: openai.Float(0.25),
		LogitBias:        map[string]int64{"50256": -100},
		Logprobs:         openai.Bool(true),
		TopLogprobs:      openai.Int(2),
		User:             openai.String("user-1"),
		SafetyIdentifier: openai.String("safety-1"),
		Verbosity:        openai.ChatCompletionNewParamsVerbosityLow,
		MaxTokens:        openai.Int(64),
	}, option.WithJSONSet("service_tier", "flex"))
	if err != nil {
		t.Fatalf("sampling: %v\nlogs:\n%s", err, w.logs)
	}
	sent := log.sent(t)
	if sent["service_tier"] != "flex" {
		t.Fatalf("the SDK sent service_tier %v; the test's option did not apply", sent["service_tier"])
	}
	received := w.received(t, "main", kindOpenAI, marker, 1)
	checkSameFields(t, sent, received, "gpt-test")
	checkField(t, kindOpenAI, received, "max_completion_tokens", "")
	lp := got.Choices[0].Logprobs.Content
	if len(lp) == 0 || len(lp[0].TopLogprobs) != 2 {
		t.Errorf("logprobs = %+v; want one entry per token with 2 top_logprobs", got.Choices[0].Logprobs)
	}

	// reasoning_effort, on the reasoning model.
	marker = "[reasoning_effort openai]"
	if _, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
		Model:           "main-openai-reasoning",
		Messages:        []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Think briefly. " + marker)},
		ReasoningEffort: shared.ReasoningEffortLow,
	}); err != nil {
		t.Fatalf("reasoning_effort: %v\nlogs:\n%s", err, w.logs)
	}
	received = w.received(t, "main", kindOpenAI, marker, 1)
	checkSameFields(t, log.sent(t), received, reasoningProviderModel)
}

// OpenAI's metadata (string pairs) tags a stored completion: with store it
// is carried to an OpenAI-kind provider (without store it is the task's
// metadata only, as OpenAI acts on none).
func testMetadataCarried(t *testing.T, w *faithfulWorld) {
	client, log := w.sdk()
	marker := "[metadata openai]"
	if _, err := client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model:    "main-openai",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Hello " + marker)},
		Metadata: shared.Metadata{"team": "search"},
		Store:    openai.Bool(true),
	}); err != nil {
		t.Fatalf("metadata: %v\nlogs:\n%s", err, w.logs)
	}
	checkSameFields(t, log.sent(t), w.received(t, "main", kindOpenAI, marker, 1), "gpt-test")
}

// Anthropic receives the parameters it has under its own names.
func testAnthropicSampling(t *testing.T, w *faithfulWorld) {
	client, _ := w.sdk()
	marker := "[sampling anthropic]"
	if _, err := client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model:               "main-anthropic",
		Messages:            []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Tell me a story. " + marker)},
		Temperature:         openai.Float(0.5),
		TopP:                openai.Float(0.9),
		Stop:                openai.ChatCompletionNewParamsStopUnion{OfStringArray: []string{"END"}},
		User:                openai.String("user-1"),
		MaxCompletionTokens: openai.Int(100),
	}); err != nil {
		t.Fatalf("sampling: %v\nlogs:\n%s", err, w.logs)
	}
	got := w.received(t, "main", kindAnthropic, marker, 1)
	checkField(t, kindAnthropic, got, "model", `"claude-test"`)
	checkField(t, kindAnthropic, got, "temperature", `0.5`)
	checkField(t, kindAnthropic, got, "top_p", `0.9`)
	checkField(t, kindAnthropic, got, "stop_sequences", `["END"]`)
	checkField(t, kindAnthropic, got, "metadata", `{"user_id":"user-1"}`)
	checkField(t, kindAnthropic, got, "max_tokens", `100`)

	// reasoning_effort becomes extended thinking, within the limit.
	marker = "[reasoning_effort anthropic]"
	if _, err := client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model:               "main-anthropic",
		Messages:            []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Think briefly. " + marker)},
		ReasoningEffort:     shared.ReasoningEffortLow,
		MaxCompletionTokens: openai.Int(8000),
	}); err != nil {
		t.Fatalf("reasoning_effort: %v\nlogs:\n%s", err, w.logs)
	}
	got = w.received(t, "main", kindAnthropic, marker, 1)
	checkField(t, kindAnthropic, got, "max_tokens", `8000`)
	thinking, _ := got["thinking"].(map[string]any)
	if budget, _ := thinking["budget_tokens"].(float64); thinking["type"] != "enabled" || budget < 1024 || budget >= 8000 {
		t.Errorf("anthropic provider received thinking %v; want enabled with a budget from 1024 to below max_tokens", got["thinking"])
	}
}

// Workers AI receives the parameters it has.
func testWorkersAISampling(t *testing.T, w *faithfulWorld) {
	client, _ := w.sdk()
	marker := "[sampling cloudflare]"
	if _, err := client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model:            "main-cloudflare",
		Messages:         []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Tell me a story. " + marker)},
		Temperature:      openai.Float(0.5),
		TopP:             openai.Float(0.9),
		Seed:             openai.Int(42),
		PresencePenalty:  openai.Float(0.5),
		FrequencyPenalty: openai.Float(0.25),
		MaxTokens:        openai.Int(100),
	}); err != nil {
		t.Fatalf("sampling: %v\nlogs:\n%s", err, w.logs)
	}
	got := w.received(t, "main", kindCloudflare, marker, 1)
	for field, want := range map[string]string{"temperature": "0.5", "top_p": "0.9", "seed": "42", "presence_penalty": "0.5", "frequency_penalty": "0.25", "max_tokens": "100"} {
		checkField(t, kindCloudflare, got, field, want)
	}
}

// A reasoning model works with and without a client limit; without one,
// Tollgate's default goes as max_completion_tokens, never max_tokens.
func testReasoningModel(t *testing.T, w *faithfulWorld) {
	cases := []struct {
		name  string
		limit param.Opt[int64]
		want  string // the max_completion_tokens received; "" is any number
	}{
		{name: "without a limit"},
		{name: "with max_completion_tokens", limit: openai.Int(500), want: "500"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			client, _ := w.sdk()
			marker := "[reasoning " + c.name + "]"
			got, err := client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
				Model:               "main-openai-reasoning",
				Messages:            []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Solve it. " + marker)},
				MaxCompletionTokens: c.limit,
			})
			if err != nil {
				t.Fatalf("reasoning model %s: %v\nlogs:\n%s", c.name, err, w.logs)
			}
			if got.Usage.CompletionTokensDetails.ReasoningTokens == 0 {
				t.Errorf("usage = %+v; want completion_tokens_details.reasoning_tokens", got.Usage)
			}
			body := w.received(t, "main", kindOpenAI, marker, 1)
			checkField(t, kindOpenAI, body, "max_tokens", "")
			if c.want != "" {
				checkField(t, kindOpenAI, body, "max_completion_tokens", c.want)
			} else if n, ok := body["max_completion_tokens"].(float64); !ok || n <= 0 {
				t.Errorf("received max_completion_tokens %v; want Tollgate's default limit", body["max_completion_tokens"])
			}
		})
	}
}

// The same Idempotency-Key with any parameter changed is refused with 422,
// which the SDK does not retry, and makes no provider call.
func testKeyReusedWithChange(t *testing.T, w *faithfulWorld) {
	base := func(marker string) openai.ChatCompletionNewParams {
		return openai.ChatCompletionNewParams{
			Model:       "main-openai",
			Messages:    []openai.ChatCompletionMessageParamUnion{openai.UserMessage("What is the weather in Paris? " + marker)},
			Temperature: openai.Float(0.2),
			Tools:       weatherTools(t),
		}
	}
	cases := []struct {
		name   string
		change func(*openai.ChatCompletionNewParams)
		opts   []option.RequestOption
	}{
		{name: "temperature", change: func(p *openai.ChatCompletionNewParams) { p.Temperature = openai.Float(0.3) }},
		{name: "tools", change: func(p *openai.ChatCompletionNewParams) { p.Tools = p.Tools[:1] }},
		{name: "tool_choice", change: func(p *openai.ChatCompletionNewParams) {
			p.ToolChoice = openai.ChatCompletionToolChoiceOptionUnionParam{OfAuto: openai.String("required")}
		}},
		{name: "response_format", change: func(p *openai.ChatCompletionNewParams) {
			p.ResponseFormat = openai.ChatCompletionNewParamsResponseFormatUnion{OfJSONObject: &shared.ResponseFormatJSONObjectParam{}}
		}},
		{name: "seed", change: func(p *openai.ChatCompletionNewParams) { p.Seed = openai.Int(1) }},
		{name: "passthrough", opts: []option.RequestOption{option.WithJSONSet("service_tier", "flex")}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			client, log := w.sdk()
			marker := "[key reused " + c.name + "]"
			key := option.WithHeader("Idempotency-Key", "faithful-reuse-"+c.name)
			params := base(marker)
			if _, err := client.Chat.Completions.New(ctx, params, key); err != nil {
				t.Fatalf("first call: %v\nlogs:\n%s", err, w.logs)
			}
			if c.change != nil {
				c.change(&params)
			}
			_, err := client.Chat.Completions.New(ctx, params, append([]option.RequestOption{key}, c.opts...)...)
			var apiErr *openai.Error
			if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusUnprocessableEntity || apiErr.Code != "idempotency_key_reused" {
				t.Fatalf("second call with %s changed: err = %v; want 422 idempotency_key_reused", c.name, err)
			}
			if n := log.requests(); n != 2 {
				t.Errorf("the SDK sent %d requests for two calls; want 2 (a 422 is not retried)", n)
			}
			w.received(t, "main", kindOpenAI, marker, 1)
		})
	}
}
