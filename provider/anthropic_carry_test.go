package provider_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tollgate/tollgate/provider"
)

// A natively carried Messages request reaches the provider as the client
// wrote it, model and stream set, and its answer comes back as sent.

// carriedBody is a client's body with what Tollgate does not model: a
// string system prompt, a beta field, a deferred tool, a beta block
// field; spacing and key order as a client might write them.
const carriedBody = `{"model": "claude-x", "max_tokens": 64, "system": "Be <brief> & kind",
 "context_management": {"edits": [{"type": "clear_thinking_20251015", "keep": "all"}]},
 "tools": [{"name": "Read", "input_schema": {"type": "object"}, "defer_loading": true}],
 "messages": [{"role": "user", "content": [{"type": "text", "text": "hi", "citations_beta": 1}]}], "stream": true}`

func carriedChat() provider.Chat {
	return provider.Chat{Model: "claude-provider", MaxTokens: 64, Messages: []provider.Message{{Role: "user", Content: provider.Text("hi")}},
		Native: &provider.Native{API: provider.APIAnthropicMessages, Body: json.RawMessage(carriedBody),
			Header: map[string][]string{"Anthropic-Beta": {"context-management-2025-06-27"}, "Anthropic-Version": {"2023-06-01"}}}}
}

// wantCarried is carriedBody as the provider must get it, model and
// stream spliced where they stand.
func wantCarried(stream string) string {
	b := strings.Replace(carriedBody, `"model": "claude-x"`, `"model": "claude-provider"`, 1)
	return strings.Replace(b, `"stream": true`, `"stream": `+stream, 1)
}

const carriedAnswer = `{"id":"msg_01","type":"message","role":"assistant","model":"claude-provider","content":[{"type":"text","text":"hi <there>","citations":null}],` +
	`"stop_reason":"stop_sequence","stop_sequence":"END","usage":{"input_tokens":7,"output_tokens":3},"context_management":{"applied_edits":[]}}`

func TestAnthropicCarriesANativeBody(t *testing.T) {
	t.Parallel()
	var got struct {
		body   string
		header http.Header
	}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got.body, got.header = string(b), r.Header.Clone()
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, carriedAnswer)
	}))
	defer ts.Close()
	resp, err := provider.NewAnthropic(ts.URL, "k", ts.Client()).Complete(context.Background(), provider.Request{Chat: carriedChat()})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(wantCarried("false"), got.body); diff != "" {
		t.Errorf("body sent mismatch (-want +got):\n%s", diff)
	}
	if b, v := got.header.Get("anthropic-beta"), got.header.Get("anthropic-version"); b != "context-management-2025-06-27" || v != "2023-06-01" {
		t.Errorf("headers beta %q version %q, want the client's", b, v)
	}
	if resp.Native == nil || string(resp.Native.Body) != carriedAnswer || resp.Native.API != provider.APIAnthropicMessages {
		t.Errorf("native answer %+v, want the body as sent", resp.Native)
	}
	if c := resp.Choices[0]; resp.Text() != "hi <there>" || c.StopReason != "stop_sequence" || c.StopSequence != "END" || resp.Usage.InputTokens != 7 {
		t.Errorf("neutral answer %+v usage %+v, want its text, stop and usage", c, resp.Usage)
	}
}

// nativeEvents is a stream as a provider sends it, a ping and an event
// Tollgate does not know included.
var nativeEvents = []provider.NativeEvent{
	{Event: "message_start", Data: []byte(`{"type":"message_start","message":{"id":"msg_01","model":"claude-provider","usage":{"input_tokens":7,"output_tokens":1}}}`)},
	{Event: "ping", Data: []byte(`{"type": "ping"}`)},
	{Event: "content_block_start", Data: []byte(`{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`)},
	{Event: "content_block_delta", Data: []byte(`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"hi"}}`)},
	{Event: "beta_future", Data: []byte(`{"type":"beta_future","x":1}`)},
	{Event: "content_block_stop", Data: []byte(`{"type":"content_block_stop","index":0}`)},
	{Event: "message_delta", Data: []byte(`{"type":"message_delta","delta":{"stop_reason":"stop_sequence","stop_sequence":"END"},"usage":{"output_tokens":3}}`)},
	{Event: "message_stop", Data: []byte(`{"type":"message_stop"}`)},
}

func TestAnthropicStreamsANativeBody(t *testing.T) {
	t.Parallel()
	var body string
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		body = string(b)
		w.Header().Set("Content-Type", "text/event-stream")
		for _, ev := range nativeEvents {
			fmt.Fprintf(w, "event: %s\ndata: %s\n\n", ev.Event, ev.Data)
		}
	}))
	defer ts.Close()
	var deltas []provider.Delta
	resp, err := provider.NewAnthropic(ts.URL, "k", ts.Client()).Stream(context.Background(), provider.Request{Chat: carriedChat()},
		func(d provider.Delta) { deltas = append(deltas, d) })
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(wantCarried("true"), body); diff != "" {
		t.Errorf("body sent mismatch (-want +got):\n%s", diff)
	}
	var relayed []provider.NativeEvent
	for _, d := range deltas {
		if d.Native != nil {
			relayed = append(relayed, *d.Native)
		}
	}
	if diff := cmp.Diff(nativeEvents, relayed); diff != "" {
		t.Errorf("native events mismatch (-want +got):\n%s", diff)
	}
	if d := deltas[3]; d.Content != "hi" || d.Native == nil {
		t.Errorf("text delta %+v, want its text beside its event", d)
	}
	if c := resp.Choices[0]; resp.Text() != "hi" || c.StopReason != "stop_sequence" || c.StopSequence != "END" || resp.Usage.OutputTokens != 3 {
		t.Errorf("neutral answer %+v usage %+v", c, resp.Usage)
	}
}

func TestAnthropicNativeBodyRoundTripsJSON(t *testing.T) {
	t.Parallel()
	n := carriedChat().Native
	b, err := json.Marshal(provider.Chat{Native: n})
	if err != nil {
		t.Fatal(err)
	}
	var back provider.Chat
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(n, back.Native); diff != "" {
		t.Errorf("native after JSON mismatch (-want +got):\n%s", diff)
	}
	a := provider.NativeAnswer{API: provider.APIAnthropicMessages, Body: json.RawMessage(carriedAnswer)}
	b, _ = json.Marshal(a)
	var aback provider.NativeAnswer
	if err := json.Unmarshal(b, &aback); err != nil || string(aback.Body) != carriedAnswer {
		t.Errorf("answer after JSON %s (%v), want the bytes sent", aback.Body, err)
	}
}
