package server_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"

	"github.com/tollgate/tollgate/accounts"
)

// sdkAgentParams is openAIAgentBody as the official Go SDK builds it:
// every parameter of the call set through the SDK's own types.
func sdkAgentParams() openai.ChatCompletionNewParams {
	text := func(s string) []openai.ChatCompletionContentPartTextParam {
		return []openai.ChatCompletionContentPartTextParam{{Text: s}}
	}
	call := func(id, name, args string) openai.ChatCompletionMessageToolCallUnionParam {
		return openai.ChatCompletionMessageToolCallUnionParam{OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{
			ID: id, Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: name, Arguments: args}}}
	}
	return openai.ChatCompletionNewParams{
		Model: "agent-model",
		Messages: []openai.ChatCompletionMessageParamUnion{
			openai.DeveloperMessage("Be brief."),
			openai.SystemMessage(text("Use tools.")),
			{OfUser: &openai.ChatCompletionUserMessageParam{Name: openai.String("ann"), Content: openai.ChatCompletionUserMessageParamContentUnion{
				OfArrayOfContentParts: []openai.ChatCompletionContentPartUnionParam{
					openai.TextContentPart("What is in this picture, and the weather?"),
					openai.ImageContentPart(openai.ChatCompletionContentPartImageImageURLParam{URL: "https://example.com/a.png", Detail: "low"}),
					openai.ImageContentPart(openai.ChatCompletionContentPartImageImageURLParam{URL: "data:image/png;base64,iVBORw0KGgo="}),
				}}}},
			{OfAssistant: &openai.ChatCompletionAssistantMessageParam{ToolCalls: []openai.ChatCompletionMessageToolCallUnionParam{
				call("call_1", "weather", `{"city":"Oslo"}`), call("call_2", "clock", "{}")}}},
			openai.ToolMessage("12 C", "call_1"),
			openai.ToolMessage(text("noon"), "call_2"),
			{OfAssistant: &openai.ChatCompletionAssistantMessageParam{Refusal: openai.String("I cannot say.")}},
			openai.UserMessage("Try again."),
		},
		MaxCompletionTokens: openai.Int(40),
		Tools: []openai.ChatCompletionToolUnionParam{
			openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{Name: "weather", Description: openai.String("Weather now"), Strict: openai.Bool(true),
				Parameters: shared.FunctionParameters{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}},
					"required": []string{"city"}, "additionalProperties": false}}),
			openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{Name: "clock",
				Parameters: shared.FunctionParameters{"type": "object", "properties": map[string]any{}}}),
		},
		ToolChoice:        openai.ChatCompletionToolChoiceOptionUnionParam{OfAuto: openai.String("auto")},
		ParallelToolCalls: openai.Bool(true),
		ResponseFormat: openai.ChatCompletionNewParamsResponseFormatUnion{OfJSONSchema: &shared.ResponseFormatJSONSchemaParam{
			JSONSchema: shared.ResponseFormatJSONSchemaJSONSchemaParam{Name: "answer", Strict: openai.Bool(true),
				Schema: map[string]any{"type": "object", "properties": map[string]any{"text": map[string]any{"type": "string"}},
					"required": []string{"text"}, "additionalProperties": false}}}},
		Temperature:      openai.Float(0.2),
		TopP:             openai.Float(0.9),
		Seed:             openai.Int(42),
		Stop:             openai.ChatCompletionNewParamsStopUnion{OfStringArray: []string{"END", "STOP"}},
		PresencePenalty:  openai.Float(-0.5),
		FrequencyPenalty: openai.Float(0.5),
		LogitBias:        map[string]int64{"50256": -100},
		Logprobs:         openai.Bool(true),
		TopLogprobs:      openai.Int(2),
		N:                openai.Int(2),
		User:             openai.String("u-1"),
		SafetyIdentifier: openai.String("s-1"),
		ReasoningEffort:  shared.ReasoningEffortLow,
		Verbosity:        openai.ChatCompletionNewParamsVerbosityLow,
		ServiceTier:      openai.ChatCompletionNewParamsServiceTierFlex,
		PromptCacheKey:   openai.String("pk-1"),
		Metadata:         shared.Metadata{"ticket": "7"},
	}
}

// Every parameter the official SDK sets reaches the task request: the
// SDK's call and the native body that sets the same fields are one
// request (the native body under the SDK call's key is its replay), and
// the SDK's call again with any parameter changed is refused.
//
// The fake provider does not log the bodies it receives, so the request
// is checked where Tollgate stores it: its hash covers every field.
func TestOpenAISDKSendsEveryParameterIntoTheTask(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	key := e.owner("acme", accounts.RoleClient, 1_000_000_000)
	client, _ := sdk(e, key, option.WithMaxRetries(0))
	ctx := context.Background()

	var taskID string
	capture := option.WithMiddleware(func(r *http.Request, next option.MiddlewareNext) (*http.Response, error) {
		res, err := next(r)
		if res != nil {
			taskID = res.Header.Get("X-Tollgate-Task-Id")
		}
		return res, err
	})
	_, err := client.Chat.Completions.New(ctx, sdkAgentParams(), option.WithHeader("Idempotency-Key", "sdk"), capture)
	var apiErr *openai.Error
	if err != nil && (!errors.As(err, &apiErr) || apiErr.StatusCode == http.StatusBadRequest && apiErr.Code == "invalid_request") {
		t.Fatalf("SDK call refused: %v", err)
	}
	if taskID == "" {
		t.Fatalf("SDK call made no task: %v", err)
	}

	native := e.post(key, "sdk", []byte(strings.Replace(nativeAgentBody, `, "deadline_s": 300`, "", 1)), map[string]string{"Prefer": "wait=10"})
	if native.status != http.StatusOK || native.header.Get("Idempotent-Replayed") != "true" || native.task(t).ID != taskID {
		t.Fatalf("the native body under the SDK call's key: %d %s, want a replay of task %s", native.status, native.body, taskID)
	}

	changes := map[string]func(p *openai.ChatCompletionNewParams){
		"temperature": func(p *openai.ChatCompletionNewParams) { p.Temperature = openai.Float(0.3) },
		"tools": func(p *openai.ChatCompletionNewParams) {
			p.Tools[1].OfFunction.Function.Description = openai.String("Time now")
		},
		"response_format": func(p *openai.ChatCompletionNewParams) { p.ResponseFormat.OfJSONSchema.JSONSchema.Name = "other" },
		"tool_choice": func(p *openai.ChatCompletionNewParams) {
			p.ToolChoice = openai.ToolChoiceOptionFunctionToolChoice(openai.ChatCompletionNamedToolChoiceFunctionParam{Name: "clock"})
		},
		"service_tier": func(p *openai.ChatCompletionNewParams) {
			p.ServiceTier = openai.ChatCompletionNewParamsServiceTierPriority
		},
		"n":                func(p *openai.ChatCompletionNewParams) { p.N = openai.Int(1) },
		"reasoning_effort": func(p *openai.ChatCompletionNewParams) { p.ReasoningEffort = shared.ReasoningEffortHigh },
	}
	for field, change := range changes {
		p := sdkAgentParams()
		change(&p)
		_, err := client.Chat.Completions.New(ctx, p, option.WithHeader("Idempotency-Key", "sdk"))
		if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusUnprocessableEntity || apiErr.Code != "idempotency_key_reused" {
			t.Errorf("%s changed under the same key: %v, want 422 idempotency_key_reused", field, err)
		}
	}
}

// An invalid parameter set through the SDK is a 400 whose param names it.
func TestOpenAISDKInvalidParameterNamesIt(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	key := e.owner("acme", accounts.RoleClient, 1_000_000_000)
	client, ct := sdk(e, key)
	cases := map[string]func(p *openai.ChatCompletionNewParams){
		"temperature": func(p *openai.ChatCompletionNewParams) { p.Temperature = openai.Float(3) },
		"messages[1].tool_call_id": func(p *openai.ChatCompletionNewParams) {
			p.Messages = append(p.Messages, openai.ToolMessage("r", "call_x"))
		},
		"tools[0].function.parameters": func(p *openai.ChatCompletionNewParams) {
			p.Tools = []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
				Name: "f", Parameters: shared.FunctionParameters{"type": 7}})}
		},
		"messages[0].content[0].image_url.url": func(p *openai.ChatCompletionNewParams) {
			p.Messages = []openai.ChatCompletionMessageParamUnion{openai.UserMessage([]openai.ChatCompletionContentPartUnionParam{
				openai.ImageContentPart(openai.ChatCompletionContentPartImageImageURLParam{URL: "javascript:alert(1)"})})}
		},
	}
	for field, change := range cases {
		p := chatParams("hi")
		change(&p)
		before := ct.n.Load()
		_, err := client.Chat.Completions.New(context.Background(), p)
		var apiErr *openai.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusBadRequest || apiErr.Param != field {
			t.Errorf("%s: %v, want a 400 naming it", field, err)
		}
		if n := ct.n.Load() - before; n != 1 {
			t.Errorf("%s: the SDK sent %d requests, want 1 (no retry of a refusal)", field, n)
		}
	}
	e.checkNothingWritten()
}
