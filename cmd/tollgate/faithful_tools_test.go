package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/shared"

	"github.com/tollgate/tollgate/provider/fake"
)

// The tools every case offers, and their schemas as the providers must
// receive them. The fake calls a tool with an instance of its schema: its
// required properties, strings "fake".
const (
	weatherSchema = `{"type":"object","properties":{"city":{"type":"string"},"unit":{"type":"string","enum":["celsius","fahrenheit"]}},"required":["city"],"additionalProperties":false}`
	timeSchema    = `{"type":"object","properties":{"tz":{"type":"string"}},"required":["tz"]}`
	weatherDesc   = "The weather in a city now."
	timeDesc      = "The time in a time zone now."
)

func sdkTool(t *testing.T, name, desc, schema string) openai.ChatCompletionToolUnionParam {
	t.Helper()
	var params shared.FunctionParameters
	if err := json.Unmarshal([]byte(schema), &params); err != nil {
		t.Fatal(err)
	}
	return openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{Name: name, Description: openai.String(desc), Parameters: params})
}

func weatherTools(t *testing.T) []openai.ChatCompletionToolUnionParam {
	return []openai.ChatCompletionToolUnionParam{sdkTool(t, "get_weather", weatherDesc, weatherSchema), sdkTool(t, "get_time", timeDesc, timeSchema)}
}

// anthropicTools are weatherTools on Anthropic's wire.
const anthropicTools = `[{"name":"get_weather","description":"` + weatherDesc + `","input_schema":` + weatherSchema + `},
	{"name":"get_time","description":"` + timeDesc + `","input_schema":` + timeSchema + `}]`

// workersAITools are weatherTools as the Workers AI adapter sends them.
const workersAITools = `[{"type":"function","function":{"name":"get_weather","description":"` + weatherDesc + `","parameters":` + weatherSchema + `}},
	{"type":"function","function":{"name":"get_time","description":"` + timeDesc + `","parameters":` + timeSchema + `}}]`

// wantToolCall is one tool call the fake answers: name and arguments.
type wantToolCall struct{ name, args string }

func checkToolCalls(t *testing.T, got []openai.ChatCompletionMessageToolCallUnion, want []wantToolCall) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("tool calls = %d (%+v); want %d", len(got), got, len(want))
	}
	ids := map[string]bool{}
	for i, c := range got {
		if c.ID == "" || ids[c.ID] {
			t.Errorf("tool call %d id %q: want a unique non-empty id", i, c.ID)
		}
		ids[c.ID] = true
		if c.Type != "function" || c.Function.Name != want[i].name {
			t.Errorf("tool call %d = %s %q; want function %q", i, c.Type, c.Function.Name, want[i].name)
		}
		if diff := cmp.Diff(jsonValue(t, want[i].args), answerJSON(t, "tool call arguments", c.Function.Arguments)); diff != "" {
			t.Errorf("tool call %d arguments mismatch (-want +got):\n%s", i, diff)
		}
	}
}

// toolParams is the first turn of a tool loop on kind: a system prompt,
// a question and both tools, with what each kind can carry of the tool
// controls.
func toolParams(t *testing.T, model, kind, marker string) openai.ChatCompletionNewParams {
	p := openai.ChatCompletionNewParams{
		Model:    model,
		Messages: []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("You are terse."), openai.UserMessage("What is the weather in Paris? " + marker)},
		Tools:    weatherTools(t),
		ToolChoice: openai.ChatCompletionToolChoiceOptionUnionParam{
			OfAuto: openai.String("auto"),
		},
		MaxCompletionTokens: openai.Int(300),
	}
	if kind != kindCloudflare { // Workers AI cannot limit the model to one call
		p.ParallelToolCalls = openai.Bool(false)
	}
	return p
}

func testFaithfulTools(t *testing.T, w *faithfulWorld) {
	for _, kind := range kinds {
		t.Run("round trip/"+kind, func(t *testing.T) { t.Parallel(); testToolRoundTrip(t, w, kind) })
		t.Run("parallel/"+kind, func(t *testing.T) { t.Parallel(); testParallelToolCalls(t, w, kind) })
		t.Run("streaming/"+kind, func(t *testing.T) { t.Parallel(); testStreamingToolCalls(t, w, kind) })
		t.Run("tasks API/"+kind, func(t *testing.T) { t.Parallel(); testTasksToolRoundTrip(t, w, kind) })
		t.Run("route/"+kind, func(t *testing.T) { t.Parallel(); testRouteToolRoundTrip(t, w, kind) })
	}
}

// A tool loop through the SDK: tools, the call, the tool's result, the
// final answer, with each turn as the provider received it.
func testToolRoundTrip(t *testing.T, w *faithfulWorld, kind string) {
	ctx := context.Background()
	client, log := w.sdk()
	marker := "[round trip " + kind + "]"
	params := toolParams(t, "main-"+kind, kind, marker)

	first, err := client.Chat.Completions.New(ctx, params)
	if err != nil {
		t.Fatalf("first turn: %v\nlogs:\n%s", err, w.logs)
	}
	if got := first.Choices[0].FinishReason; got != "tool_calls" {
		t.Errorf("first turn finish_reason = %q; want tool_calls", got)
	}
	checkToolCalls(t, first.Choices[0].Message.ToolCalls, []wantToolCall{{"get_weather", `{"city":"fake"}`}})
	callID := first.Choices[0].Message.ToolCalls[0].ID
	got := w.received(t, "main", kind, marker, 1)
	switch kind {
	case kindOpenAI:
		checkSameFields(t, log.sent(t), got, "gpt-test")
	case kindAnthropic:
		checkField(t, kind, got, "tools", anthropicTools)
		checkField(t, kind, got, "tool_choice", `{"type":"auto","disable_parallel_tool_use":true}`)
		checkField(t, kind, got, "system", `[{"type":"text","text":"You are terse."}]`)
		checkField(t, kind, got, "messages", `[{"role":"user","content":"What is the weather in Paris? `+marker+`"}]`)
		checkField(t, kind, got, "max_tokens", `300`)
	case kindCloudflare:
		checkField(t, kind, got, "tools", workersAITools)
		checkField(t, kind, got, "messages", `[{"role":"system","content":"You are terse."},{"role":"user","content":"What is the weather in Paris? `+marker+`"}]`)
		checkField(t, kind, got, "max_tokens", `300`)
	}

	params.Messages = append(params.Messages, first.Choices[0].Message.ToParam(), openai.ToolMessage(`{"temp_c":21}`, callID))
	final, err := client.Chat.Completions.New(ctx, params)
	if err != nil {
		t.Fatalf("second turn: %v\nlogs:\n%s", err, w.logs)
	}
	if c := final.Choices[0]; c.FinishReason != "stop" || !strings.HasPrefix(c.Message.Content, "fake completion ") || len(c.Message.ToolCalls) != 0 {
		t.Errorf("final answer = %q finish_reason %q tool calls %d; want a fake completion, stop, no calls", c.Message.Content, c.FinishReason, len(c.Message.ToolCalls))
	}
	got = w.received(t, "main", kind, marker, 2)
	switch kind {
	case kindOpenAI:
		checkSameFields(t, log.sent(t), got, "gpt-test")
	case kindAnthropic:
		checkField(t, kind, got, "messages", fmt.Sprintf(`[
			{"role":"user","content":"What is the weather in Paris? %s"},
			{"role":"assistant","content":[{"type":"tool_use","id":%q,"name":"get_weather","input":{"city":"fake"}}]},
			{"role":"user","content":[{"type":"tool_result","tool_use_id":%q,"content":"{\"temp_c\":21}"}]}]`, marker, callID, callID))
	case kindCloudflare:
		checkField(t, kind, got, "messages", fmt.Sprintf(`[
			{"role":"system","content":"You are terse."},
			{"role":"user","content":"What is the weather in Paris? %s"},
			{"role":"assistant","content":"{\"name\":\"get_weather\",\"arguments\":{\"city\":\"fake\"}}"},
			{"role":"tool","name":"get_weather","content":"{\"temp_c\":21}"}]`, marker))
	}
}

// The model asks for two calls at once; both results go back in one turn.
func testParallelToolCalls(t *testing.T, w *faithfulWorld, kind string) {
	ctx := context.Background()
	client, _ := w.sdk()
	fp := w.fake("parallel", kind)
	fp.Script(fake.Scripted{ToolCalls: 2})
	marker := "[parallel " + kind + "]"
	params := toolParams(t, "parallel-"+kind, kind, marker)
	params.ParallelToolCalls = openai.Bool(true)
	if kind == kindCloudflare {
		params.ParallelToolCalls = param.Opt[bool]{}
	}
	first, err := client.Chat.Completions.New(ctx, params)
	if err != nil {
		t.Fatalf("first turn: %v\nlogs:\n%s", err, w.logs)
	}
	if got := first.Choices[0].FinishReason; got != "tool_calls" {
		t.Errorf("finish_reason = %q; want tool_calls", got)
	}
	calls := first.Choices[0].Message.ToolCalls
	checkToolCalls(t, calls, []wantToolCall{{"get_weather", `{"city":"fake"}`}, {"get_time", `{"tz":"fake"}`}})
	params.Messages = append(params.Messages, first.Choices[0].Message.ToParam(),
		openai.ToolMessage(`{"temp_c":21}`, calls[0].ID), openai.ToolMessage(`{"time":"12:00"}`, calls[1].ID))
	final, err := client.Chat.Completions.New(ctx, params)
	if err != nil {
		t.Fatalf("second turn: %v\nlogs:\n%s", err, w.logs)
	}
	if c := final.Choices[0]; c.FinishReason != "stop" || !strings.HasPrefix(c.Message.Content, "fake completion ") {
		t.Errorf("final answer = %q finish_reason %q; want a fake completion, stop", c.Message.Content, c.FinishReason)
	}
	got := w.received(t, "parallel", kind, marker, 2)
	if kind == kindAnthropic {
		msgs, _ := got["messages"].([]any)
		if len(msgs) != 3 {
			t.Fatalf("anthropic provider received %d messages; want 3 (user, assistant, user with both results)", len(msgs))
		}
		checkField(t, kind, msgs[2].(map[string]any), "content", fmt.Sprintf(`[
			{"type":"tool_result","tool_use_id":%q,"content":"{\"temp_c\":21}"},
			{"type":"tool_result","tool_use_id":%q,"content":"{\"time\":\"12:00\"}"}]`, calls[0].ID, calls[1].ID))
	}
}

// Tool calls streamed: the SDK's accumulator assembles them from
// Tollgate's chunks.
func testStreamingToolCalls(t *testing.T, w *faithfulWorld, kind string) {
	client, _ := w.sdk()
	marker := "[streaming " + kind + "]"
	params := toolParams(t, "main-"+kind, kind, marker)
	params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	stream := client.Chat.Completions.NewStreaming(context.Background(), params)
	var acc openai.ChatCompletionAccumulator
	finished := 0
	for stream.Next() {
		acc.AddChunk(stream.Current())
		if tool, ok := acc.JustFinishedToolCall(); ok {
			finished++
			if tool.Name != "get_weather" || tool.Index != 0 {
				t.Errorf("finished tool call = %+v; want get_weather at index 0", tool)
			}
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatalf("stream: %v\nlogs:\n%s", err, w.logs)
	}
	if len(acc.Choices) != 1 {
		t.Fatalf("accumulated %d choices; want 1", len(acc.Choices))
	}
	if got := acc.Choices[0].FinishReason; got != "tool_calls" {
		t.Errorf("finish_reason = %q; want tool_calls", got)
	}
	checkToolCalls(t, acc.Choices[0].Message.ToolCalls, []wantToolCall{{"get_weather", `{"city":"fake"}`}})
	if finished != 1 {
		t.Errorf("the accumulator finished %d tool calls; want 1", finished)
	}
	if acc.Usage.PromptTokens == 0 || acc.Usage.CompletionTokens == 0 {
		t.Errorf("usage = %+v; want the provider's counts", acc.Usage)
	}
	got := w.received(t, "main", kind, marker, 1)
	checkField(t, kind, got, "stream", `true`)
}

// nativeToolBody is a POST /v1/tasks body: the OpenAI request's fields
// with their OpenAI names.
func nativeToolBody(model string, messages []any) map[string]any {
	var tools []any
	for _, tl := range []struct{ name, desc, schema string }{{"get_weather", weatherDesc, weatherSchema}, {"get_time", timeDesc, timeSchema}} {
		tools = append(tools, map[string]any{"type": "function", "function": map[string]any{
			"name": tl.name, "description": tl.desc, "parameters": json.RawMessage(tl.schema)}})
	}
	return map[string]any{"model": model, "messages": messages, "tools": tools, "max_tokens": 300}
}

// The same tool loop through the native API.
func testTasksToolRoundTrip(t *testing.T, w *faithfulWorld, kind string) {
	marker := "[tasks " + kind + "]"
	messages := []any{map[string]any{"role": "user", "content": "What is the weather in Paris? " + marker}}
	submit := func(key string) map[string]any {
		t.Helper()
		status, _, task := w.postJSON(t, "/v1/tasks", nativeToolBody("main-"+kind, messages),
			map[string]string{"Idempotency-Key": key, "Prefer": "wait=10"})
		if status != http.StatusOK || task["status"] != "succeeded" {
			t.Fatalf("POST /v1/tasks = %d %v; want 200 succeeded\nlogs:\n%s", status, task, w.logs)
		}
		result, _ := task["result"].(map[string]any)
		return result
	}
	result := submit("tasks-tools-1-" + kind)
	msg, _ := result["message"].(map[string]any)
	calls, _ := msg["tool_calls"].([]any)
	if len(calls) != 1 || result["finish_reason"] != "tool_calls" {
		t.Fatalf("first result = %v; want message.tool_calls with one call and finish_reason tool_calls", result)
	}
	call := calls[0].(map[string]any)
	fn, _ := call["function"].(map[string]any)
	if fn["name"] != "get_weather" || call["id"] == "" {
		t.Fatalf("tool call = %v; want get_weather with an id", call)
	}
	if diff := cmp.Diff(jsonValue(t, `{"city":"fake"}`), answerJSON(t, "tool call arguments", fmt.Sprint(fn["arguments"]))); diff != "" {
		t.Errorf("tool call arguments mismatch (-want +got):\n%s", diff)
	}
	messages = append(messages,
		map[string]any{"role": "assistant", "content": nil, "tool_calls": calls},
		map[string]any{"role": "tool", "tool_call_id": call["id"], "content": `{"temp_c":21}`})
	result = submit("tasks-tools-2-" + kind)
	if out, _ := result["output"].(string); !strings.HasPrefix(out, "fake completion ") || result["finish_reason"] != "stop" {
		t.Errorf("final result = %v; want a fake completion with finish_reason stop", result)
	}
	got := w.received(t, "main", kind, marker, 2)
	if kind == kindOpenAI {
		checkField(t, kind, got, "messages", fmt.Sprintf(`[
			{"role":"user","content":"What is the weather in Paris? %s"},
			{"role":"assistant","tool_calls":[{"id":%q,"type":"function","function":{"name":"get_weather","arguments":%q}}]},
			{"role":"tool","tool_call_id":%q,"content":"{\"temp_c\":21}"}]`, marker, call["id"], fn["arguments"], call["id"]))
		checkField(t, kind, got, "tools", `[{"type":"function","function":{"name":"get_weather","description":"`+weatherDesc+`","parameters":`+weatherSchema+`}},
			{"type":"function","function":{"name":"get_time","description":"`+timeDesc+`","parameters":`+timeSchema+`}}]`)
	}
}

// The same tool loop through a route with tools: the route answers the
// calls, and the client continues with messages.
func testRouteToolRoundTrip(t *testing.T, w *faithfulWorld, kind string) {
	marker := "[route " + kind + "]"
	input := map[string]any{"q": "What is the weather in Paris? " + marker}
	path := "/v1/routes/weather-" + kind
	status, _, first := w.postJSON(t, path, map[string]any{"input": input}, map[string]string{"Idempotency-Key": "route-1-" + kind})
	if status != http.StatusOK {
		t.Fatalf("first route call = %d %v; want 200\nlogs:\n%s", status, first, w.logs)
	}
	calls, _ := first["tool_calls"].([]any)
	if first["finish_reason"] != "tool_calls" || first["data"] != nil || len(calls) != 1 || first["message"] == nil {
		t.Fatalf("first route answer = %v; want tool_calls (one), message, finish_reason tool_calls, data null", first)
	}
	call := calls[0].(map[string]any)
	if fn, _ := call["function"].(map[string]any); fn["name"] != "get_weather" {
		t.Errorf("route tool call = %v; want get_weather", call)
	}
	if kind == kindOpenAI {
		got := w.received(t, "main", kind, marker, 1)
		checkField(t, kind, got, "tools", `[{"type":"function","function":{"name":"get_weather","description":"The weather in a city now.","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}]`)
		checkField(t, kind, got, "messages", `[{"role":"system","content":"You answer questions about the weather."},{"role":"user","content":"What is the weather in Paris? `+marker+`"}]`)
	}
	cont := []any{first["message"], map[string]any{"role": "tool", "tool_call_id": call["id"], "content": `{"temp_c":21}`}}
	status, _, final := w.postJSON(t, path, map[string]any{"input": input, "messages": cont}, map[string]string{"Idempotency-Key": "route-2-" + kind})
	if status != http.StatusOK {
		t.Fatalf("continued route call = %d %v; want 200\nlogs:\n%s", status, final, w.logs)
	}
	if data, _ := final["data"].(string); !strings.HasPrefix(data, "fake completion ") || final["finish_reason"] != "stop" || final["tool_calls"] != nil {
		t.Errorf("final route answer = %v; want data a fake completion, finish_reason stop, no tool_calls", final)
	}
	got := w.received(t, "main", kind, marker, 2)
	if kind == kindOpenAI {
		msgs, _ := got["messages"].([]any)
		if len(msgs) != 4 {
			t.Fatalf("the provider received %d messages on the continued call; want 4 (system, user, assistant, tool): %v", len(msgs), msgs)
		}
		checkField(t, kind, msgs[3].(map[string]any), "tool_call_id", fmt.Sprintf("%q", call["id"]))
	}
}
