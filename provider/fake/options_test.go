package fake_test

import (
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tollgate/tollgate/provider/fake"
)

func TestRefusedRequests(t *testing.T) {
	t.Parallel()
	type openaiErr struct {
		Error struct {
			Message string
			Type    string
			Param   *string
			Code    *string
		}
	}
	tests := []struct {
		name, path, body string
		want             any // the error body, decoded
	}{
		{"max_tokens to a reasoning model", "/v1/chat/completions", `{"model":"o-fake","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`,
			map[string]any{"error": map[string]any{
				"message": "Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.",
				"type":    "invalid_request_error", "param": "max_tokens", "code": "unsupported_parameter"}}},
		{"a tool message that answers no call", "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hi"},{"role":"tool","tool_call_id":"call_9","content":"x"}]}`,
			map[string]any{"error": map[string]any{
				"message": "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'.",
				"type":    "invalid_request_error", "param": "messages.[1].role", "code": nil}}},
		{"a tool message for another call", "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hi"},` +
			`{"role":"assistant","tool_calls":[{"id":"call_1","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"call_2","content":"x"}]}`,
			map[string]any{"error": map[string]any{
				"message": "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'.",
				"type":    "invalid_request_error", "param": "messages.[2].role", "code": nil}}},
		{"tool_choice without tools", "/v1/chat/completions", `{"model":"m","tool_choice":"auto","messages":[]}`,
			map[string]any{"error": map[string]any{
				"message": "Invalid value for 'tool_choice': 'tool_choice' is only allowed when 'tools' are specified.",
				"type":    "invalid_request_error", "param": "tool_choice", "code": nil}}},
		{"n out of range", "/v1/chat/completions", `{"model":"m","n":0,"messages":[]}`,
			map[string]any{"error": map[string]any{
				"message": "Invalid 'n': integer must be between 1 and 128, got 0.",
				"type":    "invalid_request_error", "param": "n", "code": "integer_out_of_range"}}},
		{"an unknown content part", "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":[{"type":"video","video":{}}]}]}`, nil},
		{"a temperature of the wrong type", "/v1/chat/completions", `{"model":"m","temperature":"hot","messages":[]}`, nil},
		{"anthropic: an OpenAI field", "/v1/messages", `{"model":"c","max_tokens":8,"response_format":{"type":"json_object"},"messages":[]}`,
			map[string]any{"type": "error", "error": map[string]any{"type": "invalid_request_error", "message": "fake: response_format: Extra inputs are not permitted"}}},
		{"anthropic: a tool_result for no tool_use", "/v1/messages", `{"model":"c","max_tokens":8,"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_9","content":"x"}]}]}`,
			map[string]any{"type": "error", "error": map[string]any{"type": "invalid_request_error",
				"message": "messages.0.content.0: unexpected `tool_use_id` found in `tool_result` blocks: toolu_9. Each `tool_result` block must have a corresponding `tool_use` block in the previous message."}}},
		{"anthropic: a thinking budget over max_tokens", "/v1/messages", `{"model":"c","max_tokens":1024,"thinking":{"type":"enabled","budget_tokens":2048},"messages":[]}`,
			map[string]any{"type": "error", "error": map[string]any{"type": "invalid_request_error", "message": "`max_tokens` must be greater than `thinking.budget_tokens`"}}},
		{"anthropic: a thinking budget under 1024", "/v1/messages", `{"model":"c","max_tokens":4096,"thinking":{"type":"enabled","budget_tokens":100},"messages":[]}`,
			map[string]any{"type": "error", "error": map[string]any{"type": "invalid_request_error", "message": "thinking.enabled.budget_tokens: Input should be greater than or equal to 1024"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := fake.New(fake.WithReasoningModels("o-fake"))
			ts := serve(t, f)
			f.Script(fake.Scripted{ToolCalls: 1}) // a shaping entry does not bypass the checks
			r := mustDo(t, ts, "POST", tt.path, "k:1", tt.body)
			if r.status != 400 {
				t.Fatalf("status %d, body %s; want 400", r.status, r.body)
			}
			var got map[string]any
			if err := json.Unmarshal([]byte(r.body), &got); err != nil {
				t.Fatalf("error body %s: %v", r.body, err)
			}
			if tt.want == nil {
				var e openaiErr
				if json.Unmarshal([]byte(r.body), &e) != nil || e.Error.Type != "invalid_request_error" {
					t.Errorf("body %s, want an OpenAI error", r.body)
				}
				return
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("error body mismatch (-want +got):\n%s", diff)
			}
			if n := f.CallCount(); n != 1 {
				t.Errorf("CallCount() = %d, want the refused call logged", n)
			}
		})
	}
}

// serve serves f over HTTP until the test ends.
func serve(t *testing.T, f *fake.Server) *httptest.Server {
	t.Helper()
	ts := httptest.NewServer(f)
	t.Cleanup(ts.Close)
	t.Cleanup(f.Close)
	return ts
}

func TestReasoningModels(t *testing.T) {
	t.Parallel()
	f := fake.New(fake.WithReasoningModels("o-fake", "claude-think"), fake.WithClock(func() time.Time { return epoch }))
	ts := serve(t, f)
	tests := []struct {
		name, path, body string
		want             string // the usage object
	}{
		{"max_completion_tokens", "/v1/chat/completions", `{"model":"o-fake","max_completion_tokens":10,"messages":[{"role":"user","content":"1234"}]}`,
			`{"prompt_tokens":5,"completion_tokens":10,"total_tokens":15,"prompt_tokens_details":{"cached_tokens":0},"completion_tokens_details":{"reasoning_tokens":5}}`},
		{"no limit", "/v1/chat/completions", `{"model":"o-fake","messages":[{"role":"user","content":"1234"}]}`,
			`{"prompt_tokens":5,"completion_tokens":16,"total_tokens":21,"prompt_tokens_details":{"cached_tokens":0},"completion_tokens_details":{"reasoning_tokens":8}}`},
		{"another model takes max_tokens", "/v1/chat/completions", `{"model":"gpt-x","max_tokens":10,"messages":[{"role":"user","content":"1234"}]}`,
			`{"prompt_tokens":5,"completion_tokens":10,"total_tokens":15}`},
		{"anthropic: reasoning inside output_tokens", "/v1/messages", `{"model":"claude-think","max_tokens":10,"messages":[{"role":"user","content":"1234"}]}`,
			`{"input_tokens":5,"output_tokens":10}`},
		{"workers AI", "/client/v4/accounts/a/ai/run/o-fake", `{"max_tokens":4,"messages":[{"role":"user","content":"1234"}]}`,
			`{"prompt_tokens":5,"completion_tokens":4,"total_tokens":9,"prompt_tokens_details":{"cached_tokens":0},"completion_tokens_details":{"reasoning_tokens":2}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := mustDo(t, ts, "POST", tt.path, "", tt.body)
			if r.status != 200 {
				t.Fatalf("status %d, body %s", r.status, r.body)
			}
			if diff := cmp.Diff(tt.want, usageOf(t, r.body)); diff != "" {
				t.Errorf("usage mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// usageOf returns the usage object of an answer in any format, re-encoded.
func usageOf(t *testing.T, body string) string {
	t.Helper()
	var v struct {
		Usage  json.RawMessage
		Result struct{ Usage json.RawMessage }
	}
	if err := json.Unmarshal([]byte(body), &v); err != nil {
		t.Fatalf("decode %s: %v", body, err)
	}
	if v.Usage == nil {
		return string(v.Result.Usage)
	}
	return string(v.Usage)
}

func TestScriptedUsageAndExtras(t *testing.T) {
	t.Parallel()
	script := fake.Scripted{CachedTokens: 100, CacheWriteTokens: 30, ReasoningTokens: 7, SystemFingerprint: "fp_fake",
		Headers: map[string]string{"X-Request-Id": "req_1"}}
	tests := []struct {
		name, path, body string
		wantUsage        string
	}{
		{"openai", "/v1/chat/completions", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"1234"}]}`,
			`{"prompt_tokens":105,"completion_tokens":12,"total_tokens":117,"prompt_tokens_details":{"cached_tokens":100},"completion_tokens_details":{"reasoning_tokens":7}}`},
		{"anthropic", "/v1/messages", `{"model":"c","max_tokens":5,"messages":[{"role":"user","content":"1234"}]}`,
			`{"input_tokens":5,"output_tokens":12,"cache_creation_input_tokens":30,"cache_read_input_tokens":100}`},
		{"workers AI", workersAIPath, `{"max_tokens":5,"messages":[{"role":"user","content":"1234"}]}`,
			`{"prompt_tokens":105,"completion_tokens":12,"total_tokens":117,"prompt_tokens_details":{"cached_tokens":100},"completion_tokens_details":{"reasoning_tokens":7}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f, ts := start(t)
			f.Script(script)
			r := mustDo(t, ts, "POST", tt.path, "", tt.body)
			if r.status != 200 || r.header.Get("X-Request-Id") != "req_1" {
				t.Fatalf("status %d, headers %v, body %s; want 200 with the scripted header", r.status, r.header, r.body)
			}
			if diff := cmp.Diff(tt.wantUsage, usageOf(t, r.body)); diff != "" {
				t.Errorf("usage mismatch (-want +got):\n%s", diff)
			}
			var fp struct {
				SystemFingerprint *string `json:"system_fingerprint"`
			}
			_ = json.Unmarshal([]byte(r.body), &fp)
			if wantFP := tt.name == "openai"; (fp.SystemFingerprint != nil) != wantFP {
				t.Errorf("system_fingerprint = %v in %s, want it only in the OpenAI format", fp.SystemFingerprint, r.body)
			}
		})
	}
}

func TestRefusal(t *testing.T) {
	t.Parallel()
	f, ts := start(t)
	f.Script(fake.Scripted{Refusal: "I can't help with that."}, fake.Scripted{Refusal: "No."})
	r := mustDo(t, ts, "POST", "/v1/chat/completions", "", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`)
	const want = `{"index":0,"message":{"role":"assistant","content":null,"refusal":"I can't help with that."},"logprobs":null,"finish_reason":"stop"}`
	var c struct{ Choices []json.RawMessage }
	if err := json.Unmarshal([]byte(r.body), &c); err != nil || len(c.Choices) != 1 {
		t.Fatalf("body %s: %v", r.body, err)
	}
	if diff := cmp.Diff(want, string(c.Choices[0])); diff != "" {
		t.Errorf("refusal choice mismatch (-want +got):\n%s", diff)
	}
	w := mustDo(t, ts, "POST", workersAIPath, "", `{"messages":[]}`)
	if got := readWorkersAI(t, w.body).Text; got != "No." {
		t.Errorf("Workers AI refusal = %q, want the text", got)
	}
}

func TestChoicesAndLogprobs(t *testing.T) {
	t.Parallel()
	_, ts := start(t)
	r := mustDo(t, ts, "POST", "/v1/chat/completions", "", `{"model":"m","n":2,"logprobs":true,"top_logprobs":2,"max_tokens":3,"messages":[{"role":"user","content":"hi"}]}`)
	var c struct {
		Choices []struct {
			Index    int
			Message  struct{ Content string }
			Logprobs struct {
				Content []struct {
					Token       string
					Logprob     float64
					Bytes       []int
					TopLogprobs []struct {
						Token   string
						Logprob float64
					} `json:"top_logprobs"`
				}
			}
		}
		Usage struct {
			CompletionTokens int `json:"completion_tokens"`
		}
	}
	if err := json.Unmarshal([]byte(r.body), &c); err != nil || len(c.Choices) != 2 {
		t.Fatalf("body %s: %v; want two choices", r.body, err)
	}
	for i, ch := range c.Choices {
		if ch.Index != i || ch.Message.Content != c.Choices[0].Message.Content {
			t.Errorf("choice %d: index %d, content %q; want index %d and the first choice's content", i, ch.Index, ch.Message.Content, i)
		}
		lp := ch.Logprobs.Content
		if len(lp) != 3 || lp[0].Token != "fake " || lp[0].Logprob != -0.25 || string(rune(lp[0].Bytes[0])) != "f" ||
			len(lp[0].TopLogprobs) != 2 || lp[0].TopLogprobs[0].Token != "fake " || lp[0].TopLogprobs[1].Token != "alt1" {
			t.Errorf("choice %d logprobs = %+v, want one entry per word with two top logprobs", i, lp)
		}
	}
	if c.Usage.CompletionTokens != 6 {
		t.Errorf("completion tokens = %d, want 2 choices × 3", c.Usage.CompletionTokens)
	}
}

// TestCallBody checks that the call log keeps each request as sent, every
// field included, on every endpoint.
func TestCallBody(t *testing.T) {
	t.Parallel()
	bodies := []struct{ path, body string }{
		{"/v1/chat/completions", `{"model":"m","messages":[{"role":"developer","content":"x"},{"role":"user","content":[{"type":"text","text":"hi"},{"type":"image_url","image_url":{"url":"https://example.com/a.png","detail":"high"}}]}],` +
			`"temperature":0.2,"top_p":0.9,"seed":7,"stop":["\n","END"],"presence_penalty":0.1,"frequency_penalty":-0.1,"logit_bias":{"50256":-100},` +
			`"user":"u1","safety_identifier":"s1","reasoning_effort":"low","verbosity":"low","metadata":{"k":"v"},"max_completion_tokens":9,` +
			`"service_tier":"flex","prompt_cache_key":"pk","prediction":{"type":"content","content":"x"},` + openaiTools + `,"tool_choice":"auto","parallel_tool_calls":true}`},
		{"/v1/messages", `{"model":"c","max_tokens":2048,"system":[{"type":"text","text":"x","cache_control":{"type":"ephemeral"}}],"messages":[{"role":"user","content":"hi"}],` +
			`"metadata":{"user_id":"u1"},"stop_sequences":["END"],"temperature":1,"top_k":5,"thinking":{"type":"enabled","budget_tokens":1024},` + anthropicTools + `,"tool_choice":{"type":"auto"}}`},
		{workersAIPath, `{"messages":[{"role":"user","content":"hi"}],"temperature":0.3,"seed":1,"max_tokens":4,` + workersAITools + `}`},
	}
	f, ts := start(t)
	for _, b := range bodies {
		if r := mustDo(t, ts, "POST", b.path, "", b.body); r.status != 200 {
			t.Fatalf("%s: status %d, body %s", b.path, r.status, r.body)
		}
	}
	calls := f.Calls()
	for i, b := range bodies {
		if string(calls[i].Body) != b.body {
			t.Errorf("call %d body = %s, want %s", i, calls[i].Body, b.body)
		}
	}
	// The control API shows the same bodies, as JSON.
	var log struct {
		Calls []struct{ Body map[string]any }
	}
	if err := json.Unmarshal([]byte(mustDo(t, ts, "GET", "/_fake/calls", "", "").body), &log); err != nil || len(log.Calls) != 3 {
		t.Fatalf("calls: %v", err)
	}
	if got := log.Calls[0].Body["temperature"]; got != 0.2 {
		t.Errorf("first call's temperature = %v, want 0.2", got)
	}

	quiet := fake.New(fake.WithoutCallBodies())
	qs := serve(t, quiet)
	mustDo(t, qs, "POST", "/v1/chat/completions", "", bodies[0].body)
	if c := quiet.Calls(); len(c) != 1 || c[0].Body != nil {
		t.Errorf("calls without bodies = %+v, want one call and no body", c)
	}
}

func TestShapedAnswerWithABadStatus(t *testing.T) {
	t.Parallel()
	f, ts := start(t)
	f.Script(fake.Scripted{Status: 700, Content: "x"})
	if r := mustDo(t, ts, "POST", "/v1/chat/completions", "", `{"model":"m","messages":[]}`); r.status != 500 {
		t.Errorf("status %d, body %s; want a 500 that names the bad status", r.status, r.body)
	}
}

func TestScriptShapesOverHTTP(t *testing.T) {
	t.Parallel()
	_, ts := start(t)
	if r := mustDo(t, ts, "POST", "/_fake/script", "", `{"responses":[{"tool_calls":-1}]}`); r.status != 400 {
		t.Errorf("negative tool_calls: %d, want 400", r.status)
	}
	if r := mustDo(t, ts, "POST", "/_fake/script", "", `{"responses":[{"tool":"lookup","tool_calls":2,"system_fingerprint":"fp_1"}]}`); r.status != 204 {
		t.Fatalf("script: %d %s, want 204", r.status, r.body)
	}
	r := mustDo(t, ts, "POST", "/v1/chat/completions", "", `{"model":"m",`+openaiTools+`,"messages":[{"role":"user","content":"x"}]}`)
	got := readOpenAI(t, r.body)
	want := []call{{"call_fake_1", "lookup", `{"q":"fake"}`}, {"call_fake_2", "lookup", `{"q":"fake"}`}}
	if diff := cmp.Diff(want, got.Calls); diff != "" || !strings.Contains(r.body, `"system_fingerprint":"fp_1"`) {
		t.Errorf("calls mismatch (-want +got):\n%s\nbody %s", diff, r.body)
	}
}
