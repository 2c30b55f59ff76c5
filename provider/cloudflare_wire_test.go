package provider_test

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tollgate/tollgate/provider"
)

const okWorkersAI = `{"result":{"response":"ok","usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}},"success":true,"errors":[],"messages":[]}`

// workersAIRun serves Workers AI with one canned answer and returns the
// client and the server.
func workersAIRun(t *testing.T, answer string) (*provider.Cloudflare, *cannedServer) {
	t.Helper()
	s := serveCanned(t, 200, "application/json", answer)
	return provider.NewCloudflare(s.URL, "acc-1", apiKey, s.Client()), s
}

func TestWorkersAIRequestBody(t *testing.T) {
	t.Parallel()
	user := provider.Message{Role: "user", Content: provider.Text("Weather in Paris and Oslo?")}
	tools := []provider.Tool{
		{Type: "function", Function: provider.FunctionDef{Name: "get_weather", Description: "Weather now",
			Parameters: json.RawMessage(`{"properties":{"city":{"description":"City name","type":"string"}},"required":["city"],"type":"object"}`)}},
		{Type: "function", Function: provider.FunctionDef{Name: "now"}},
	}
	const wantTools = `[
		{"type": "function", "function": {"name": "get_weather", "description": "Weather now",
			"parameters": {"properties": {"city": {"description": "City name", "type": "string"}}, "required": ["city"], "type": "object"}}},
		{"type": "function", "function": {"name": "now", "description": "", "parameters": {"type": "object", "properties": {}}}}]`
	tests := []struct {
		name string
		chat provider.Chat
		want string
	}{
		{
			name: "tool loop: calls and results in the history",
			chat: provider.Chat{
				Model: llama,
				Messages: []provider.Message{
					{Role: "developer", Content: provider.Text("Use tools.")},
					user,
					{Role: "assistant", Content: provider.Text("Checking both."), ToolCalls: []provider.ToolCall{
						toolCall("call_0", "get_weather", `{"city": "Paris"}`),
						toolCall("call_1", "get_weather", `{"city":"Oslo"}`),
					}},
					{Role: "tool", ToolCallID: "call_1", Content: provider.Text("-3C")},
					{Role: "tool", ToolCallID: "call_0", Content: provider.Content{Parts: []provider.Part{{Type: "text", Text: "21"}, {Type: "text", Text: "C"}}}},
					{Role: "assistant", ToolCalls: []provider.ToolCall{toolCall("call_0", "now", ""), toolCall("x", "get_weather", "not json")}},
					{Role: "tool", ToolCallID: "call_0", Content: provider.Text("14:02")},
					{Role: "assistant", Refusal: "I can't share that."},
				},
				MaxCompletionTokens: 200,
				Tools:               tools,
				ToolChoice:          &provider.ToolChoice{Mode: "auto"},
				ParallelToolCalls:   ptr(true),
			},
			want: `{
				"messages": [
					{"role": "system", "content": "Use tools."},
					{"role": "user", "content": "Weather in Paris and Oslo?"},
					{"role": "assistant", "content": "Checking both."},
					{"role": "assistant", "content": "{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Paris\"}}"},
					{"role": "assistant", "content": "{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Oslo\"}}"},
					{"role": "tool", "name": "get_weather", "content": "-3C"},
					{"role": "tool", "name": "get_weather", "content": "21C"},
					{"role": "assistant", "content": "{\"name\":\"now\",\"arguments\":{}}"},
					{"role": "assistant", "content": "{\"name\":\"get_weather\",\"arguments\":\"not json\"}"},
					{"role": "tool", "name": "now", "content": "14:02"},
					{"role": "assistant", "content": "I can't share that."}
				],
				"tools": ` + wantTools + `,
				"max_tokens": 200
			}`,
		},
		{
			name: "tool_choice none sends no tools",
			chat: provider.Chat{Model: llama, Messages: []provider.Message{user}, Tools: tools, ToolChoice: &provider.ToolChoice{Mode: "none"}},
			want: `{"messages": [{"role": "user", "content": "Weather in Paris and Oslo?"}]}`,
		},
		{
			name: "sampling parameters and JSON schema",
			chat: provider.Chat{Model: llama, Messages: []provider.Message{user}, MaxTokens: 64,
				ResponseFormat: &provider.ResponseFormat{Type: "json_schema", JSONSchema: &provider.JSONSchema{Name: "weather", Strict: ptr(true),
					Schema: json.RawMessage(`{"properties":{"temp_c":{"type":"number"}},"required":["temp_c"],"type":"object"}`)}},
				Params: provider.Params{Temperature: ptr(0.3), TopP: ptr(0.8), Seed: ptr(int64(9999999999)), FrequencyPenalty: ptr(0.1), PresencePenalty: ptr(-0.2), Logprobs: ptr(false), N: 1}},
			want: `{"messages": [{"role": "user", "content": "Weather in Paris and Oslo?"}], "max_tokens": 64,
				"response_format": {"type": "json_schema", "json_schema": {"properties": {"temp_c": {"type": "number"}}, "required": ["temp_c"], "type": "object"}},
				"temperature": 0.3, "top_p": 0.8, "seed": 9999999999, "frequency_penalty": 0.1, "presence_penalty": -0.2}`,
		},
		{
			name: "JSON object",
			chat: provider.Chat{Model: llama, Messages: []provider.Message{user}, ResponseFormat: &provider.ResponseFormat{Type: "json_object"}},
			want: `{"messages": [{"role": "user", "content": "Weather in Paris and Oslo?"}], "response_format": {"type": "json_object"}}`,
		},
		{
			name: "text format is the default",
			chat: provider.Chat{Model: llama, Messages: []provider.Message{user}, ResponseFormat: &provider.ResponseFormat{Type: "text"}},
			want: `{"messages": [{"role": "user", "content": "Weather in Paris and Oslo?"}]}`,
		},
		{
			name: "an image as a data URL",
			chat: provider.Chat{Model: "@cf/meta/llama-4-scout-17b-16e-instruct", Messages: []provider.Message{{Role: "user", Content: provider.Content{Parts: []provider.Part{
				{Type: "text", Text: "What is this?"},
				{Type: "image_url", ImageURL: &provider.ImageURL{URL: "data:image/png;base64,iVBORw0KGgo=", Detail: "auto"}},
			}}}}},
			want: `{"messages": [{"role": "user", "content": [
				{"type": "text", "text": "What is this?"},
				{"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}]}]}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, s := workersAIRun(t, okWorkersAI)
			if err := c.Check(tt.chat); err != nil {
				t.Fatalf("Check = %v, want nil", err)
			}
			if _, err := c.Complete(t.Context(), provider.Request{Chat: tt.chat}); err != nil {
				t.Fatalf("Complete: %v", err)
			}
			if diff := cmp.Diff(decodeJSON(t, []byte(tt.want)), s.onlyBody(t)); diff != "" {
				t.Errorf("body mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestWorkersAICheck(t *testing.T) {
	t.Parallel()
	base := func(edit func(*provider.Chat)) provider.Chat {
		c := provider.Chat{Model: llama, Messages: []provider.Message{
			{Role: "system", Content: provider.Text("Be brief.")},
			{Role: "user", Content: provider.Text("hi")},
		}}
		edit(&c)
		return c
	}
	image := func(url, detail string) provider.Content {
		return provider.Content{Parts: []provider.Part{{Type: "text", Text: "see"}, {Type: "image_url", ImageURL: &provider.ImageURL{URL: url, Detail: detail}}}}
	}
	tests := []struct {
		name string
		chat provider.Chat
		want *provider.Unsupported
	}{
		{"logit_bias", base(func(c *provider.Chat) { c.LogitBias = map[string]int{"1": 5} }),
			&provider.Unsupported{Field: "logit_bias", Reason: "Workers AI has no logit_bias"}},
		{"logprobs", base(func(c *provider.Chat) { c.Logprobs = ptr(true) }),
			&provider.Unsupported{Field: "logprobs", Reason: "Workers AI returns no logprobs"}},
		{"top_logprobs", base(func(c *provider.Chat) { c.TopLogprobs = ptr(3) }),
			&provider.Unsupported{Field: "top_logprobs", Reason: "Workers AI returns no logprobs"}},
		{"n", base(func(c *provider.Chat) { c.N = 2 }),
			&provider.Unsupported{Field: "n", Reason: "Workers AI answers one choice per call"}},
		{"stop", base(func(c *provider.Chat) { c.Stop = provider.Stop{"END"} }),
			&provider.Unsupported{Field: "stop", Reason: "Workers AI has no stop sequences"}},
		{"user", base(func(c *provider.Chat) { c.User = "u-1" }),
			&provider.Unsupported{Field: "user", Reason: "Workers AI has no user"}},
		{"safety_identifier", base(func(c *provider.Chat) { c.SafetyIdentifier = "s" }),
			&provider.Unsupported{Field: "safety_identifier", Reason: "Workers AI has no safety_identifier"}},
		{"reasoning_effort", base(func(c *provider.Chat) { c.ReasoningEffort = "high" }),
			&provider.Unsupported{Field: "reasoning_effort", Reason: "Workers AI has no reasoning_effort"}},
		{"verbosity", base(func(c *provider.Chat) { c.Verbosity = "low" }),
			&provider.Unsupported{Field: "verbosity", Reason: "Workers AI has no verbosity"}},
		{"seed out of range", base(func(c *provider.Chat) { c.Seed = ptr(int64(0)) }),
			&provider.Unsupported{Field: "seed", Reason: "Workers AI takes a seed from 1 to 9999999999"}},
		{"passthrough fields, first key first", base(func(c *provider.Chat) {
			c.Extra = map[string]json.RawMessage{"service_tier": json.RawMessage(`"flex"`), "prediction": json.RawMessage(`{}`)}
		}), &provider.Unsupported{Field: "prediction", Reason: "Workers AI has no prediction"}},
		{"image by http URL", base(func(c *provider.Chat) { c.Messages[1].Content = image("https://example.com/a.png", "") }),
			&provider.Unsupported{Field: "messages[1].content[1].image_url", Reason: "Workers AI takes images only as base64 data URLs"}},
		{"image detail", base(func(c *provider.Chat) { c.Messages[1].Content = image("data:image/png;base64,AA==", "high") }),
			&provider.Unsupported{Field: "messages[1].content[1].image_url.detail", Reason: "Workers AI has no image detail"}},
		{"image in a tool result", base(func(c *provider.Chat) {
			c.Messages = append(c.Messages, provider.Message{Role: "tool", ToolCallID: "c", Content: image("data:image/png;base64,AA==", "")})
		}), &provider.Unsupported{Field: "messages[2].content[1]", Reason: "Workers AI tool results are text only"}},
		{"message name", base(func(c *provider.Chat) { c.Messages[1].Name = "ann" }),
			&provider.Unsupported{Field: "messages[1].name", Reason: "Workers AI messages carry no name"}},
		{"refusal beside content", base(func(c *provider.Chat) {
			c.Messages = append(c.Messages, provider.Message{Role: "assistant", Content: provider.Text("Well"), Refusal: "No."})
		}), &provider.Unsupported{Field: "messages[2].refusal", Reason: "Workers AI has no refusal beside an assistant's content"}},
		{"strict tool", base(func(c *provider.Chat) {
			c.Tools = []provider.Tool{{Type: "function", Function: provider.FunctionDef{Name: "f"}}, {Type: "function", Function: provider.FunctionDef{Name: "g", Strict: ptr(true)}}}
		}), &provider.Unsupported{Field: "tools[1].function.strict", Reason: "Workers AI has no strict tool schemas"}},
		{"tool_choice required", base(func(c *provider.Chat) { c.ToolChoice = &provider.ToolChoice{Mode: "required"} }),
			&provider.Unsupported{Field: "tool_choice", Reason: "Workers AI cannot force a tool call"}},
		{"tool_choice named", base(func(c *provider.Chat) { c.ToolChoice = &provider.ToolChoice{Function: "f"} }),
			&provider.Unsupported{Field: "tool_choice", Reason: "Workers AI cannot force a tool call"}},
		{"parallel_tool_calls false", base(func(c *provider.Chat) { c.ParallelToolCalls = ptr(false) }),
			&provider.Unsupported{Field: "parallel_tool_calls", Reason: "Workers AI cannot limit the model to one tool call"}},
		{"schema description", base(func(c *provider.Chat) {
			c.ResponseFormat = &provider.ResponseFormat{Type: "json_schema", JSONSchema: &provider.JSONSchema{Name: "a", Description: "An answer", Schema: json.RawMessage(`{}`)}}
		}), &provider.Unsupported{Field: "response_format.json_schema.description", Reason: "Workers AI takes no description of a JSON schema"}},
		{"tool of another type", base(func(c *provider.Chat) { c.Tools = []provider.Tool{{Type: "web_search"}} }),
			&provider.Unsupported{Field: "tools[0].type", Reason: "Workers AI takes only function tools"}},
		{"unknown response format", base(func(c *provider.Chat) { c.ResponseFormat = &provider.ResponseFormat{Type: "xml"} }),
			&provider.Unsupported{Field: "response_format.type", Reason: "Workers AI has no response format xml"}},
		{"thinking", base(func(c *provider.Chat) { c.Thinking = &provider.ThinkingConfig{Type: "enabled", BudgetTokens: 1024} }),
			&provider.Unsupported{Field: "thinking", Reason: "Workers AI has no extended thinking"}},
		{"tools before the response format and parameters", base(func(c *provider.Chat) {
			c.Tools, c.ResponseFormat, c.N = []provider.Tool{{Type: "web_search"}}, &provider.ResponseFormat{Type: "xml"}, 2
		}), &provider.Unsupported{Field: "tools[0].type", Reason: "Workers AI takes only function tools"}},
		{"seed before the other parameters", base(func(c *provider.Chat) { c.Seed, c.Stop = ptr(int64(0)), provider.Stop{"x"} }),
			&provider.Unsupported{Field: "seed", Reason: "Workers AI takes a seed from 1 to 9999999999"}},
		{"messages before parameters", base(func(c *provider.Chat) {
			c.N, c.LogitBias, c.Messages[0].Name = 3, map[string]int{"1": 1}, "sys"
		}), &provider.Unsupported{Field: "messages[0].name", Reason: "Workers AI messages carry no name"}},
		{"parameters in the order of the request", base(func(c *provider.Chat) {
			c.Verbosity, c.N, c.Stop = "low", 2, provider.Stop{"x"}
		}), &provider.Unsupported{Field: "stop", Reason: "Workers AI has no stop sequences"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, s := workersAIRun(t, okWorkersAI)
			if diff := cmp.Diff(tt.want, asUnsupported(t, c.Check(tt.chat))); diff != "" {
				t.Errorf("Check mismatch (-want +got):\n%s", diff)
			}
			_, err := c.Complete(t.Context(), provider.Request{Chat: tt.chat})
			if pe := asError(t, err); pe.Class != provider.ClassRejected || pe.Code != provider.CodeInvalidRequest {
				t.Errorf("Complete error = %v, want rejected/invalid_request", pe)
			}
			if diff := cmp.Diff(tt.want, asUnsupported(t, err)); diff != "" {
				t.Errorf("Complete's cause mismatch (-want +got):\n%s", diff)
			}
			if n := len(s.received()); n != 0 {
				t.Errorf("server received %d requests, want 0", n)
			}
		})
	}
}

func TestWorkersAIResponses(t *testing.T) {
	t.Parallel()
	ok := func(result string) string {
		return `{"result":` + result + `,"success":true,"errors":[],"messages":[]}`
	}
	answer := func(content, finish string, u *provider.Usage, calls ...provider.ToolCall) *provider.Response {
		return &provider.Response{Status: 200, Usage: u, Choices: []provider.Choice{{FinishReason: finish,
			Message: provider.Message{Role: "assistant", Content: provider.Text(content), ToolCalls: calls}}}}
	}
	tests := []struct {
		name string
		body string
		want *provider.Response
	}{
		{
			name: "a tool call, arguments as an object",
			body: ok(`{"response":null,"tool_calls":[{"arguments":{"city":"Paris","units":["c"]},"name":"get_weather"}],"usage":{"prompt_tokens":310,"completion_tokens":21,"total_tokens":331}}`),
			want: answer("", "tool_calls", &provider.Usage{InputTokens: 310, OutputTokens: 21}, toolCall("call_0", "get_weather", `{"city":"Paris","units":["c"]}`)),
		},
		{
			name: "parallel tool calls get ids by position",
			body: ok(`{"response":"","tool_calls":[{"name":"get_weather","arguments":{"city":"Paris"}},{"name":"get_weather","arguments":{"city":"Oslo"}}]}`),
			want: answer("", "tool_calls", nil, toolCall("call_0", "get_weather", `{"city":"Paris"}`), toolCall("call_1", "get_weather", `{"city":"Oslo"}`)),
		},
		{
			name: "calls in OpenAI's shape keep their ids and argument text",
			body: ok(`{"response":"On it.","tool_calls":[{"id":"chatcmpl-tool-9f","type":"function","function":{"name":"f","arguments":"{\"a\": 1}"}}]}`),
			want: answer("On it.", "tool_calls", nil, toolCall("chatcmpl-tool-9f", "f", `{"a": 1}`)),
		},
		{
			name: "text with usage",
			body: ok(`{"response":"Hello","tool_calls":[],"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}}`),
			want: answer("Hello", "stop", &provider.Usage{InputTokens: 3, OutputTokens: 2}),
		},
		{
			name: "OpenAI-shaped result with tool calls and usage classes",
			body: ok(`{"id":"x","object":"chat.completion","model":"@cf/openai/gpt-oss-120b","choices":[{"index":0,"message":{"role":"assistant","content":null,
				"tool_calls":[{"id":"call_q","type":"function","function":{"name":"f","arguments":"{}"}}]},"finish_reason":"tool_calls"}],
				"usage":{"prompt_tokens":30,"completion_tokens":12,"completion_tokens_details":{"reasoning_tokens":9}}}`),
			want: &provider.Response{Model: "@cf/openai/gpt-oss-120b", Status: 200, Usage: &provider.Usage{InputTokens: 30, OutputTokens: 12, ReasoningTokens: 9},
				Choices: []provider.Choice{{FinishReason: "tool_calls", Message: provider.Message{Role: "assistant", Content: provider.Text(""),
					ToolCalls: []provider.ToolCall{toolCall("call_q", "f", "{}")}}}}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, _ := workersAIRun(t, tt.body)
			got, err := c.Complete(t.Context(), provider.Request{Chat: provider.Chat{Model: llama, Messages: []provider.Message{{Role: "user", Content: provider.Text("hi")}}}})
			if err != nil {
				t.Fatalf("Complete: %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Complete mismatch (-want +got):\n%s", diff)
			}
		})
	}
}
