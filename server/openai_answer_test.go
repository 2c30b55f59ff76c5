package server_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/tollgate/tollgate/accounts"
	"github.com/tollgate/tollgate/provider"
	"github.com/tollgate/tollgate/provider/fake"
	"github.com/tollgate/tollgate/tasks"
)

// toolCallAnswer is an OpenAI answer that calls two tools and says
// nothing, with cached and reasoning tokens and a fingerprint.
func toolCallAnswer() fake.Scripted {
	return fake.Scripted{Body: `{"id":"x","object":"chat.completion","created":1,"model":"test-model","system_fingerprint":"fp_tg1",
		"choices":[{"index":0,"message":{"role":"assistant","content":null,"refusal":null,"tool_calls":[
			{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}},
			{"id":"call_2","type":"function","function":{"name":"get_time","arguments":"{\"tz\":\"CET\"}"}}]},
		"finish_reason":"tool_calls"}],
		"usage":{"prompt_tokens":40,"completion_tokens":12,"total_tokens":52,"prompt_tokens_details":{"cached_tokens":32},"completion_tokens_details":{"reasoning_tokens":5}}}`}
}

// twoChoices is an OpenAI answer with two choices: text, and a refusal.
func twoChoices() fake.Scripted {
	return fake.Scripted{Body: `{"id":"x","object":"chat.completion","created":1,"model":"test-model",
		"choices":[{"index":0,"message":{"role":"assistant","content":"first"},"finish_reason":"stop"},
		{"index":1,"message":{"role":"assistant","content":null,"refusal":"I cannot help with that."},"finish_reason":"stop"}],
		"usage":{"prompt_tokens":9,"completion_tokens":8,"total_tokens":17}}`}
}

func toolParams() openai.ChatCompletionNewParams {
	p := chatParams("What is the weather in Paris, and the time?")
	p.Tools = []openai.ChatCompletionToolUnionParam{
		openai.ChatCompletionFunctionTool(openai.FunctionDefinitionParam{Name: "get_weather",
			Parameters: openai.FunctionParameters{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}}}),
		openai.ChatCompletionFunctionTool(openai.FunctionDefinitionParam{Name: "get_time",
			Parameters: openai.FunctionParameters{"type": "object", "properties": map[string]any{"tz": map[string]any{"type": "string"}}}}),
	}
	return p
}

type wantCall struct{ id, name, args string }

func callsOf(calls []openai.ChatCompletionMessageToolCallUnion) []wantCall {
	var out []wantCall
	for _, c := range calls {
		out = append(out, wantCall{c.ID, c.Function.Name, c.Function.Arguments})
	}
	return out
}

var wantTwoCalls = []wantCall{{"call_1", "get_weather", `{"city":"Paris"}`}, {"call_2", "get_time", `{"tz":"CET"}`}}

// An answer that only calls tools is a success, rendered as OpenAI renders
// it: content null, the tool calls, finish_reason tool_calls, the usage
// classes under OpenAI's details and the fingerprint. Replayed under the
// same key, the body is byte for byte the same, and so is the task's
// result.
func TestOpenAISDKToolCallCompletion(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	key := e.owner("acme", accounts.RoleClient, 1_000_000)
	client, _ := sdk(e, key)
	e.fake.Script(toolCallAnswer())
	ctx := context.Background()

	var raw []*http.Response
	keep := option.WithMiddleware(func(r *http.Request, next option.MiddlewareNext) (*http.Response, error) {
		res, err := next(r)
		if res != nil {
			raw = append(raw, res)
		}
		return res, err
	})
	first, err := client.Chat.Completions.New(ctx, toolParams(), option.WithHeader("Idempotency-Key", "tools-1"), keep)
	if err != nil {
		t.Fatal(err)
	}
	c := first.Choices[0]
	if diff := cmp.Diff(wantTwoCalls, callsOf(c.Message.ToolCalls), cmp.AllowUnexported(wantCall{})); diff != "" {
		t.Errorf("tool calls mismatch (-want +got):\n%s", diff)
	}
	if c.FinishReason != "tool_calls" {
		t.Errorf("finish_reason = %q, want tool_calls", c.FinishReason)
	}
	if c.Message.JSON.Content.Raw() != "null" {
		t.Errorf("content = %s, want null beside tool calls", c.Message.JSON.Content.Raw())
	}
	u := first.Usage
	if u.PromptTokens != 40 || u.CompletionTokens != 12 || u.PromptTokensDetails.CachedTokens != 32 || u.CompletionTokensDetails.ReasoningTokens != 5 {
		t.Errorf("usage = %+v, want 40/12 with 32 cached and 5 reasoning", u)
	}
	// The SDK marks the field deprecated; it is read from the body.
	var fp struct {
		SystemFingerprint string `json:"system_fingerprint"`
	}
	if err := json.Unmarshal([]byte(first.RawJSON()), &fp); err != nil || fp.SystemFingerprint != "fp_tg1" {
		t.Errorf("system_fingerprint = %q (%v), want fp_tg1", fp.SystemFingerprint, err)
	}

	again, err := client.Chat.Completions.New(ctx, toolParams(), option.WithHeader("Idempotency-Key", "tools-1"), keep)
	if err != nil {
		t.Fatal(err)
	}
	if again.RawJSON() != first.RawJSON() {
		t.Errorf("replayed completion differs:\nfirst %s\nagain %s", first.RawJSON(), again.RawJSON())
	}
	if len(raw) != 2 || raw[1].Header.Get("Idempotent-Replayed") != "true" {
		t.Errorf("second answer not a replay")
	}
	if n := e.fake.CallCount(); n != 1 {
		t.Errorf("provider calls = %d, want 1", n)
	}

	// The task's result carries the same message; its row holds no text.
	id := raw[0].Header.Get("X-Tollgate-Task-Id")
	task := e.waitFinished(key, id)
	if task.Result.Message == nil || len(task.Result.Message.ToolCalls) != 2 || task.Result.Message.ToolCalls[1].Function.Arguments != `{"tz":"CET"}` {
		t.Errorf("result message = %+v, want the two tool calls", task.Result.Message)
	}
	if u := task.Result.Usage; u.CachedInputTokens != 32 || u.ReasoningTokens != 5 {
		t.Errorf("result usage = %+v, want the classes carried", u)
	}
	if n := e.scalar(`SELECT count(*) FROM tasks WHERE id = $1::uuid AND (result::text LIKE '%Paris%' OR result ? 'message') AND answer_sealed IS NOT NULL`, id); n != 0 {
		t.Errorf("the result row holds the answer's text")
	}
	if n := e.scalar(`SELECT count(*) FROM tasks WHERE id = $1::uuid AND answer_sealed IS NOT NULL`, id); n != 1 {
		t.Errorf("no sealed answer stored")
	}
}

// Several choices are rendered each with its index, message and finish
// reason; a refusal is the message's refusal, its content null.
func TestOpenAISDKSeveralChoices(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	key := e.owner("acme", accounts.RoleClient, 1_000_000)
	client, _ := sdk(e, key)
	e.fake.Script(twoChoices())
	got, err := client.Chat.Completions.New(context.Background(), chatParams("two, please"))
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Choices) != 2 {
		t.Fatalf("choices = %d, want 2: %s", len(got.Choices), got.RawJSON())
	}
	for i, want := range []struct{ content, refusal, rawContent string }{{"first", "", `"first"`}, {"", "I cannot help with that.", "null"}} {
		c := got.Choices[i]
		if c.Index != int64(i) || c.Message.Content != want.content || c.Message.Refusal != want.refusal || c.Message.JSON.Content.Raw() != want.rawContent {
			t.Errorf("choice %d = index %d content %s refusal %q, want %s / %q", i, c.Index, c.Message.JSON.Content.Raw(), c.Message.Refusal, want.rawContent, want.refusal)
		}
	}
}

// A streamed answer with tool calls, relayed in OpenAI's chunk format, is
// accumulated by the SDK into the same message as the whole completion:
// here a stored answer streamed on an idempotent repeat.
func TestOpenAISDKStreamedToolCallsAccumulate(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	key := e.owner("acme", accounts.RoleClient, 1_000_000)
	client, _ := sdk(e, key)
	e.fake.Script(toolCallAnswer())
	ctx := context.Background()
	whole, err := client.Chat.Completions.New(ctx, toolParams(), option.WithHeader("Idempotency-Key", "stream-tools"))
	if err != nil {
		t.Fatal(err)
	}
	p := toolParams()
	p.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	stream := client.Chat.Completions.NewStreaming(ctx, p, option.WithHeader("Idempotency-Key", "stream-tools"))
	var acc openai.ChatCompletionAccumulator
	var finished []openai.FinishedChatCompletionToolCall
	for stream.Next() {
		if !acc.AddChunk(stream.Current()) {
			t.Fatalf("chunk not accumulated: %s", stream.Current().RawJSON())
		}
		if tc, ok := acc.JustFinishedToolCall(); ok {
			finished = append(finished, tc)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if len(acc.Choices) != 1 {
		t.Fatalf("accumulated %d choices, want 1", len(acc.Choices))
	}
	c := acc.Choices[0]
	if diff := cmp.Diff(callsOf(whole.Choices[0].Message.ToolCalls), callsOf(c.Message.ToolCalls), cmp.AllowUnexported(wantCall{})); diff != "" {
		t.Errorf("streamed tool calls mismatch (-whole +streamed):\n%s", diff)
	}
	if c.FinishReason != "tool_calls" || c.Message.Content != "" {
		t.Errorf("streamed choice: finish %q content %q, want tool_calls and no text", c.FinishReason, c.Message.Content)
	}
	if len(finished) != 2 || finished[0].Name != "get_weather" {
		t.Errorf("JustFinishedToolCall saw %+v, want both calls", finished)
	}
	if acc.Usage.PromptTokensDetails.CachedTokens != 32 || acc.Usage.CompletionTokensDetails.ReasoningTokens != 5 {
		t.Errorf("streamed usage = %+v, want the classes", acc.Usage)
	}
	if n := e.fake.CallCount(); n != 1 {
		t.Errorf("provider calls = %d, want 1", n)
	}
}

// A kept answer (its first recording failed) is recorded later as the
// whole answer: tool calls, usage classes and fingerprint, the same result
// a recording that did not fail gives.
func TestKeptToolCallAnswerIsRecordedWhole(t *testing.T) {
	t.Parallel()
	results := map[string]*tasks.Result{}
	for _, kept := range []bool{false, true} {
		e := newEnv(t, envOptions{queueOnly: true, recordWithin: 300 * time.Millisecond})
		key := e.owner("acme", accounts.RoleClient, 1_000_000)
		e.fake.Script(toolCallAnswer())
		var disarm func()
		if kept {
			var hits func() int64
			disarm, hits = recordingFault(t, e, "constraint")
			defer func() {
				if hits() == 0 {
					t.Error("the fault never fired")
				}
			}()
		}
		id := e.submit(key, "kept-tools", taskBody("weather?", 50))
		if kept {
			e.waitFor("the run's failure in river_job.errors", func() bool {
				return e.scalar(`SELECT COALESCE(max(cardinality(errors)), 0) FROM river_job WHERE args->>'task_id' = $1`, id) >= 1
			})
			if n := e.scalar(`SELECT count(*) FROM task_kept_answers`); n != 1 {
				t.Fatalf("kept answers = %d, want 1", n)
			}
			disarm()
		}
		task := e.waitFinished(key, id)
		if task.Status != tasks.StatusSucceeded {
			t.Fatalf("kept %v: task %s %+v", kept, task.Status, task.Error)
		}
		task.Result.CostMicros = 0 // the same either way; compared below by usage
		results[map[bool]string{false: "recorded", true: "kept"}[kept]] = task.Result
		if n := e.fake.CallCount(); n != 1 {
			t.Errorf("kept %v: provider calls = %d, want 1", kept, n)
		}
	}
	if diff := cmp.Diff(results["recorded"], results["kept"], cmp.AllowUnexported(tasks.Result{})); diff != "" {
		t.Errorf("kept answer's result mismatch (-recorded +kept):\n%s", diff)
	}
	m := results["kept"].Message
	if m == nil || len(m.ToolCalls) != 2 || m.ToolCalls[0].Function.Name != "get_weather" || results["kept"].SystemFingerprint != "fp_tg1" {
		t.Errorf("kept result = %+v, want the tool calls and fingerprint", results["kept"])
	}
}

// The replay record holds the answer's tool calls and refusal, and what was
// sent: the output limit under its name, the tool list's digest.
func TestReplayRecordHoldsToolCallsAndManifestDigest(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	key := e.owner("acme", accounts.RoleClient, 1_000_000)
	e.fake.Script(toolCallAnswer())
	tools := []provider.Tool{{Type: "function", Function: provider.FunctionDef{Name: "get_weather", Description: "Weather of a city",
		Parameters: json.RawMessage(`{"properties":{"city":{"type":"string"}},"type":"object"}`)}}}
	body, _ := json.Marshal(map[string]any{"model": "test-model", "max_tokens": 64, "tools": tools,
		"messages": []map[string]string{{"role": "user", "content": "weather?"}}})
	id := e.submit(key, "record-tools", body)
	task := e.waitFinished(key, id)
	if task.Status != tasks.StatusSucceeded {
		t.Fatalf("task %s %+v", task.Status, task.Error)
	}
	var rec struct {
		Request struct {
			Tools []provider.Tool `json:"tools"`
		} `json:"request"`
		Attempts []struct {
			Parameters struct {
				MaxTokens        int    `json:"max_tokens"`
				OutputLimitParam string `json:"output_limit_param"`
				Tools            int    `json:"tools"`
				ToolsSHA256      string `json:"tools_sha256"`
			} `json:"parameters"`
			Response struct {
				ToolCalls []struct{ ID, Name, Arguments string } `json:"tool_calls"`
				Usage     struct {
					CachedInputTokens int64 `json:"cached_input_tokens"`
					ReasoningTokens   int64 `json:"reasoning_tokens"`
				} `json:"usage"`
				SystemFingerprint string `json:"system_fingerprint"`
			} `json:"response"`
		} `json:"attempts"`
	}
	r := e.do(http.MethodGet, "/v1/tasks/"+id+"/replay", key, nil, nil)
	if err := json.Unmarshal(r.body, &rec); err != nil || len(rec.Attempts) != 1 {
		t.Fatalf("replay: %d %s (%v)", r.status, r.body, err)
	}
	a := rec.Attempts[0]
	if a.Parameters.MaxTokens != 64 || a.Parameters.OutputLimitParam != "max_tokens" || a.Parameters.Tools != 1 ||
		a.Parameters.ToolsSHA256 != tasks.ToolsSHA256(tools) {
		t.Errorf("parameters = %+v, want 64 max_tokens and the tools' digest %s", a.Parameters, tasks.ToolsSHA256(tools))
	}
	if len(rec.Request.Tools) != 1 || rec.Request.Tools[0].Function.Description != "Weather of a city" {
		t.Errorf("stored tools = %+v, want the manifest", rec.Request.Tools)
	}
	if len(a.Response.ToolCalls) != 2 || a.Response.ToolCalls[0].Name != "get_weather" || a.Response.ToolCalls[0].Arguments != `{"city":"Paris"}` {
		t.Errorf("recorded tool calls = %+v", a.Response.ToolCalls)
	}
	if a.Response.Usage.CachedInputTokens != 32 || a.Response.Usage.ReasoningTokens != 5 || a.Response.SystemFingerprint != "fp_tg1" {
		t.Errorf("recorded response = %+v", a.Response)
	}
}
