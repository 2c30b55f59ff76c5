package provider

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// usageParsers are the parsers of a 2xx answer, one per wire format.
var usageParsers = []struct {
	name  string
	parse func(int, http.Header, []byte) (*Response, error)
}{
	{"openai", parseCompletion},
	{"anthropic", parseMessage},
	{"workers-ai", parseWorkersAI},
}

// FuzzParsers feeds any body to the parser of each wire format's answer,
// whole and streamed, and checks that a parser never panics and never
// answers nothing without an error. What the usage figures read as is
// FuzzUsageFigures' question.
func FuzzParsers(f *testing.F) {
	for _, seed := range []struct {
		kind   uint8
		stream bool
		body   string
	}{
		{0, false, `{"model":"m","choices":[{"message":{"content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":9223372036854775807,"completion_tokens":9223372036854775807}}`},
		{0, false, `{"choices":[{"message":{"content":"hi"}}],"usage":{"prompt_tokens":-1,"completion_tokens":2}}`},
		{0, false, `{"choices":[{"message":{"content":"hi"}}],"usage":{"prompt_tokens":1e30}}`},
		{1, false, `{"type":"message","content":[{"type":"text","text":"hi"}],"usage":{"input_tokens":9223372036854775807,"cache_read_input_tokens":9223372036854775807,"output_tokens":3}}`},
		{1, false, `{"type":"message","content":[{"type":"text","text":"hi"}],"usage":{"input_tokens":1,"cache_creation_input_tokens":-2,"output_tokens":3}}`},
		{2, false, `{"success":true,"result":{"response":"hi","usage":{"prompt_tokens":4611686018427387904,"completion_tokens":4611686018427387904}}}`},
		{2, false, `{"success":true,"result":{"choices":[{"message":{"content":"hi"}}],"usage":{"prompt_tokens":-5}}}`},
		{0, true, "data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n\ndata: {\"choices\":[],\"usage\":{\"prompt_tokens\":-3,\"completion_tokens\":1}}\n\ndata: [DONE]\n\n"},
		{1, true, "data: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":9223372036854775807,\"cache_read_input_tokens\":1}}}\n\n" +
			"data: {\"type\":\"content_block_delta\",\"delta\":{\"type\":\"text_delta\",\"text\":\"hi\"}}\n\n" +
			"data: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":-7}}\n\n" +
			"data: {\"type\":\"message_stop\"}\n\n"},
	} {
		f.Add(seed.kind, seed.stream, []byte(seed.body))
	}
	f.Fuzz(func(t *testing.T, kind uint8, stream bool, body []byte) {
		p := usageParsers[int(kind)%len(usageParsers)]
		if !stream {
			r, err := p.parse(http.StatusOK, http.Header{}, body)
			if err == nil && r == nil {
				t.Fatalf("%s: nil response and nil error for %q", p.name, body)
			}
			return
		}
		if p.name == "workers-ai" {
			return // Workers AI answers are never streamed here
		}
		ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = w.Write(body)
		}))
		defer ts.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		req := Request{Chat: Chat{Model: "m", Messages: []Message{{Role: "user", Content: Text("hi")}}, MaxTokens: 16}}
		if p.name == "openai" {
			_, _ = NewOpenAI(ts.URL, "k", ts.Client()).Stream(ctx, req, nil)
		} else {
			_, _ = NewAnthropic(ts.URL, "k", ts.Client()).Stream(ctx, req, nil)
		}
	})
}
