package provider_test

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tollgate/tollgate/provider"
)

// anthropicOK is a real Messages API answer, as a capture server gives it
// back to every request.
const anthropicOK = `{"id":"msg_01XFDUDYJgAACzvnptvVoYEL","type":"message","role":"assistant","model":"claude-sonnet-4-5-20250929","content":[{"type":"text","text":"Bonjour"}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":12,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":3}}`

// captureAnthropic serves anthropicOK and hands each request body it
// receives to the returned channel.
func captureAnthropic(t *testing.T) (*provider.Anthropic, <-chan []byte) {
	t.Helper()
	bodies := make(chan []byte, 1)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		bodies <- b
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, anthropicOK)
	}))
	t.Cleanup(ts.Close)
	return provider.NewAnthropic(ts.URL, apiKey, ts.Client()), bodies
}

func anthPtr[T any](v T) *T { return &v }

func anthUser(s string) provider.Message {
	return provider.Message{Role: "user", Content: provider.Text(s)}
}

// TestAnthropicRequestBody checks, field by field, the body the Messages API
// receives for each kind of request.
func TestAnthropicRequestBody(t *testing.T) {
	t.Parallel()
	weather := provider.Tool{Type: "function", Function: provider.FunctionDef{
		Name: "get_weather", Description: "Current weather in a city",
		Parameters: json.RawMessage(`{"properties":{"city":{"type":"string"}},"required":["city"],"type":"object"}`),
		Strict:     anthPtr(true),
	}}
	clock := provider.Tool{Type: "function", Function: provider.FunctionDef{Name: "now"}}
	tools := []provider.Tool{weather, clock}
	tests := []struct {
		name string
		chat provider.Chat
		want string
	}{
		{
			name: "tool round trip with system, developer and sampling",
			chat: provider.Chat{
				Model: "claude-x", MaxCompletionTokens: 500,
				Messages: []provider.Message{
					{Role: "system", Content: provider.Text("You are a weather bot.")},
					{Role: "developer", Content: provider.Content{Parts: []provider.Part{{Type: "text", Text: "Answer in French."}}}},
					anthUser("Weather in Paris and Rome?"),
					{Role: "assistant", ToolCalls: []provider.ToolCall{
						{ID: "call_1", Type: "function", Function: provider.FunctionCall{Name: "get_weather", Arguments: `{"city": "Paris"}`}},
						{ID: "call_2", Type: "function", Function: provider.FunctionCall{Name: "get_weather", Arguments: `{"city":"Rome"}`}},
					}},
					{Role: "tool", ToolCallID: "call_1", Content: provider.Text("18C")},
					{Role: "tool", ToolCallID: "call_2", Content: provider.Content{Parts: []provider.Part{{Type: "text", Text: "22C"}}}},
					{Role: "assistant", Content: provider.Text("Paris 18C, Rome 22C"), ToolCalls: []provider.ToolCall{
						{ID: "call_3", Type: "function", Function: provider.FunctionCall{Name: "now", Arguments: ""}},
					}},
					{Role: "tool", ToolCallID: "call_3", Content: provider.Text("")},
					anthUser("Thanks"),
				},
				Tools: tools, ParallelToolCalls: anthPtr(false),
				Params: provider.Params{Temperature: anthPtr(0.2), TopP: anthPtr(0.9), Stop: provider.Stop{"END"}, User: "u-1"},
			},
			want: `{"model":"claude-x","max_tokens":500,
				"system":[{"type":"text","text":"You are a weather bot."},{"type":"text","text":"Answer in French."}],
				"messages":[
					{"role":"user","content":"Weather in Paris and Rome?"},
					{"role":"assistant","content":[
						{"type":"tool_use","id":"call_1","name":"get_weather","input":{"city":"Paris"}},
						{"type":"tool_use","id":"call_2","name":"get_weather","input":{"city":"Rome"}}]},
					{"role":"user","content":[
						{"type":"tool_result","tool_use_id":"call_1","content":"18C"},
						{"type":"tool_result","tool_use_id":"call_2","content":[{"type":"text","text":"22C"}]}]},
					{"role":"assistant","content":[
						{"type":"text","text":"Paris 18C, Rome 22C"},
						{"type":"tool_use","id":"call_3","name":"now","input":{}}]},
					{"role":"user","content":[{"type":"tool_result","tool_use_id":"call_3"}]},
					{"role":"user","content":"Thanks"}],
				"tools":[
					{"name":"get_weather","description":"Current weather in a city","input_schema":{"properties":{"city":{"type":"string"}},"required":["city"],"type":"object"},"strict":true},
					{"name":"now","input_schema":{"type":"object","properties":{}}}],
				"tool_choice":{"type":"auto","disable_parallel_tool_use":true},
				"stop_sequences":["END"],"temperature":0.2,"top_p":0.9,"metadata":{"user_id":"u-1"}}`,
		},
		{
			name: "images by base64 data URL and by URL, refusal in history",
			chat: provider.Chat{Model: "m", MaxTokens: 64, Messages: []provider.Message{
				{Role: "user", Content: provider.Content{Parts: []provider.Part{
					{Type: "text", Text: "What is in these?"},
					{Type: "image_url", ImageURL: &provider.ImageURL{URL: "data:image/png;base64,iVBORw0KGgo=", Detail: "auto"}},
					{Type: "image_url", ImageURL: &provider.ImageURL{URL: "https://example.com/cat.jpg?sig=abc"}},
				}}},
				{Role: "assistant", Refusal: "I cannot describe people."},
				anthUser("Only the cat, then."),
			}},
			want: `{"model":"m","max_tokens":64,"messages":[
				{"role":"user","content":[
					{"type":"text","text":"What is in these?"},
					{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw0KGgo="}},
					{"type":"image","source":{"type":"url","url":"https://example.com/cat.jpg?sig=abc"}}]},
				{"role":"assistant","content":[{"type":"text","text":"I cannot describe people."}]},
				{"role":"user","content":"Only the cat, then."}]}`,
		},
		{
			name: "tool_choice required",
			chat: provider.Chat{Model: "m", MaxTokens: 64, Messages: []provider.Message{anthUser("hi")}, Tools: tools[:1],
				ToolChoice: &provider.ToolChoice{Mode: "required"}},
			want: `{"model":"m","max_tokens":64,"messages":[{"role":"user","content":"hi"}],
				"tools":[{"name":"get_weather","description":"Current weather in a city","input_schema":{"properties":{"city":{"type":"string"}},"required":["city"],"type":"object"},"strict":true}],
				"tool_choice":{"type":"any"}}`,
		},
		{
			name: "tool_choice named, one call at a time",
			chat: provider.Chat{Model: "m", MaxTokens: 64, Messages: []provider.Message{anthUser("hi")}, Tools: tools[1:],
				ToolChoice: &provider.ToolChoice{Function: "now"}, ParallelToolCalls: anthPtr(false)},
			want: `{"model":"m","max_tokens":64,"messages":[{"role":"user","content":"hi"}],
				"tools":[{"name":"now","input_schema":{"type":"object","properties":{}}}],
				"tool_choice":{"type":"tool","name":"now","disable_parallel_tool_use":true}}`,
		},
		{
			name: "tool_choice none",
			chat: provider.Chat{Model: "m", MaxTokens: 64, Messages: []provider.Message{anthUser("hi")}, Tools: tools[1:],
				ToolChoice: &provider.ToolChoice{Mode: "none"}, ParallelToolCalls: anthPtr(false)},
			want: `{"model":"m","max_tokens":64,"messages":[{"role":"user","content":"hi"}],
				"tools":[{"name":"now","input_schema":{"type":"object","properties":{}}}],
				"tool_choice":{"type":"none"}}`,
		},
		{
			name: "tool_choice auto and parallel calls are Anthropic's default",
			chat: provider.Chat{Model: "m", MaxTokens: 64, Messages: []provider.Message{anthUser("hi")}, Tools: tools[1:],
				ToolChoice: &provider.ToolChoice{Mode: "auto"}, ParallelToolCalls: anthPtr(true)},
			want: `{"model":"m","max_tokens":64,"messages":[{"role":"user","content":"hi"}],
				"tools":[{"name":"now","input_schema":{"type":"object","properties":{}}}],
				"tool_choice":{"type":"auto"}}`,
		},
		{
			name: "no tools: tool_choice none and parallel_tool_calls ask nothing",
			chat: provider.Chat{Model: "m", MaxTokens: 64, Messages: []provider.Message{anthUser("hi")},
				ToolChoice: &provider.ToolChoice{Mode: "none"}, ParallelToolCalls: anthPtr(false)},
			want: `{"model":"m","max_tokens":64,"messages":[{"role":"user","content":"hi"}]}`,
		},
		{
			name: "reasoning_effort as a thinking budget, with temperature 1 and a safety identifier",
			chat: provider.Chat{Model: "m", MaxCompletionTokens: 10000, Messages: []provider.Message{anthUser("Prove it.")},
				Params: provider.Params{ReasoningEffort: "medium", Temperature: anthPtr(1.0), SafetyIdentifier: "hash-9", User: "hash-9"}},
			want: `{"model":"m","max_tokens":10000,"messages":[{"role":"user","content":"Prove it."}],
				"temperature":1,"thinking":{"type":"enabled","budget_tokens":8192},"metadata":{"user_id":"hash-9"}}`,
		},
		{
			name: "reasoning_effort none and defaults that ask nothing",
			chat: provider.Chat{Model: "m", MaxTokens: 64, Messages: []provider.Message{anthUser("hi")},
				Params: provider.Params{ReasoningEffort: "none", N: 1, Logprobs: anthPtr(false), PresencePenalty: anthPtr(0.0), FrequencyPenalty: anthPtr(0.0)}},
			want: `{"model":"m","max_tokens":64,"messages":[{"role":"user","content":"hi"}]}`,
		},
		{
			name: "json_schema as structured output",
			chat: provider.Chat{Model: "m", MaxTokens: 64, Messages: []provider.Message{anthUser("Extract.")},
				ResponseFormat: &provider.ResponseFormat{Type: "json_schema", JSONSchema: &provider.JSONSchema{
					Name: "contact", Strict: anthPtr(true),
					Schema: json.RawMessage(`{"additionalProperties":false,"properties":{"email":{"type":"string"}},"required":["email"],"type":"object"}`),
				}}},
			want: `{"model":"m","max_tokens":64,"messages":[{"role":"user","content":"Extract."}],
				"output_config":{"format":{"type":"json_schema","schema":{"additionalProperties":false,"properties":{"email":{"type":"string"}},"required":["email"],"type":"object"}}}}`,
		},
		{
			name: "response_format text is the default",
			chat: provider.Chat{Model: "m", MaxTokens: 64, Messages: []provider.Message{anthUser("hi")},
				ResponseFormat: &provider.ResponseFormat{Type: "text"}},
			want: `{"model":"m","max_tokens":64,"messages":[{"role":"user","content":"hi"}]}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, bodies := captureAnthropic(t)
			if err := c.Check(tt.chat); err != nil {
				t.Fatalf("Check: %v", err)
			}
			if _, err := c.Complete(t.Context(), provider.Request{Chat: tt.chat}); err != nil {
				t.Fatalf("Complete: %v", err)
			}
			if diff := cmp.Diff(decodeJSON(t, []byte(tt.want)), decodeJSON(t, <-bodies)); diff != "" {
				t.Errorf("request body mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestAnthropicCheck checks that each field the Messages API cannot carry
// is refused by name, by Check and by Complete alike, before any call.
func TestAnthropicCheck(t *testing.T) {
	t.Parallel()
	base := func() provider.Chat {
		return provider.Chat{Model: "m", MaxTokens: 2048, Messages: []provider.Message{anthUser("hi")}}
	}
	with := func(f func(*provider.Chat)) provider.Chat {
		c := base()
		f(&c)
		return c
	}
	noArgs := provider.Tool{Type: "function", Function: provider.FunctionDef{Name: "now"}}
	toolLoop := []provider.Message{
		anthUser("What time is it?"),
		{Role: "assistant", ToolCalls: []provider.ToolCall{{ID: "c1", Type: "function", Function: provider.FunctionCall{Name: "now", Arguments: "{}"}}}},
		{Role: "tool", ToolCallID: "c1", Content: provider.Text("noon")},
	}
	image := func(url, detail string) provider.Message {
		return provider.Message{Role: "user", Content: provider.Content{Parts: []provider.Part{
			{Type: "text", Text: "look"}, {Type: "image_url", ImageURL: &provider.ImageURL{URL: url, Detail: detail}},
		}}}
	}
	tests := []struct {
		name string
		chat provider.Chat
		want *provider.Unsupported
	}{
		{"n", with(func(c *provider.Chat) { c.N = 2 }),
			&provider.Unsupported{Field: "n", Reason: "Anthropic's Messages API answers one choice per call"}},
		{"n first of several", with(func(c *provider.Chat) { c.N, c.Seed, c.LogitBias = 3, anthPtr(int64(1)), map[string]int{"50256": -100} }),
			&provider.Unsupported{Field: "n", Reason: "Anthropic's Messages API answers one choice per call"}},
		{"logit_bias", with(func(c *provider.Chat) { c.LogitBias = map[string]int{"50256": -100} }),
			&provider.Unsupported{Field: "logit_bias", Reason: "Anthropic's Messages API has no logit_bias"}},
		{"logprobs", with(func(c *provider.Chat) { c.Logprobs = anthPtr(true) }),
			&provider.Unsupported{Field: "logprobs", Reason: "Anthropic's Messages API has no logprobs"}},
		{"top_logprobs", with(func(c *provider.Chat) { c.TopLogprobs = anthPtr(0) }),
			&provider.Unsupported{Field: "top_logprobs", Reason: "Anthropic's Messages API has no logprobs"}},
		{"seed", with(func(c *provider.Chat) { c.Seed = anthPtr(int64(7)) }),
			&provider.Unsupported{Field: "seed", Reason: "Anthropic's Messages API has no seed"}},
		{"presence_penalty", with(func(c *provider.Chat) { c.PresencePenalty = anthPtr(0.5) }),
			&provider.Unsupported{Field: "presence_penalty", Reason: "Anthropic's Messages API has no presence_penalty"}},
		{"frequency_penalty", with(func(c *provider.Chat) { c.FrequencyPenalty = anthPtr(-0.5) }),
			&provider.Unsupported{Field: "frequency_penalty", Reason: "Anthropic's Messages API has no frequency_penalty"}},
		{"verbosity", with(func(c *provider.Chat) { c.Verbosity = "low" }),
			&provider.Unsupported{Field: "verbosity", Reason: "Anthropic's Messages API has no verbosity"}},
		{"passthrough by its key, first in key order", with(func(c *provider.Chat) {
			c.Extra = map[string]json.RawMessage{"service_tier": json.RawMessage(`"flex"`), "prediction": json.RawMessage(`{}`)}
		}), &provider.Unsupported{Field: "prediction", Reason: "Anthropic's Messages API has no prediction"}},
		{"user and safety_identifier differ", with(func(c *provider.Chat) { c.User, c.SafetyIdentifier = "a", "b" }),
			&provider.Unsupported{Field: "safety_identifier", Reason: "Anthropic's metadata.user_id holds one end-user identifier, and user already sets it"}},
		{"temperature above 1", with(func(c *provider.Chat) { c.Temperature = anthPtr(1.5) }),
			&provider.Unsupported{Field: "temperature", Reason: "Anthropic's temperature ranges from 0 to 1"}},
		{"unknown reasoning_effort", with(func(c *provider.Chat) { c.ReasoningEffort = "extreme" }),
			&provider.Unsupported{Field: "reasoning_effort", Reason: "Anthropic's thinking takes minimal, low, medium or high"}},
		{"output limit within the thinking budget", with(func(c *provider.Chat) { c.ReasoningEffort, c.MaxTokens = "low", 2048 }),
			&provider.Unsupported{Field: "reasoning_effort", Reason: "Anthropic's thinking for reasoning_effort low takes a 2048-token budget, and the output limit (2048) must exceed it"}},
		{"thinking with temperature", with(func(c *provider.Chat) { c.ReasoningEffort, c.MaxTokens, c.Temperature = "minimal", 4096, anthPtr(0.5) }),
			&provider.Unsupported{Field: "temperature", Reason: "Anthropic's thinking (reasoning_effort) allows no temperature other than 1"}},
		{"thinking with a low top_p", with(func(c *provider.Chat) { c.ReasoningEffort, c.MaxTokens, c.TopP = "minimal", 4096, anthPtr(0.9) }),
			&provider.Unsupported{Field: "top_p", Reason: "Anthropic's thinking (reasoning_effort) allows no top_p below 0.95"}},
		{"thinking with a forced tool", with(func(c *provider.Chat) {
			c.ReasoningEffort, c.MaxTokens, c.Tools, c.ToolChoice = "minimal", 4096, []provider.Tool{noArgs}, &provider.ToolChoice{Mode: "required"}
		}), &provider.Unsupported{Field: "tool_choice", Reason: "Anthropic's thinking (reasoning_effort) cannot be combined with a forced tool choice"}},
		{"thinking in an open tool loop", with(func(c *provider.Chat) {
			c.ReasoningEffort, c.MaxTokens, c.Tools, c.Messages = "minimal", 4096, []provider.Tool{noArgs}, toolLoop
		}), &provider.Unsupported{Field: "reasoning_effort", Reason: "Anthropic's thinking needs the thinking blocks of the turn that called the tools, and that turn carries none"}},
		{"json_object", with(func(c *provider.Chat) { c.ResponseFormat = &provider.ResponseFormat{Type: "json_object"} }),
			&provider.Unsupported{Field: "response_format", Reason: "Anthropic's Messages API has no JSON mode without a schema; use json_schema"}},
		{"json_schema description", with(func(c *provider.Chat) {
			c.ResponseFormat = &provider.ResponseFormat{Type: "json_schema", JSONSchema: &provider.JSONSchema{Name: "x", Description: "d", Schema: json.RawMessage(`{"type":"object"}`)}}
		}), &provider.Unsupported{Field: "response_format.json_schema.description", Reason: "Anthropic's structured output has no description"}},
		{"tool_choice without tools", with(func(c *provider.Chat) { c.ToolChoice = &provider.ToolChoice{Function: "now"} }),
			&provider.Unsupported{Field: "tool_choice", Reason: "Anthropic's Messages API cannot force a tool call without tools"}},
		{"message name", with(func(c *provider.Chat) {
			c.Messages = []provider.Message{{Role: "user", Name: "ann", Content: provider.Text("hi")}}
		}),
			&provider.Unsupported{Field: "messages[0].name", Reason: "Anthropic's messages have no name"}},
		{"arguments not an object", with(func(c *provider.Chat) {
			c.Messages = append([]provider.Message{}, toolLoop...)
			c.Messages[1].ToolCalls = []provider.ToolCall{
				{ID: "c0", Type: "function", Function: provider.FunctionCall{Name: "now", Arguments: "{}"}},
				{ID: "c1", Type: "function", Function: provider.FunctionCall{Name: "now", Arguments: `["noon"]`}},
			}
		}), &provider.Unsupported{Field: "messages[1].tool_calls[1].function.arguments", Reason: "Anthropic's tool_use input must be a JSON object"}},
		{"image detail", with(func(c *provider.Chat) { c.Messages = []provider.Message{image("https://example.com/a.png", "high")} }),
			&provider.Unsupported{Field: "messages[0].content[1].image_url.detail", Reason: "Anthropic's Messages API has no image detail"}},
		{"image media type", with(func(c *provider.Chat) {
			c.Messages = []provider.Message{image("data:image/svg+xml;base64,PHN2Zy8+", "")}
		}),
			&provider.Unsupported{Field: "messages[0].content[1].image_url.url", Reason: "Anthropic takes base64 images of type image/jpeg, image/png, image/gif, image/webp"}},
		{"image data URL not in base64", with(func(c *provider.Chat) { c.Messages = []provider.Message{image("data:image/png,abc", "")} }),
			&provider.Unsupported{Field: "messages[0].content[1].image_url.url", Reason: "Anthropic takes data URLs in base64 only"}},
		{"image by another scheme", with(func(c *provider.Chat) { c.Messages = []provider.Message{image("file:///etc/passwd", "")} }),
			&provider.Unsupported{Field: "messages[0].content[1].image_url.url", Reason: "Anthropic takes images by http(s) URL or base64 data URL"}},
		{"image in a system message", with(func(c *provider.Chat) {
			m := image("https://example.com/a.png", "")
			m.Role = "system"
			c.Messages = []provider.Message{m, anthUser("hi")}
		}), &provider.Unsupported{Field: "messages[0].content[1]", Reason: "Anthropic takes images in user and tool messages only"}},
		{"tool message without its call id", with(func(c *provider.Chat) {
			c.Messages = []provider.Message{anthUser("hi"), {Role: "tool", Content: provider.Text("x")}}
		}), &provider.Unsupported{Field: "messages[1].tool_call_id", Reason: "Anthropic's tool_result needs the id of the call it answers"}},
		{"unknown role", with(func(c *provider.Chat) {
			c.Messages = []provider.Message{{Role: "function", Content: provider.Text("x")}}
		}),
			&provider.Unsupported{Field: "messages[0].role", Reason: `Anthropic's Messages API has no role "function"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, bodies := captureAnthropic(t)
			var u *provider.Unsupported
			if err := c.Check(tt.chat); !errors.As(err, &u) {
				t.Fatalf("Check = %v, want an *Unsupported", err)
			}
			if diff := cmp.Diff(tt.want, u); diff != "" {
				t.Errorf("Check mismatch (-want +got):\n%s", diff)
			}
			_, err := c.Complete(t.Context(), provider.Request{Chat: tt.chat})
			want := &provider.Error{Class: provider.ClassRejected, Code: "invalid_request"}
			if diff := cmp.Diff(want, asError(t, err), ignoreRaw); diff != "" {
				t.Errorf("Complete error mismatch (-want +got):\n%s", diff)
			}
			if !errors.As(err, &u) || u.Field != tt.want.Field {
				t.Errorf("Complete error %v does not carry the *Unsupported for %s", err, tt.want.Field)
			}
			_, err = c.Stream(t.Context(), provider.Request{Chat: tt.chat}, nil)
			if !errors.As(err, &u) || u.Field != tt.want.Field {
				t.Errorf("Stream error %v does not carry the *Unsupported for %s", err, tt.want.Field)
			}
			select {
			case b := <-bodies:
				t.Errorf("the provider received %s, want no call", b)
			default:
			}
		})
	}
}
