package main

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"
)

// reportSchema is a json_schema response format; the fake answers its
// instance {"city":"fake","temp_c":-50}.
const reportSchema = `{"type":"object","properties":{"city":{"type":"string"},"temp_c":{"type":"integer","minimum":-50}},"required":["city","temp_c"],"additionalProperties":false}`

// pngDataURL is a 1x1 PNG as a data URL.
const (
	pngBase64  = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
	pngDataURL = "data:image/png;base64," + pngBase64
	imageURL   = "https://images.example.com/paris.png"
)

// refusedByName checks that err is Tollgate's 400 naming param, that the
// SDK did not retry it, and that no provider call was made.
func refusedByName(t *testing.T, w *faithfulWorld, err error, log *sdkLog, kind, marker, param string) {
	t.Helper()
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) {
		t.Fatalf("err = %v; want a 400 naming %s", err, param)
	}
	if apiErr.StatusCode != http.StatusBadRequest || apiErr.Type != "invalid_request_error" || apiErr.Param != param {
		t.Errorf("error = %d type %q param %q code %q (%s); want 400 invalid_request_error param %q",
			apiErr.StatusCode, apiErr.Type, apiErr.Param, apiErr.Code, apiErr.Message, param)
	}
	if n := log.requests(); n != 1 {
		t.Errorf("the SDK sent %d requests; want 1 (a refusal is final)", n)
	}
	w.received(t, "main", kind, marker, 0)
}

func testFaithfulFormats(t *testing.T, w *faithfulWorld) {
	for _, kind := range kinds {
		t.Run("json_schema/"+kind, func(t *testing.T) { t.Parallel(); testJSONSchema(t, w, kind) })
		t.Run("json_object/"+kind, func(t *testing.T) { t.Parallel(); testJSONObject(t, w, kind) })
		t.Run("images/"+kind, func(t *testing.T) { t.Parallel(); testImages(t, w, kind) })
		t.Run("n=2/"+kind, func(t *testing.T) { t.Parallel(); testTwoChoices(t, w, kind) })
	}
	t.Run("images/cloudflare https URL refused", func(t *testing.T) {
		t.Parallel()
		client, log := w.sdk()
		marker := "[image url cloudflare]"
		_, err := client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
			Model: "main-cloudflare",
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage([]openai.ChatCompletionContentPartUnionParam{
				openai.TextContentPart("Describe " + marker),
				openai.ImageContentPart(openai.ChatCompletionContentPartImageImageURLParam{URL: imageURL}),
			})},
		})
		refusedByName(t, w, err, log, kindCloudflare, marker, "messages[0].content[1].image_url")
	})
}

func testJSONSchema(t *testing.T, w *faithfulWorld, kind string) {
	client, log := w.sdk()
	marker := "[json_schema " + kind + "]"
	var schema map[string]any
	if err := json.Unmarshal([]byte(reportSchema), &schema); err != nil {
		t.Fatal(err)
	}
	got, err := client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model:    "main-" + kind,
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Report the weather in Paris. " + marker)},
		ResponseFormat: openai.ChatCompletionNewParamsResponseFormatUnion{OfJSONSchema: &shared.ResponseFormatJSONSchemaParam{
			JSONSchema: shared.ResponseFormatJSONSchemaJSONSchemaParam{Name: "report", Schema: schema, Strict: openai.Bool(true)},
		}},
	})
	if err != nil {
		t.Fatalf("json_schema: %v\nlogs:\n%s", err, w.logs)
	}
	if diff := cmp.Diff(jsonValue(t, `{"city":"fake","temp_c":-50}`), answerJSON(t, "structured output", got.Choices[0].Message.Content)); diff != "" {
		t.Errorf("structured output mismatch (-want +got):\n%s", diff)
	}
	body := w.received(t, "main", kind, marker, 1)
	switch kind {
	case kindOpenAI:
		checkSameFields(t, log.sent(t), body, "gpt-test")
	case kindAnthropic:
		checkField(t, kind, body, "output_config", `{"format":{"type":"json_schema","schema":`+reportSchema+`}}`)
		checkField(t, kind, body, "response_format", "")
	case kindCloudflare:
		checkField(t, kind, body, "response_format", `{"type":"json_schema","json_schema":`+reportSchema+`}`)
	}
}

// json_object is carried where the provider has a JSON mode, and refused
// by name where it has none (Anthropic), before any call.
func testJSONObject(t *testing.T, w *faithfulWorld, kind string) {
	client, log := w.sdk()
	marker := "[json_object " + kind + "]"
	got, err := client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model:          "main-" + kind,
		Messages:       []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Answer in JSON. " + marker)},
		ResponseFormat: openai.ChatCompletionNewParamsResponseFormatUnion{OfJSONObject: &shared.ResponseFormatJSONObjectParam{}},
	})
	if kind == kindAnthropic {
		refusedByName(t, w, err, log, kind, marker, "response_format")
		return
	}
	if err != nil {
		t.Fatalf("json_object: %v\nlogs:\n%s", err, w.logs)
	}
	var obj map[string]any
	if err := json.Unmarshal([]byte(got.Choices[0].Message.Content), &obj); err != nil {
		t.Errorf("content %q is not a JSON object: %v", got.Choices[0].Message.Content, err)
	}
	body := w.received(t, "main", kind, marker, 1)
	checkField(t, kind, body, "response_format", `{"type":"json_object"}`)
}

// Image parts: a base64 data URL everywhere, an https URL where the
// provider takes one.
func testImages(t *testing.T, w *faithfulWorld, kind string) {
	client, log := w.sdk()
	marker := "[images " + kind + "]"
	parts := []openai.ChatCompletionContentPartUnionParam{
		openai.TextContentPart("What is in these pictures? " + marker),
		openai.ImageContentPart(openai.ChatCompletionContentPartImageImageURLParam{URL: pngDataURL}),
	}
	switch kind {
	case kindOpenAI:
		parts[1] = openai.ImageContentPart(openai.ChatCompletionContentPartImageImageURLParam{URL: pngDataURL, Detail: "low"})
		parts = append(parts, openai.ImageContentPart(openai.ChatCompletionContentPartImageImageURLParam{URL: imageURL, Detail: "high"}))
	case kindAnthropic:
		parts = append(parts, openai.ImageContentPart(openai.ChatCompletionContentPartImageImageURLParam{URL: imageURL}))
	}
	got, err := client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model:    "main-" + kind,
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(parts)},
	})
	if err != nil {
		t.Fatalf("images: %v\nlogs:\n%s", err, w.logs)
	}
	if !strings.HasPrefix(got.Choices[0].Message.Content, "fake completion ") {
		t.Errorf("answer = %q; want a fake completion", got.Choices[0].Message.Content)
	}
	body := w.received(t, "main", kind, marker, 1)
	switch kind {
	case kindOpenAI:
		checkSameFields(t, log.sent(t), body, "gpt-test")
	case kindAnthropic:
		checkField(t, kind, body, "messages", `[{"role":"user","content":[
			{"type":"text","text":"What is in these pictures? `+marker+`"},
			{"type":"image","source":{"type":"base64","media_type":"image/png","data":"`+pngBase64+`"}},
			{"type":"image","source":{"type":"url","url":"`+imageURL+`"}}]}]`)
	case kindCloudflare:
		checkField(t, kind, body, "messages", `[{"role":"user","content":[
			{"type":"text","text":"What is in these pictures? `+marker+`"},
			{"type":"image_url","image_url":{"url":"`+pngDataURL+`"}}]}]`)
	}
}

// n = 2 gives two choices where the provider can; elsewhere it is refused
// by name.
func testTwoChoices(t *testing.T, w *faithfulWorld, kind string) {
	client, log := w.sdk()
	marker := "[n=2 " + kind + "]"
	got, err := client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model:    "main-" + kind,
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Two ideas, please. " + marker)},
		N:        openai.Int(2),
	})
	if kind != kindOpenAI {
		refusedByName(t, w, err, log, kind, marker, "n")
		return
	}
	if err != nil {
		t.Fatalf("n=2: %v\nlogs:\n%s", err, w.logs)
	}
	if len(got.Choices) != 2 {
		t.Fatalf("choices = %d; want 2", len(got.Choices))
	}
	for i, c := range got.Choices {
		if c.Index != int64(i) || !strings.HasPrefix(c.Message.Content, "fake completion ") || c.FinishReason != "stop" {
			t.Errorf("choice %d = index %d %q %q; want index %d, a fake completion, stop", i, c.Index, c.Message.Content, c.FinishReason, i)
		}
	}
	checkSameFields(t, log.sent(t), w.received(t, "main", kind, marker, 1), "gpt-test")
}

// passthroughRefused: a field only OpenAI-kind providers take is refused
// by name on the others.
func passthroughRefused(t *testing.T, w *faithfulWorld, kind string) {
	client, log := w.sdk()
	marker := "[service_tier " + kind + "]"
	_, err := client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model:    "main-" + kind,
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Hello " + marker)},
	}, option.WithJSONSet("service_tier", "flex"))
	refusedByName(t, w, err, log, kind, marker, "service_tier")
}
