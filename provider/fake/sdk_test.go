package fake_test

import (
	"encoding/json"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"

	"github.com/tollgate/tollgate/provider/fake"
)

func sdkClient(ts *httptest.Server) openai.Client {
	return openai.NewClient(option.WithBaseURL(ts.URL+"/v1/"), option.WithAPIKey("test"), option.WithMaxRetries(0))
}

var sdkTools = []openai.ChatCompletionToolUnionParam{
	openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
		Name: "get_weather", Strict: openai.Bool(true),
		Parameters: shared.FunctionParameters{
			"type": "object", "additionalProperties": false, "required": []string{"city", "unit"},
			"properties": map[string]any{"city": map[string]any{"type": "string"}, "unit": map[string]any{"type": "string", "enum": []string{"c", "f"}}},
		},
	}),
}

// TestOpenAISDK drives the OpenAI endpoint with the official Go SDK, as
// Tollgate's adapter and its users do: a tool round trip, the same call
// streamed, structured output, n and logprobs, a reasoning model.
func TestOpenAISDK(t *testing.T) {
	t.Parallel()
	f := fake.New(fake.WithReasoningModels("o-fake"))
	ts := serve(t, f)
	client := sdkClient(ts)
	ctx := t.Context()

	params := openai.ChatCompletionNewParams{
		Model:    "gpt-x",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Weather in Paris?")},
		Tools:    sdkTools,
	}
	first, err := client.Chat.Completions.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	calls := first.Choices[0].Message.ToolCalls
	if first.Choices[0].FinishReason != "tool_calls" || len(calls) != 1 || calls[0].ID != "call_fake_1" ||
		calls[0].Function.Name != "get_weather" || calls[0].Function.Arguments != `{"city":"fake","unit":"c"}` {
		t.Fatalf("first answer = %+v, want one get_weather call", first.Choices[0])
	}

	// The same call streamed assembles to the same tool call.
	f.Script(fake.Scripted{CachedTokens: 4})
	params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	stream := client.Chat.Completions.NewStreaming(ctx, params)
	var acc openai.ChatCompletionAccumulator
	finished := 0
	for stream.Next() {
		acc.AddChunk(stream.Current())
		if _, ok := acc.JustFinishedToolCall(); ok {
			finished++
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	got := acc.Choices[0].Message.ToolCalls
	if finished != 1 || len(got) != 1 || got[0].ID != calls[0].ID || got[0].Function.Arguments != calls[0].Function.Arguments {
		t.Errorf("streamed calls = %+v (%d finished), want %+v", got, finished, calls)
	}
	if acc.Usage.PromptTokensDetails.CachedTokens != 4 || acc.Usage.PromptTokens != first.Usage.PromptTokens+4 {
		t.Errorf("streamed usage = %+v, want the first call's prompt plus 4 cached tokens", acc.Usage)
	}

	// The second half of the loop ends it with text.
	params.StreamOptions = openai.ChatCompletionStreamOptionsParam{}
	params.Messages = append(params.Messages, first.Choices[0].Message.ToParam(), openai.ToolMessage("18C", calls[0].ID))
	second, err := client.Chat.Completions.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	if second.Choices[0].FinishReason != "stop" || !strings.HasPrefix(second.Choices[0].Message.Content, "fake completion ") {
		t.Errorf("second answer = %+v, want text", second.Choices[0])
	}
	var sent struct {
		Messages []map[string]any
	}
	if err := json.Unmarshal(f.Calls()[2].Body, &sent); err != nil || len(sent.Messages) != 3 || sent.Messages[2]["tool_call_id"] != "call_fake_1" {
		t.Errorf("the provider received %s, want the tool result for call_fake_1", f.Calls()[2].Body)
	}

	// Structured output.
	structured, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
		Model:    "gpt-x",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Extract.")},
		ResponseFormat: openai.ChatCompletionNewParamsResponseFormatUnion{OfJSONSchema: &shared.ResponseFormatJSONSchemaParam{
			JSONSchema: shared.ResponseFormatJSONSchemaJSONSchemaParam{Name: "person", Strict: openai.Bool(true), Schema: map[string]any{
				"type": "object", "required": []string{"name", "age"}, "additionalProperties": false,
				"properties": map[string]any{"name": map[string]any{"type": "string"}, "age": map[string]any{"type": "integer", "minimum": 18}},
			}},
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(`{"age":18,"name":"fake"}`, structured.Choices[0].Message.Content); diff != "" {
		t.Errorf("structured content mismatch (-want +got):\n%s", diff)
	}

	// n choices with logprobs, and an image part.
	many, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
		Model: "gpt-x", N: openai.Int(2), Logprobs: openai.Bool(true), TopLogprobs: openai.Int(1),
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage([]openai.ChatCompletionContentPartUnionParam{
			openai.TextContentPart("What is this?"),
			openai.ImageContentPart(openai.ChatCompletionContentPartImageImageURLParam{URL: "https://example.com/cat.png", Detail: "low"}),
		})},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(many.Choices) != 2 || many.Choices[1].Index != 1 || len(many.Choices[1].Logprobs.Content) != 3 {
		t.Errorf("answer = %+v, want two choices with logprobs", many.Choices)
	}

	// A reasoning model refuses max_tokens and takes max_completion_tokens.
	_, err = client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
		Model: "o-fake", MaxTokens: openai.Int(10), Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
	})
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Param != "max_tokens" || apiErr.Code != "unsupported_parameter" {
		t.Errorf("max_tokens to a reasoning model: %v, want OpenAI's 400 unsupported_parameter", err)
	}
	ok, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
		Model: "o-fake", MaxCompletionTokens: openai.Int(10), Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
	})
	if err != nil {
		t.Fatal(err)
	}
	if ok.Usage.CompletionTokensDetails.ReasoningTokens != 5 || ok.Usage.CompletionTokens != 10 {
		t.Errorf("reasoning usage = %+v, want 5 reasoning tokens of 10", ok.Usage)
	}
}
