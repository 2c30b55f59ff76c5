package fake_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/provider/fake"
)

// The Anthropic endpoint scripts thinking, redacted thinking and stop
// sequences, checks thinking blocks passed back as the real API does, and
// records the format headers.

func TestAnthropicScriptsThinkingAndStopSequences(t *testing.T) {
	t.Parallel()
	f, ts := start(t)
	f.Script(fake.Scripted{Thinking: "Let me think.", RedactedThinking: "EmwKAhgB", StopSequence: "END", CachedTokens: 40, CacheWriteTokens: 7})
	r := mustDo(t, ts, "POST", "/v1/messages", "k:1", `{"model":"c","max_tokens":64,"messages":[{"role":"user","content":"hi"}]}`)
	var m struct {
		Content []struct {
			Type, Thinking, Signature, Data, Text string
		}
		StopReason   string  `json:"stop_reason"`
		StopSequence *string `json:"stop_sequence"`
		Usage        map[string]int
	}
	if err := json.Unmarshal([]byte(r.body), &m); err != nil || r.status != 200 {
		t.Fatalf("%d %s: %v", r.status, r.body, err)
	}
	if len(m.Content) != 3 || m.Content[0].Type != "thinking" || m.Content[0].Thinking != "Let me think." ||
		!strings.HasPrefix(m.Content[0].Signature, "fake-signature-") || m.Content[1].Type != "redacted_thinking" ||
		m.Content[1].Data != "EmwKAhgB" || m.Content[2].Type != "text" {
		t.Errorf("content = %+v, want thinking (signed), redacted_thinking, text", m.Content)
	}
	if m.StopReason != "stop_sequence" || m.StopSequence == nil || *m.StopSequence != "END" {
		t.Errorf("stop = %q %v, want stop_sequence END", m.StopReason, m.StopSequence)
	}
	if m.Usage["cache_read_input_tokens"] != 40 || m.Usage["cache_creation_input_tokens"] != 7 {
		t.Errorf("usage = %v, want the scripted cache figures", m.Usage)
	}

	// Passed back unchanged, the block is accepted; altered, refused.
	signed, _ := json.Marshal(map[string]string{"type": "thinking", "thinking": "Let me think.", "signature": m.Content[0].Signature})
	altered, _ := json.Marshal(map[string]string{"type": "thinking", "thinking": "Let me think!", "signature": m.Content[0].Signature})
	loop := func(block []byte) string {
		return `{"model":"c","max_tokens":4096,"thinking":{"type":"enabled","budget_tokens":1024},` +
			`"tools":[{"name":"f","input_schema":{"type":"object"}}],"messages":[{"role":"user","content":"hi"},` +
			`{"role":"assistant","content":[` + string(block) + `,{"type":"tool_use","id":"t1","name":"f","input":{}}]},` +
			`{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"ok"}]}]}`
	}
	if r := mustDo(t, ts, "POST", "/v1/messages", "k:2", loop(signed)); r.status != 200 {
		t.Errorf("thinking passed back unchanged: %d %s, want 200", r.status, r.body)
	}
	if r := mustDo(t, ts, "POST", "/v1/messages", "k:3", loop(altered)); r.status != 400 || !strings.Contains(r.body, "Invalid `signature`") {
		t.Errorf("thinking altered: %d %s, want 400 invalid signature", r.status, r.body)
	}
	if r := mustDo(t, ts, "POST", "/v1/messages", "k:4", loop([]byte(`{"type":"text","text":"x"}`))); r.status != 400 ||
		!strings.Contains(r.body, "must start with a thinking block") {
		t.Errorf("thinking dropped from a tool loop: %d %s, want 400", r.status, r.body)
	}
}

func TestCallsRecordAnthropicHeaders(t *testing.T) {
	t.Parallel()
	f, ts := start(t)
	req, err := http.NewRequest(http.MethodPost, ts.URL+"/v1/messages", strings.NewReader(`{"model":"c","max_tokens":8,"messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("anthropic-version", "2023-06-01")
	req.Header.Add("anthropic-beta", "a-1")
	req.Header.Add("anthropic-beta", "b-2")
	req.Header.Set("x-api-key", "sk-secret")
	res, err := ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	calls := f.Calls()
	if len(calls) != 1 {
		t.Fatalf("calls = %+v", calls)
	}
	want := map[string]string{"anthropic-version": "2023-06-01", "anthropic-beta": "a-1,b-2"}
	if len(calls[0].Headers) != 2 || calls[0].Headers["anthropic-version"] != want["anthropic-version"] || calls[0].Headers["anthropic-beta"] != want["anthropic-beta"] {
		t.Errorf("headers = %v, want %v and no credential", calls[0].Headers, want)
	}
}
