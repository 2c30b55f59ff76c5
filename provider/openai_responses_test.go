package provider_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tollgate/tollgate/provider"
	"github.com/tollgate/tollgate/provider/fake"
)

// codexLikeBody is a Responses request as a coding agent sends it:
// fields chat completions lack, a namespace and a hosted tool, encrypted
// reasoning asked for, odd spacing and HTML characters that a re-encoding
// would change.
const codexLikeBody = `{"model":"asked-name", "stream":true,"input":[{"type":"message","role":"developer","content":[{"type":"input_text","text":"use <tools> & be brief"}]},{"type":"message","role":"user","content":[{"type":"input_text","text":"hi"}]}],
 "tools":[{"type":"function","name":"exec_command","strict":false,"parameters":{"type":"object","properties":{"cmd":{"type":"string"}},"required":["cmd"]}},{"type":"namespace","name":"agents","tools":[{"type":"function","name":"close_agent","parameters":{"type":"object","properties":{}}}]},{"type":"web_search","external_web_access":true}],
 "tool_choice":"auto","parallel_tool_calls":false,"reasoning":{"summary":"auto"},"store":false,"include":["reasoning.encrypted_content"],"prompt_cache_key":"k1","client_metadata":{"a":"b"}}`

func respNativeChat(body string, unmodeled ...string) provider.Chat {
	return provider.Chat{Model: "provider-model", Messages: []provider.Message{{Role: "user", Content: provider.Text("hi")}},
		Native: &provider.Native{API: provider.APIOpenAIResponses, Body: json.RawMessage(body), Unmodeled: unmodeled}}
}

func respClient(t *testing.T, mode string, opts ...fake.Option) (*fake.Server, provider.Client) {
	t.Helper()
	f := fake.New(opts...)
	ts := httptest.NewServer(f)
	t.Cleanup(func() { f.Close(); ts.Close() })
	c, err := provider.New(provider.KindOpenAI, provider.Options{BaseURL: ts.URL + "/v1", APIKey: apiKey, Responses: mode})
	if err != nil {
		t.Fatal(err)
	}
	return f, c
}

// spliced is body with model and stream as the adapter sets them.
func respSpliced(t *testing.T, body, model string, stream bool) string {
	t.Helper()
	b, err := provider.SpliceMember([]byte(body), "model", []byte(`"`+model+`"`))
	if err == nil {
		flag := "false"
		if stream {
			flag = "true"
		}
		b, err = provider.SpliceMember(b, "stream", []byte(flag))
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestResponsesSpliceMember(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, in, key, value, want string
	}{
		{"replaced in place", `{"a":1, "model" : "x" ,"b":"<&>"}`, "model", `"y"`, `{"a":1, "model" : "y" ,"b":"<&>"}`},
		{"added first", `{"a":1}`, "stream", `true`, `{"stream":true,"a":1}`},
		{"added to an empty object", `{ }`, "stream", `false`, `{"stream":false }`},
		{"every duplicate replaced", `{"m":1,"m":{"x":[1]}}`, "m", `2`, `{"m":2,"m":2}`},
		{"nested key untouched", `{"o":{"model":"x"}}`, "model", `"y"`, `{"model":"y","o":{"model":"x"}}`},
		{"removed, first", `{ "stream" : true , "a":1}`, "stream", "", `{ "a":1}`},
		{"removed, last", `{"a":1, "stream":true }`, "stream", "", `{"a":1 }`},
		{"removed, alone", `{"stream":true}`, "stream", "", `{}`},
		{"removed, absent", `{"a":1}`, "stream", "", `{"a":1}`},
		{"removed, duplicates", `{"s":1,"a":2,"s":3}`, "s", "", `{"a":2}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var value []byte
			if tt.value != "" {
				value = []byte(tt.value)
			}
			got, err := provider.SpliceMember([]byte(tt.in), tt.key, value)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Errorf("got %s, want %s", got, tt.want)
			}
		})
	}
	for _, bad := range []string{`[1]`, `{"a":1} x`, `{"a":`} {
		if _, err := provider.SpliceMember([]byte(bad), "model", []byte(`"y"`)); err == nil {
			t.Errorf("SpliceMember(%s) succeeded, want an error", bad)
		}
	}
}

func TestResponsesNativeComplete(t *testing.T) {
	t.Parallel()
	f, c := respClient(t, provider.ResponsesAuto)
	f.Script(fake.Scripted{Text: true, Content: "done", CachedTokens: 7, ReasoningTokens: 5})
	resp, err := c.Complete(context.Background(), provider.Request{Chat: respNativeChat(codexLikeBody, "client_metadata"), IdempotencyKey: "t:1"})
	if err != nil {
		t.Fatal(err)
	}
	calls := f.Calls()
	if len(calls) != 1 {
		t.Fatalf("calls = %d, want 1", len(calls))
	}
	if got, want := string(calls[0].Body), respSpliced(t, codexLikeBody, "provider-model", false); got != want {
		t.Errorf("body sent:\n%s\nwant the client's bytes with model and stream set:\n%s", got, want)
	}
	if calls[0].IdempotencyKey != "t:1" {
		t.Errorf("Idempotency-Key = %q", calls[0].IdempotencyKey)
	}
	if resp.Text() != "done" || resp.FinishReason() != "stop" {
		t.Errorf("text %q finish %q", resp.Text(), resp.FinishReason())
	}
	if u := resp.Usage; u == nil || u.CachedInputTokens != 7 || u.ReasoningTokens != 5 || u.OutputTokens < 5 || u.InputTokens < 7 {
		t.Errorf("usage = %+v, want 7 cached and 5 reasoning tokens within the totals", resp.Usage)
	}
	if resp.Native == nil || resp.Native.API != provider.APIOpenAIResponses {
		t.Fatalf("native = %+v, want the provider's body", resp.Native)
	}
	var o struct {
		Output []map[string]any `json:"output"`
	}
	if err := json.Unmarshal(resp.Native.Body, &o); err != nil || len(o.Output) != 2 || o.Output[0]["type"] != "reasoning" ||
		!strings.HasPrefix(o.Output[0]["encrypted_content"].(string), "fake-encrypted-") {
		t.Errorf("native body output = %v (%v), want the reasoning item, then the message", o.Output, err)
	}
}

func TestResponsesNativeStream(t *testing.T) {
	t.Parallel()
	f, c := respClient(t, provider.ResponsesAuto)
	f.Script(fake.Scripted{Tool: "exec_command", CachedTokens: 3})
	var events []string
	var args strings.Builder
	var callName string
	resp, err := c.(provider.Streamer).Stream(context.Background(), provider.Request{Chat: respNativeChat(codexLikeBody, "tools[1]")}, func(d provider.Delta) {
		if d.Native == nil {
			t.Errorf("delta %+v without its native event", d)
			return
		}
		events = append(events, d.Native.Event)
		if d.ToolCall != nil {
			args.WriteString(d.ToolCall.Arguments)
			if d.ToolCall.Name != "" {
				callName = d.ToolCall.Name
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(f.Calls()[0].Body), respSpliced(t, codexLikeBody, "provider-model", true); got != want {
		t.Errorf("body sent:\n%s\nwant:\n%s", got, want)
	}
	if events[0] != "response.created" || events[len(events)-1] != "response.completed" {
		t.Errorf("events = %v, want response.created ... response.completed", events)
	}
	tc := resp.Choices[0].Message.ToolCalls
	if len(tc) != 1 || tc[0].Function.Name != "exec_command" || tc[0].Function.Arguments != args.String() || callName != "exec_command" {
		t.Errorf("tool calls %+v, streamed %q %q", tc, callName, args.String())
	}
	if resp.FinishReason() != "tool_calls" || resp.Usage == nil || resp.Usage.CachedInputTokens != 3 || resp.Native == nil {
		t.Errorf("finish %q usage %+v native %v", resp.FinishReason(), resp.Usage, resp.Native != nil)
	}
}

func TestResponsesModes(t *testing.T) {
	t.Parallel()
	plain := `{"model":"m","input":"hi"}`
	tests := []struct {
		name, mode string
		unmodeled  []string
		wantPath   string // the endpoint called
	}{
		{"auto: nothing unmodeled goes as chat", provider.ResponsesAuto, nil, "chat"},
		{"auto: unmodeled goes natively", provider.ResponsesAuto, []string{"include"}, "responses"},
		{"native: always natively", provider.ResponsesNative, nil, "responses"},
		{"chat: never natively", provider.ResponsesChat, nil, "chat"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f, c := respClient(t, tt.mode)
			if _, err := c.Complete(context.Background(), provider.Request{Chat: respNativeChat(plain, tt.unmodeled...)}); err != nil {
				t.Fatal(err)
			}
			var body map[string]any
			_ = json.Unmarshal(f.Calls()[0].Body, &body)
			got := "chat"
			if _, ok := body["input"]; ok {
				got = "responses"
			}
			if got != tt.wantPath {
				t.Errorf("sent to %s (body %v), want %s", got, body, tt.wantPath)
			}
		})
	}
}

// TestResponsesCarried: an OpenAI provider carries Responses bodies
// unless its responses option says chat; an Anthropic one never does.
func TestResponsesCarried(t *testing.T) {
	t.Parallel()
	_, auto := respClient(t, provider.ResponsesAuto)
	_, chatOnly := respClient(t, provider.ResponsesChat)
	anthropic, err := provider.New(provider.KindAnthropic, provider.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name   string
		client provider.Client
		want   bool
	}{{"openai", auto, true}, {"openai, responses: chat", chatOnly, false}, {"anthropic", anthropic, false}} {
		if got := provider.CarriedBy(tt.client, provider.APIOpenAIResponses); got != tt.want {
			t.Errorf("%s: CarriedBy(openai.responses) = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestResponsesFailedAndErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		sc       fake.Scripted
		stream   bool
		wantCode string
	}{
		{"rate limited", fake.Scripted{Status: 429, Body: `{"error":{"message":"slow down","type":"requests","code":"rate_limit_exceeded"}}`}, false, provider.CodeRateLimited},
		{"failed response", fake.Scripted{Body: `{"id":"resp_1","object":"response","status":"failed","error":{"code":"server_error","message":"x"},"output":[]}`}, false, ""},
		{"error event", fake.Scripted{Headers: map[string]string{"Content-Type": "text/event-stream"},
			Body: "event: error\ndata: {\"type\":\"error\",\"code\":\"server_error\",\"message\":\"boom\"}\n\n"}, true, ""},
		{"empty output", fake.Scripted{Body: `{"id":"resp_1","object":"response","status":"completed","output":[]}`}, false, provider.CodeEmptyOutput},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f, c := respClient(t, provider.ResponsesNative)
			f.Script(tt.sc)
			req := provider.Request{Chat: respNativeChat(`{"model":"m","input":"hi"}`)}
			var err error
			if tt.stream {
				_, err = c.(provider.Streamer).Stream(context.Background(), req, nil)
			} else {
				_, err = c.Complete(context.Background(), req)
			}
			var pe *provider.Error
			if !errors.As(err, &pe) {
				t.Fatalf("err = %v, want a *provider.Error", err)
			}
			if tt.wantCode != "" && pe.Code != tt.wantCode {
				t.Errorf("code = %q, want %q", pe.Code, tt.wantCode)
			}
			if tt.wantCode == "" && pe.Class != provider.ClassTransient {
				t.Errorf("class = %q, want transient (a server_error)", pe.Class)
			}
		})
	}
}

func TestResponsesFakeRefusesAlteredReasoning(t *testing.T) {
	t.Parallel()
	f, c := respClient(t, provider.ResponsesNative)
	first, err := c.Complete(context.Background(), provider.Request{Chat: respNativeChat(`{"model":"m","input":"hi","include":["reasoning.encrypted_content"]}`)})
	if err != nil {
		t.Fatal(err)
	}
	var o struct {
		Output []json.RawMessage `json:"output"`
	}
	_ = json.Unmarshal(first.Native.Body, &o)
	next := `{"model":"m","include":["reasoning.encrypted_content"],"input":[{"type":"message","role":"user","content":"hi"},` + string(o.Output[0]) + `,{"type":"message","role":"user","content":"more"}]}`
	if _, err := c.Complete(context.Background(), provider.Request{Chat: respNativeChat(next)}); err != nil {
		t.Errorf("the fake's own reasoning item passed back was refused: %v", err)
	}
	altered := strings.Replace(next, "fake-encrypted-", "fake-encrypted-x", 1)
	_, err = c.Complete(context.Background(), provider.Request{Chat: respNativeChat(altered)})
	var pe *provider.Error
	if !errors.As(err, &pe) || pe.Class != provider.ClassRejected {
		t.Errorf("altered encrypted_content: err = %v, want rejected", err)
	}
	if n := f.CallCount(); n != 3 {
		t.Errorf("calls = %d, want 3", n)
	}
	_ = cmp.Diff
}

// TestResponsesNativeOutputLimit: a native body without max_output_tokens
// is sent with the chat's output limit (what the reservation was made
// for); the client's own limit is kept as it wrote it.
func TestResponsesNativeOutputLimit(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, body string
		limit      int
		want       string
	}{
		{"none set, the limit added", `{"model":"m","input":"hi"}`, 512, `{"max_output_tokens":512,"model":"provider-model","input":"hi","stream":false}`},
		{"the client's kept", `{"model":"m","max_output_tokens":64,"input":"hi"}`, 512, `{"model":"provider-model","max_output_tokens":64,"input":"hi","stream":false}`},
		{"no limit, nothing added", `{"model":"m","input":"hi"}`, 0, `{"model":"provider-model","input":"hi","stream":false}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f, c := respClient(t, provider.ResponsesNative)
			f.Script(fake.Scripted{Text: true, Content: "done"})
			chat := respNativeChat(tt.body)
			chat.MaxCompletionTokens = tt.limit
			if _, err := c.Complete(context.Background(), provider.Request{Chat: chat}); err != nil {
				t.Fatal(err)
			}
			var got, want any
			calls := f.Calls()
			if len(calls) != 1 {
				t.Fatalf("calls = %d, want 1", len(calls))
			}
			_ = json.Unmarshal(calls[0].Body, &got)
			_ = json.Unmarshal([]byte(tt.want), &want)
			if !reflect.DeepEqual(got, want) {
				t.Errorf("body sent %s, want %s", calls[0].Body, tt.want)
			}
		})
	}
}
