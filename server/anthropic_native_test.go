package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/google/go-cmp/cmp"

	"github.com/tollgate/tollgate/provider/fake"
)

// A Messages request from the Anthropic SDK, with what Tollgate does not
// model (a string system prompt, a beta top-level field, a deferred
// tool, thinking's display, beta headers), reaches an Anthropic provider
// as the client sent it, and its answer comes back as the provider sent
// it; on an OpenAI-compatible provider it is refused naming the field.

// wire records the bytes the SDK sent and received, call by call.
type wire struct {
	mu        sync.Mutex
	sent, got [][]byte
}

func (w *wire) middleware(r *http.Request, next option.MiddlewareNext) (*http.Response, error) {
	var body []byte
	if r.Body != nil {
		body, _ = io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
	}
	res, err := next(r)
	if err != nil {
		return res, err
	}
	got, _ := io.ReadAll(res.Body)
	res.Body = io.NopCloser(bytes.NewReader(got))
	w.mu.Lock()
	w.sent, w.got = append(w.sent, body), append(w.got, got)
	w.mu.Unlock()
	return res, nil
}

func (w *wire) last() (sent, got []byte) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.sent[len(w.sent)-1], w.got[len(w.got)-1]
}

// nativeParams is a Claude Code-like request on model, and the options
// that add what the SDK's types do not hold.
func nativeParams(model string) (anthropic.MessageNewParams, []option.RequestOption) {
	p := anthropic.MessageNewParams{Model: anthropic.Model(model), MaxTokens: 2048,
		Messages:      []anthropic.MessageParam{antUserText("say hi <now> & stop")},
		StopSequences: []string{"END"},
		Metadata:      anthropic.MetadataParam{UserID: anthropic.String(`{"device_id":"d1"}`)},
		Tools: []anthropic.ToolUnionParam{antWeatherTool, {OfTool: &anthropic.ToolParam{Name: "Deferred",
			InputSchema: anthropic.ToolInputSchemaParam{Properties: map[string]any{}}, DeferLoading: anthropic.Bool(true)}}}}
	return p, []option.RequestOption{
		option.WithJSONSet("system", "You are terse."),
		option.WithJSONSet("context_management", map[string]any{"edits": []any{map[string]any{"type": "clear_thinking_20251015", "keep": "all"}}}),
		option.WithJSONSet("thinking", map[string]any{"type": "enabled", "budget_tokens": 1024, "display": "omitted"}),
		option.WithHeader("anthropic-beta", "claude-code-20250219,context-management-2025-06-27"),
	}
}

// spliced is what the provider must receive for the client's body: the
// same bytes, model (the provider's name) and stream set.
func spliced(t *testing.T, sent []byte, model string, stream bool) string {
	t.Helper()
	out := string(sent)
	var top map[string]json.RawMessage
	if err := json.Unmarshal(sent, &top); err != nil {
		t.Fatal(err)
	}
	out = strings.Replace(out, `"model":`+string(top["model"]), `"model":"`+model+`"`, 1)
	if s, ok := top["stream"]; ok {
		out = strings.Replace(out, `"stream":`+string(s), `"stream":`+map[bool]string{true: "true", false: "false"}[stream], 1)
	} else {
		out = `{"stream":` + map[bool]string{true: "true", false: "false"}[stream] + "," + out[1:]
	}
	return out
}

func TestAnthropicNativeCarry(t *testing.T) {
	t.Parallel()
	e, key := newMessagesEnv(t, envOptions{})
	w := &wire{}
	client, _, answers := antSDK(e, key, option.WithMaxRetries(0), option.WithMiddleware(w.middleware))
	ctx := context.Background()
	params, opts := nativeParams("claude-model")
	e.fake.Script(fake.Scripted{Text: true, StopSequence: "END"})
	msg, err := client.Messages.New(ctx, params, append(opts, option.WithHeader("Idempotency-Key", "native-1"))...)
	if err != nil {
		t.Fatal(err)
	}
	sent, got := w.last()
	call := e.fake.Calls()[0]
	if diff := cmp.Diff(spliced(t, sent, "claude-test", false), string(call.Body)); diff != "" {
		t.Errorf("provider body mismatch (-want +got):\n%s", diff)
	}
	for _, want := range []string{`"system":"You are terse."`, `"defer_loading":true`, `"display":"omitted"`, `"context_management":`} {
		if !strings.Contains(string(call.Body), want) {
			t.Errorf("provider body lacks %s", want)
		}
	}
	if b := call.Headers["anthropic-beta"]; b != "claude-code-20250219,context-management-2025-06-27" {
		t.Errorf("anthropic-beta = %q, want the client's", b)
	}
	if msg.StopReason != anthropic.StopReasonStopSequence || msg.StopSequence != "END" || msg.Model != "claude-test" {
		t.Errorf("answer stop %q sequence %q model %q, want stop_sequence END from claude-test", msg.StopReason, msg.StopSequence, msg.Model)
	}

	// The same key: the same bytes, from the stored answer.
	if _, err := client.Messages.New(ctx, params, append(opts, option.WithHeader("Idempotency-Key", "native-1"))...); err != nil {
		t.Fatal(err)
	}
	if _, again := w.last(); !bytes.Equal(got, again) || lastHeader(answers).Get("Idempotent-Replayed") != "true" {
		t.Errorf("replay answered\n%s\nwant\n%s", again, got)
	}
	if n := e.fake.CallCount(); n != 1 {
		t.Errorf("provider calls = %d, want 1", n)
	}

	// The replay record: the tools and the unmodeled paths, never the
	// client's body.
	task := taskOf(t, e, key, lastHeader(answers))
	rec := e.do(http.MethodGet, "/v1/tasks/"+task.ID+"/replay", key, nil, nil)
	if rec.status != http.StatusOK {
		t.Fatalf("replay record: %d %s", rec.status, rec.body)
	}
	var r struct {
		Request struct {
			Tools  []any `json:"tools"`
			Native struct {
				Body      string   `json:"body"`
				Unmodeled []string `json:"unmodeled"`
			} `json:"native"`
		} `json:"request"`
	}
	if err := json.Unmarshal(rec.body, &r); err != nil {
		t.Fatal(err)
	}
	wantUnmodeled := []string{"tools[1].defer_loading", "context_management"}
	if len(r.Request.Tools) != 2 || r.Request.Native.Body != "" || !cmp.Equal(slices.Sorted(slices.Values(r.Request.Native.Unmodeled)), slices.Sorted(slices.Values(wantUnmodeled))) {
		t.Errorf("recorded request tools %d native %+v, want 2 tools, no body, unmodeled %v", len(r.Request.Tools), r.Request.Native, wantUnmodeled)
	}
	if u := task.Result.Usage; u.InputTokens == 0 || task.CostMicros == nil || *task.CostMicros != u.InputTokens+2*u.OutputTokens {
		t.Errorf("usage %+v cost %v, want the provider's usage settled", u, task.CostMicros)
	}
	e.checkInvariants()
}

func TestAnthropicNativeStreamRelaysEvents(t *testing.T) {
	t.Parallel()
	e, key := newMessagesEnv(t, envOptions{})
	w := &wire{}
	client, _, _ := antSDK(e, key, option.WithMaxRetries(0), option.WithMiddleware(w.middleware))
	params, opts := nativeParams("claude-model")
	e.fake.Script(fake.Scripted{Text: true, StopSequence: "END"})
	opts = append(opts, option.WithHeader("Idempotency-Key", "native-stream"))
	msg := accumulateStream(t, client, params, opts)
	sent, relayed := w.last()
	call := e.fake.Calls()[0]
	if diff := cmp.Diff(spliced(t, sent, "claude-test", true), string(call.Body)); diff != "" {
		t.Errorf("provider body mismatch (-want +got):\n%s", diff)
	}
	// The fake answers the same body the same way: what it streamed is
	// what the client got.
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodPost, "/v1/messages", bytes.NewReader(call.Body))
	req.Header.Set("Content-Type", "application/json")
	e.fake.Script(fake.Scripted{Text: true, StopSequence: "END"})
	e.fake.ServeHTTP(rec, req)
	if diff := cmp.Diff(rec.Body.String(), string(relayed)); diff != "" {
		t.Errorf("relayed stream mismatch (-fake +client):\n%s", diff)
	}
	if msg.StopReason != anthropic.StopReasonStopSequence || msg.StopSequence != "END" || len(msg.Content) == 0 {
		t.Errorf("streamed answer stop %q sequence %q content %+v", msg.StopReason, msg.StopSequence, msg.Content)
	}
	// The same key: the same events, from the stored answer.
	calls := e.fake.CallCount()
	accumulateStream(t, client, params, opts)
	if _, again := w.last(); string(again) != string(relayed) || e.fake.CallCount() != calls {
		t.Errorf("replayed stream (%d more calls)\n%s\nwant\n%s", e.fake.CallCount()-calls, again, relayed)
	}
	e.checkInvariants()
}

func accumulateStream(t *testing.T, client anthropic.Client, params anthropic.MessageNewParams, opts []option.RequestOption) anthropic.Message {
	t.Helper()
	stream := client.Messages.NewStreaming(context.Background(), params, opts...)
	var msg anthropic.Message
	for stream.Next() {
		if err := msg.Accumulate(stream.Current()); err != nil {
			t.Fatal(err)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	return msg
}

func TestAnthropicNativeRefusedOnOpenAI(t *testing.T) {
	t.Parallel()
	e, key := newMessagesEnv(t, envOptions{})
	client, _, _ := antSDK(e, key, option.WithMaxRetries(0))
	params, opts := nativeParams("gpt-model")
	_, err := client.Messages.New(context.Background(), params, opts...)
	var apiErr *anthropic.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusBadRequest || !strings.Contains(apiErr.RawJSON(), "kind openai) cannot carry ") {
		t.Fatalf("unmodeled request on an OpenAI provider: %v, want a 400 naming the field and the provider", err)
	}
	named := false
	for _, f := range []string{"tools[1].defer_loading", "context_management"} {
		named = named || strings.Contains(apiErr.RawJSON(), "cannot carry "+f)
	}
	if !named {
		t.Errorf("refusal %s names none of the unmodeled fields", apiErr.RawJSON())
	}
	if n := e.fake.CallCount(); n != 0 {
		t.Errorf("provider calls = %d, want none", n)
	}
	// Without what the task request cannot say, it is translated.
	plain := anthropic.MessageNewParams{Model: "gpt-model", MaxTokens: 64, Messages: []anthropic.MessageParam{antUserText("hi")}}
	if _, err := client.Messages.New(context.Background(), plain, option.WithJSONSet("system", "Be brief.")); err != nil {
		t.Fatal(err)
	}
	if body := string(e.fake.Calls()[0].Body); !strings.Contains(body, `"role":"system"`) {
		t.Errorf("OpenAI provider got %s, want the translated chat", body)
	}
	e.checkInvariants()
}
