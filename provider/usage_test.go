package provider

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
)

// A provider's usage figures never come back negative or wrapped: a
// negative figure makes the answer malformed (it would credit the budget),
// a sum of parts that passes int64 saturates at MaxReportedTokens, whole
// answers and streams alike.
func TestUsageIsNeverNegativeOrWrapped(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name      string
		kind      string // openai, anthropic, workers-ai
		stream    bool
		body      string
		malformed bool
		want      Usage
	}{
		{name: "anthropic cached parts overflow", kind: "anthropic",
			body: `{"type":"message","content":[{"type":"text","text":"hi"}],"usage":{"input_tokens":9223372036854775807,"cache_read_input_tokens":9223372036854775807,"output_tokens":3}}`,
			want: Usage{InputTokens: MaxReportedTokens, OutputTokens: 3}},
		{name: "openai figures at the int64 limit", kind: "openai",
			body: `{"choices":[{"message":{"content":"hi"}}],"usage":{"prompt_tokens":9223372036854775807,"completion_tokens":9223372036854775807}}`,
			want: Usage{InputTokens: MaxReportedTokens, OutputTokens: MaxReportedTokens}},
		{name: "workers ai figures at the int64 limit", kind: "workers-ai",
			body: `{"success":true,"result":{"response":"hi","usage":{"prompt_tokens":9223372036854775807,"completion_tokens":1}}}`,
			want: Usage{InputTokens: MaxReportedTokens, OutputTokens: 1}},
		{name: "anthropic negative cache figure", kind: "anthropic", malformed: true,
			body: `{"type":"message","content":[{"type":"text","text":"hi"}],"usage":{"input_tokens":5,"cache_creation_input_tokens":-9,"output_tokens":3}}`},
		{name: "openai stream negative usage", kind: "openai", stream: true, malformed: true,
			body: "data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n\ndata: {\"choices\":[],\"usage\":{\"prompt_tokens\":-3,\"completion_tokens\":1}}\n\ndata: [DONE]\n\n"},
		{name: "anthropic stream negative output", kind: "anthropic", stream: true, malformed: true,
			body: "data: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":4}}}\n\n" +
				"data: {\"type\":\"content_block_delta\",\"delta\":{\"type\":\"text_delta\",\"text\":\"hi\"}}\n\n" +
				"data: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":-7}}\n\n" +
				"data: {\"type\":\"message_stop\"}\n\n"},
		{name: "anthropic stream cached parts overflow", kind: "anthropic", stream: true,
			body: "data: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":9223372036854775807,\"cache_read_input_tokens\":1}}}\n\n" +
				"data: {\"type\":\"content_block_delta\",\"delta\":{\"type\":\"text_delta\",\"text\":\"hi\"}}\n\n" +
				"data: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":2}}\n\n" +
				"data: {\"type\":\"message_stop\"}\n\n",
			want: Usage{InputTokens: MaxReportedTokens, OutputTokens: 2}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			var r *Response
			var err error
			if c.stream {
				ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
					w.Header().Set("Content-Type", "text/event-stream")
					_, _ = w.Write([]byte(c.body))
				}))
				defer ts.Close()
				req := Request{Model: "m", Messages: []Message{{Role: "user", Content: "hi"}}, MaxTokens: 16}
				if c.kind == "openai" {
					r, err = NewOpenAI(ts.URL, "k", ts.Client()).Stream(context.Background(), req, nil)
				} else {
					r, err = NewAnthropic(ts.URL, "k", ts.Client()).Stream(context.Background(), req, nil)
				}
			} else {
				for _, p := range usageParsers {
					if p.name == c.kind {
						r, err = p.parse(http.StatusOK, http.Header{}, []byte(c.body))
					}
				}
			}
			if c.malformed {
				var pe *Error
				if !errors.As(err, &pe) || pe.Code != CodeMalformedResponse {
					t.Fatalf("err = %v, want a malformed response", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("err = %v", err)
			}
			if r.Usage == nil || *r.Usage != c.want {
				t.Fatalf("usage = %+v, want %+v", r.Usage, c.want)
			}
		})
	}
}
