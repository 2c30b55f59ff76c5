package tasks

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tollgate/tollgate/provider"
	"github.com/tollgate/tollgate/redact"
	"github.com/tollgate/tollgate/replay"
	"github.com/tollgate/tollgate/seal"
)

func toolCallResponse() *provider.Response {
	return &provider.Response{Model: "m-1", SystemFingerprint: "fp_1", Status: 200,
		Usage: &provider.Usage{InputTokens: 40, OutputTokens: 12, CachedInputTokens: 32, CacheWriteTokens: 4, ReasoningTokens: 5},
		Choices: []provider.Choice{{Message: provider.Message{Role: "assistant", ToolCalls: []provider.ToolCall{
			{ID: "call_1", Type: "function", Function: provider.FunctionCall{Name: "get_weather", Arguments: `{"city":"Paris"}`}}}},
			FinishReason: "tool_calls", Logprobs: json.RawMessage(`{"content":[]}`)}}}
}

func twoChoiceResponse() *provider.Response {
	return &provider.Response{Status: 200, Choices: []provider.Choice{
		{Message: provider.Message{Role: "assistant", Content: provider.Text("first")}, FinishReason: "stop"},
		{Index: 1, Message: provider.Message{Role: "assistant", Refusal: "no"}, FinishReason: "stop"}}}
}

// A kept answer with tool calls, several choices, logprobs, usage classes
// or a fingerprint comes back whole.
func TestKeptBodyRoundTripWholeAnswer(t *testing.T) {
	t.Parallel()
	for name, resp := range map[string]*provider.Response{"tool calls": toolCallResponse(), "two choices": twoChoiceResponse()} {
		plain, err := json.Marshal(keptBodyOf(resp, nil))
		if err != nil {
			t.Fatal(err)
		}
		var b keptBody
		if err := json.Unmarshal(plain, &b); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(resp, b.response()); diff != "" {
			t.Errorf("%s: response mismatch (-want +got):\n%s", name, diff)
		}
	}
}

// A result holds the first choice as its message, every choice when there
// were several, and stores none of their text.
func TestResultOf(t *testing.T) {
	t.Parallel()
	sealer, err := seal.New(make([]byte, 32))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name     string
		resp     *provider.Response
		choices  int
		rich     bool
		toolCall string
	}{
		{"text", provider.TextResponse("hello", "stop"), 0, false, ""},
		{"tool calls", toolCallResponse(), 0, true, "get_weather"},
		{"two choices", twoChoiceResponse(), 2, true, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res := resultOf(c.resp, "m", Usage{}, 0)
			if res.Message == nil || res.Message.Role != "assistant" || len(res.Choices) != c.choices {
				t.Fatalf("result = %+v", res)
			}
			if c.toolCall != "" && res.Message.ToolCalls[0].Function.Name != c.toolCall {
				t.Errorf("tool calls = %+v", res.Message.ToolCalls)
			}
			res.seal(sealer, "task-1")
			if (res.sealedAnswer != nil) != c.rich {
				t.Errorf("answer sealed = %v, want %v", res.sealedAnswer != nil, c.rich)
			}
			stored, _ := json.Marshal(res.stored())
			for _, text := range []string{"hello", "Paris", "first", `"no"`} {
				if strings.Contains(string(stored), text) {
					t.Errorf("stored result %s holds %q", stored, text)
				}
			}
			// Opened as the owner reads it, the result is the same.
			opened := res.stored()
			task := Task{ID: "task-1", Result: &opened, outputSealed: res.sealedOutput, answerSealed: res.sealedAnswer}
			(&guard{cfg: &Config{Sealer: sealer}}).reveal(&task)
			want := resultOf(c.resp, "m", Usage{}, 0)
			if diff := cmp.Diff(&want, task.Result, cmp.AllowUnexported(Result{}), cmp.FilterPath(func(p cmp.Path) bool {
				return strings.HasPrefix(p.Last().String(), ".sealed")
			}, cmp.Ignore())); diff != "" {
				t.Errorf("revealed result mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// A whole answer is relayed as the deltas a stream would carry.
func TestAnswerDeltas(t *testing.T) {
	t.Parallel()
	got := answerDeltas(&provider.Response{Choices: []provider.Choice{
		{Message: provider.Message{Content: provider.Text("hi"), ToolCalls: []provider.ToolCall{
			{ID: "c1", Function: provider.FunctionCall{Name: "f", Arguments: "{}"}}, {ID: "c2", Function: provider.FunctionCall{Name: "g", Arguments: `{"a":1}`}}}}},
		{Index: 1, Message: provider.Message{Refusal: "no"}},
	}})
	want := []provider.Delta{
		{Content: "hi"},
		{ToolCall: &provider.ToolCallDelta{Index: 0, ID: "c1", Name: "f", Arguments: "{}"}},
		{ToolCall: &provider.ToolCallDelta{Index: 1, ID: "c2", Name: "g", Arguments: `{"a":1}`}},
		{Choice: 1, Refusal: "no"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("deltas mismatch (-want +got):\n%s", diff)
	}
}

// Every string of a request goes through the policy; structure stays; an
// image is described, never kept.
func TestPrivacyRequestCoversEveryString(t *testing.T) {
	t.Parallel()
	r, err := redact.New()
	if err != nil {
		t.Fatal(err)
	}
	const addr = "jane@example.com"
	data := "data:image/png;base64,aGVsbG8=" // "hello"
	req := Request{Chat: provider.Chat{Model: "m",
		Messages: []provider.Message{
			{Role: "user", Content: provider.Content{Parts: []provider.Part{{Type: "text", Text: "to " + addr},
				{Type: "image_url", ImageURL: &provider.ImageURL{URL: "https://x.example.com/a.png?sig=" + addr, Detail: "low"}},
				{Type: "image_url", ImageURL: &provider.ImageURL{URL: data}}}}},
			{Role: "assistant", Refusal: addr, ToolCalls: []provider.ToolCall{{ID: "c", Type: "function", Function: provider.FunctionCall{Name: "f", Arguments: `{"to":"` + addr + `"}`}}}},
			{Role: "tool", ToolCallID: "c", Content: provider.Text(addr)},
		},
		Tools: []provider.Tool{{Type: "function", Function: provider.FunctionDef{Name: "f", Description: addr,
			Parameters: json.RawMessage(`{"description":"` + addr + `","type":"object"}`)}}},
		ToolChoice:     &provider.ToolChoice{Function: "f"},
		ResponseFormat: &provider.ResponseFormat{Type: "json_schema", JSONSchema: &provider.JSONSchema{Name: "s", Description: addr, Schema: json.RawMessage(`{"enum":["` + addr + `"]}`)}},
		Params:         provider.Params{Stop: provider.Stop{addr}, User: addr, SafetyIdentifier: addr},
		Extra:          map[string]json.RawMessage{"prompt_cache_key": json.RawMessage(`"` + addr + `"`)},
	}, Metadata: map[string]any{"k": addr}}
	for _, policy := range []redact.Policy{redact.PolicyRedact, redact.PolicyHashOnly} {
		p := &privacy{policy: policy, session: r.RecordPolicy(policy), key: []byte("k")}
		stored := p.request(req)
		b, _ := json.Marshal(stored)
		if strings.Contains(string(b), addr) || strings.Contains(string(b), "aGVsbG8=") {
			t.Errorf("%s: stored request holds the address or the image: %s", policy, b)
		}
		if len(stored.Messages) != 3 || len(stored.Messages[0].Content.Parts) != 3 || len(stored.Messages[1].ToolCalls) != 1 || len(stored.Tools) != 1 {
			t.Errorf("%s: structure lost: %s", policy, b)
		}
		want := []replay.Image{{Message: 0, Detail: "low", URL: stored.Messages[0].Content.Parts[1].ImageURL.URL},
			{Message: 0, MediaType: "image/png", Bytes: 5, SHA256: "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"}}
		if diff := cmp.Diff(want, p.images); diff != "" {
			t.Errorf("%s: images mismatch (-want +got):\n%s", policy, diff)
		}
	}
}

// The tools' digest ignores key order and sees every change.
func TestToolsSHA256(t *testing.T) {
	t.Parallel()
	tool := func(desc, params string) []provider.Tool {
		return []provider.Tool{{Type: "function", Function: provider.FunctionDef{Name: "f", Description: desc, Parameters: json.RawMessage(params)}}}
	}
	base := ToolsSHA256(tool("d", `{"a":1,"b":2}`))
	if got := ToolsSHA256(tool("d", `{"b":2,"a":1}`)); got != base {
		t.Error("key order changed the digest")
	}
	for _, other := range [][]provider.Tool{tool("e", `{"a":1,"b":2}`), tool("d", `{"a":1,"b":3}`)} {
		if ToolsSHA256(other) == base {
			t.Errorf("a changed tool list has the same digest")
		}
	}
}
