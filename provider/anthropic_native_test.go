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

// Anthropic's own fields (thinking blocks, cache_control, top_k, thinking,
// is_error, anthropic-beta) reach the Messages API as the client wrote
// them, and the adapters that have no place for them refuse them by name.

func ephemeral(ttl string) *provider.CacheControl {
	return &provider.CacheControl{Type: "ephemeral", TTL: ttl}
}

// nativeChat is an Anthropic tool loop as the /v1/messages surface hands
// it over: cached system prompt and tool, thinking passed back, a failed
// tool result with an image, text beside the results.
func nativeChat() provider.Chat {
	return provider.Chat{
		Model: "claude-x", MaxTokens: 4096,
		Messages: []provider.Message{
			{Role: "system", Content: provider.Content{Parts: []provider.Part{{Type: "text", Text: "Be brief.", CacheControl: ephemeral("1h")}}}},
			{Role: "user", Content: provider.Text("Weather in Paris?")},
			{Role: "assistant", Content: provider.Content{Parts: []provider.Part{
				{Type: "thinking", Thinking: "Call the tool.", Signature: "sig/+=AAA"},
				{Type: "redacted_thinking", Data: "EmwKAhgB"},
				{Type: "text", Text: "Checking."},
			}}, ToolCalls: []provider.ToolCall{{ID: "toolu_1", Type: "function", Function: provider.FunctionCall{Name: "get_weather", Arguments: `{"city":"Paris"}`}, CacheControl: ephemeral("")}}},
			{Role: "tool", ToolCallID: "toolu_1", IsError: true, CacheControl: ephemeral(""), Content: provider.Content{Parts: []provider.Part{
				{Type: "text", Text: "timeout"}, {Type: "image_url", ImageURL: &provider.ImageURL{URL: "data:image/png;base64,iVBORw0KGgo="}},
			}}},
			{Role: "user", Content: provider.Content{Parts: []provider.Part{{Type: "text", Text: "Try again."}}}},
		},
		Tools: []provider.Tool{{Type: "function", CacheControl: ephemeral(""), Function: provider.FunctionDef{Name: "get_weather",
			Parameters: json.RawMessage(`{"properties":{"city":{"type":"string"}},"type":"object"}`)}}},
		Params:       provider.Params{TopK: anthPtr(5), User: "u-1"},
		Thinking:     &provider.ThinkingConfig{Type: "enabled", BudgetTokens: 2048},
		CacheControl: ephemeral(""),
		Betas:        []string{"interleaved-thinking-2025-05-14", "token-efficient-tools-2025-02-19"},
	}
}

func TestAnthropicCarriesItsOwnFields(t *testing.T) {
	t.Parallel()
	type got struct {
		body   []byte
		header http.Header
	}
	calls := make(chan got, 1)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		calls <- got{b, r.Header.Clone()}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, anthropicOK)
	}))
	t.Cleanup(ts.Close)
	c := provider.NewAnthropic(ts.URL, apiKey, ts.Client())
	if err := c.Check(nativeChat()); err != nil {
		t.Fatalf("Check: %v", err)
	}
	if _, err := c.Complete(t.Context(), provider.Request{Chat: nativeChat()}); err != nil {
		t.Fatalf("Complete: %v", err)
	}
	call := <-calls
	const want = `{"model":"claude-x","max_tokens":4096,
		"system":[{"type":"text","text":"Be brief.","cache_control":{"type":"ephemeral","ttl":"1h"}}],
		"messages":[
			{"role":"user","content":"Weather in Paris?"},
			{"role":"assistant","content":[
				{"type":"thinking","thinking":"Call the tool.","signature":"sig/+=AAA"},
				{"type":"redacted_thinking","data":"EmwKAhgB"},
				{"type":"text","text":"Checking."},
				{"type":"tool_use","id":"toolu_1","name":"get_weather","input":{"city":"Paris"},"cache_control":{"type":"ephemeral"}}]},
			{"role":"user","content":[
				{"type":"tool_result","tool_use_id":"toolu_1","is_error":true,"cache_control":{"type":"ephemeral"},"content":[
					{"type":"text","text":"timeout"},
					{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw0KGgo="}}]},
				{"type":"text","text":"Try again."}]}],
		"tools":[{"name":"get_weather","input_schema":{"properties":{"city":{"type":"string"}},"type":"object"},"cache_control":{"type":"ephemeral"}}],
		"top_k":5,"thinking":{"type":"enabled","budget_tokens":2048},"metadata":{"user_id":"u-1"},"cache_control":{"type":"ephemeral"}}`
	if diff := cmp.Diff(decodeJSON(t, []byte(want)), decodeJSON(t, call.body)); diff != "" {
		t.Errorf("request body mismatch (-want +got):\n%s", diff)
	}
	if b := call.header.Get("anthropic-beta"); b != "interleaved-thinking-2025-05-14,token-efficient-tools-2025-02-19" {
		t.Errorf("anthropic-beta = %q", b)
	}
	if v := call.header.Get("anthropic-version"); v != provider.AnthropicVersion {
		t.Errorf("anthropic-version = %q", v)
	}
}

// An empty thinking (its display omitted) still sends both fields the
// Messages API requires of a thinking block.
func TestAnthropicSendsAnEmptyThinkingWhole(t *testing.T) {
	t.Parallel()
	c, bodies := captureAnthropic(t)
	chat := provider.Chat{Model: "m", MaxTokens: 64, Messages: []provider.Message{
		anthUser("hi"),
		{Role: "assistant", Content: provider.Content{Parts: []provider.Part{{Type: "thinking", Signature: "s"}, {Type: "text", Text: "yo"}}}},
		anthUser("again"),
	}}
	if _, err := c.Complete(t.Context(), provider.Request{Chat: chat}); err != nil {
		t.Fatal(err)
	}
	const want = `{"model":"m","max_tokens":64,"messages":[{"role":"user","content":"hi"},
		{"role":"assistant","content":[{"type":"thinking","thinking":"","signature":"s"},{"type":"text","text":"yo"}]},
		{"role":"user","content":"again"}]}`
	if diff := cmp.Diff(decodeJSON(t, []byte(want)), decodeJSON(t, <-bodies)); diff != "" {
		t.Errorf("request body mismatch (-want +got):\n%s", diff)
	}
}

func TestAnthropicRefusesMisplacedNativeFields(t *testing.T) {
	t.Parallel()
	with := func(f func(*provider.Chat)) provider.Chat {
		c := provider.Chat{Model: "m", MaxTokens: 4096, Messages: []provider.Message{anthUser("hi")}}
		f(&c)
		return c
	}
	tests := []struct {
		name string
		chat provider.Chat
		want provider.Unsupported
	}{
		{"thinking in a user message", with(func(c *provider.Chat) {
			c.Messages = []provider.Message{{Role: "user", Content: provider.Content{Parts: []provider.Part{{Type: "thinking", Thinking: "x", Signature: "s"}}}}}
		}), provider.Unsupported{Field: "messages[0].content[0]", Reason: "Anthropic takes thinking blocks in assistant messages only"}},
		{"is_error on a user message", with(func(c *provider.Chat) { c.Messages[0].IsError = true }),
			provider.Unsupported{Field: "messages[0].is_error", Reason: "Anthropic's is_error belongs on a tool result"}},
		{"thinking beside reasoning_effort", with(func(c *provider.Chat) {
			c.ReasoningEffort, c.Thinking = "low", &provider.ThinkingConfig{Type: "adaptive"}
		}), provider.Unsupported{Field: "reasoning_effort", Reason: "Anthropic's thinking is already set by thinking; send one of the two"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var u *provider.Unsupported
			if err := provider.NewAnthropic("http://unused", apiKey, nil).Check(tt.chat); !errors.As(err, &u) {
				t.Fatalf("Check = %v, want an *Unsupported", err)
			}
			if diff := cmp.Diff(tt.want, *u); diff != "" {
				t.Errorf("Check mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// The OpenAI-compatible and Workers AI adapters refuse, by name, what they
// have no place for; the first such field of nativeChat, then each alone.
func TestOtherKindsRefuseAnthropicFields(t *testing.T) {
	t.Parallel()
	openai := provider.NewOpenAI("http://unused/v1", apiKey, nil)
	workers := provider.NewCloudflare("http://unused", "acct", apiKey, nil)
	plain := func(f func(*provider.Chat)) provider.Chat {
		c := provider.Chat{Model: "m", MaxTokens: 64, Messages: []provider.Message{anthUser("hi")}}
		f(&c)
		return c
	}
	tests := []struct {
		name    string
		checker provider.Checker
		chat    provider.Chat
		field   string
	}{
		{"openai: the system prompt's cache_control", openai, nativeChat(), "messages[0].content[0].cache_control"},
		{"openai: a thinking block", openai, plain(func(c *provider.Chat) {
			c.Messages = append(c.Messages, provider.Message{Role: "assistant", Content: provider.Content{Parts: []provider.Part{{Type: "thinking", Thinking: "t", Signature: "s"}}}})
		}), "messages[1].content[0]"},
		{"openai: is_error", openai, plain(func(c *provider.Chat) {
			c.Messages = append(c.Messages, provider.Message{Role: "tool", ToolCallID: "x", IsError: true, Content: provider.Text("boom")})
		}), "messages[1].is_error"},
		{"openai: a tool result without content", openai, plain(func(c *provider.Chat) {
			c.Messages = append(c.Messages, provider.Message{Role: "tool", ToolCallID: "x"})
		}), "messages[1].content"},
		{"openai: a tool's cache_control", openai, plain(func(c *provider.Chat) {
			c.Tools = []provider.Tool{{Type: "function", Function: provider.FunctionDef{Name: "f"}, CacheControl: ephemeral("")}}
		}), "tools[0].cache_control"},
		{"openai: anthropic-beta", openai, plain(func(c *provider.Chat) { c.Betas = []string{"x"} }), "anthropic_beta"},
		{"workers: the system prompt's cache_control", workers, nativeChat(), "messages[0].content[0].cache_control"},
		{"workers: thinking", workers, plain(func(c *provider.Chat) { c.Thinking = &provider.ThinkingConfig{Type: "adaptive"} }), "thinking"},
		{"workers: a thinking block", workers, plain(func(c *provider.Chat) {
			c.Messages = append(c.Messages, provider.Message{Role: "assistant", Content: provider.Content{Parts: []provider.Part{{Type: "redacted_thinking", Data: "d"}}}})
		}), "messages[1].content[0].type"},
		{"workers: request cache_control", workers, plain(func(c *provider.Chat) { c.CacheControl = ephemeral("") }), "cache_control"},
		{"workers: anthropic-beta", workers, plain(func(c *provider.Chat) { c.Betas = []string{"x"} }), "anthropic_beta"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var u *provider.Unsupported
			if err := tt.checker.Check(tt.chat); !errors.As(err, &u) || u.Field != tt.field {
				t.Fatalf("Check = %v, want an *Unsupported for %s", err, tt.field)
			}
		})
	}
	// What they can carry: top_k on both, thinking disabled (which asks
	// nothing) on Workers AI.
	ok := plain(func(c *provider.Chat) { c.TopK = anthPtr(3); c.Thinking = &provider.ThinkingConfig{Type: "disabled"} })
	for name, c := range map[string]provider.Checker{"openai": openai, "workers": workers} {
		if err := c.Check(ok); err != nil {
			t.Errorf("%s: Check(top_k, thinking disabled) = %v, want nil", name, err)
		}
	}
}
