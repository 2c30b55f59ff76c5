package tasks

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tollgate/tollgate/provider"
	"github.com/tollgate/tollgate/redact"
)

func nativeRequest(body string) Request {
	return Request{Chat: provider.Chat{Model: "m", Messages: []provider.Message{{Role: "user", Content: provider.Text("hi")}},
		Native: &provider.Native{API: provider.APIAnthropicMessages, Body: json.RawMessage(body), Unmodeled: []string{"context_management"}}}}
}

// A native body hashes without its spacing, key order and stream flag,
// and with everything else it holds.
func TestNativeHash(t *testing.T) {
	t.Parallel()
	base := nativeRequest(`{"model":"m","context_management":{"edits":[]},"stream":true}`).Hash()
	for _, tt := range []struct {
		body string
		same bool
	}{
		{`{ "context_management": {"edits": []}, "model": "m" }`, true},
		{`{"model":"m","context_management":{"edits":[]},"stream":false}`, true},
		{`{"model":"m","context_management":{"edits":[{"type":"clear"}]}}`, false},
	} {
		if got := bytes.Equal(nativeRequest(tt.body).Hash(), base); got != tt.same {
			t.Errorf("hash of %s equal = %v, want %v", tt.body, got, tt.same)
		}
	}
}

// The stored request keeps a native body's unmodeled paths, never the
// body; the raw request keeps the body byte for byte.
func TestPrivacyNativeBody(t *testing.T) {
	t.Parallel()
	r, err := redact.New()
	if err != nil {
		t.Fatal(err)
	}
	const addr = "jane@example.com"
	req := nativeRequest(`{"model": "m", "system": "<to> ` + addr + `"}`)
	req.Native.Header = map[string][]string{"Anthropic-Beta": {addr}}
	p := &privacy{policy: redact.PolicyRedact, session: r.RecordPolicy(redact.PolicyRedact), key: []byte("k")}
	b, _ := json.Marshal(p.request(req))
	if strings.Contains(string(b), addr) || strings.Contains(string(b), "system") || !strings.Contains(string(b), `"unmodeled":["context_management"]`) {
		t.Errorf("stored request %s, want the unmodeled paths and no body", b)
	}
	raw, _ := json.Marshal(req)
	var back Request
	if err := json.Unmarshal(raw, &back); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(req.Native.Body), string(back.Native.Body)); diff != "" {
		t.Errorf("raw request's body mismatch (-want +got):\n%s", diff)
	}
}

// A kept answer keeps the provider's native answer, events included.
func TestKeptNativeAnswer(t *testing.T) {
	t.Parallel()
	resp := provider.TextResponse("hi", "stop")
	resp.Native = &provider.NativeAnswer{API: provider.APIAnthropicMessages, Body: json.RawMessage(`{"a": "<b>"}`),
		Events: []provider.NativeEvent{{Event: "ping", Data: []byte(`{"type": "ping"}`)}}}
	b, _ := json.Marshal(keptBodyOf(resp, nil))
	var kept keptBody
	if err := json.Unmarshal(b, &kept); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(resp.Native, kept.response().Native); diff != "" {
		t.Errorf("kept native answer mismatch (-want +got):\n%s", diff)
	}
}
