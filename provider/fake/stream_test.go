package fake_test

import (
	"bufio"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tollgate/tollgate/provider/fake"
)

// events splits a Server-Sent Events body into its data payloads, with the
// event name when there is one.
func events(t *testing.T, body string) (names []string, data []string) {
	t.Helper()
	sc := bufio.NewScanner(strings.NewReader(body))
	name := ""
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			names = append(names, name)
			data = append(data, strings.TrimPrefix(line, "data: "))
			name = ""
		}
	}
	return names, data
}

func TestStreamedToolCalls(t *testing.T) {
	t.Parallel()
	const user = `{"role":"user","content":"Weather?"}`
	const args = `{"city":"fake","unit":"c"}`
	tests := []struct {
		name, path, body string
		script           []fake.Scripted
		// assemble rebuilds the calls and the usage from the events.
		assemble func(t *testing.T, names, data []string) ([]call, string)
		want     []call
		wantUse  string
	}{
		{"openai", "/v1/chat/completions", `{"model":"m","stream":true,"stream_options":{"include_usage":true},` + openaiTools + `,"messages":[` + user + `]}`,
			[]fake.Scripted{{ToolCalls: 2, CachedTokens: 3}}, assembleOpenAI,
			[]call{{"call_fake_1", "get_weather", args}, {"call_fake_2", "lookup", `{"q":"fake"}`}},
			`{"prompt_tokens":114,"completion_tokens":16,"total_tokens":130,"prompt_tokens_details":{"cached_tokens":3},"completion_tokens_details":{"reasoning_tokens":0}}`},
		{"anthropic", "/v1/messages", `{"model":"c","max_tokens":2000,"stream":true,"thinking":{"type":"enabled","budget_tokens":1024},` + anthropicTools + `,"messages":[` + user + `]}`,
			[]fake.Scripted{{CacheWriteTokens: 9}}, assembleAnthropic,
			[]call{{"toolu_fake_1", "get_weather", args}},
			`{"cache_creation_input_tokens":9,"input_tokens":94,"output_tokens":1}/{"output_tokens":16}`},
		{"workers AI", workersAIPath, `{"stream":true,` + workersAITools + `,"messages":[` + user + `]}`,
			nil, assembleWorkersAI,
			[]call{{"", "get_weather", args}},
			`{"prompt_tokens":92,"completion_tokens":16,"total_tokens":108}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f, ts := start(t)
			f.Script(tt.script...)
			r := mustDo(t, ts, "POST", tt.path, "", tt.body)
			if r.status != 200 || r.header.Get("Content-Type") != "text/event-stream" {
				t.Fatalf("status %d, headers %v, body %s; want a 200 event stream", r.status, r.header, r.body)
			}
			names, data := events(t, r.body)
			calls, use := tt.assemble(t, names, data)
			if diff := cmp.Diff(tt.want, calls); diff != "" {
				t.Errorf("calls mismatch (-want +got):\n%s\nstream:\n%s", diff, r.body)
			}
			if use != tt.wantUse {
				t.Errorf("usage = %s, want %s", use, tt.wantUse)
			}
		})
	}
}

func assembleOpenAI(t *testing.T, _, data []string) ([]call, string) {
	t.Helper()
	var calls []call
	fragments := 0
	finish, use := "", ""
	for _, d := range data {
		if d == "[DONE]" {
			continue
		}
		var c struct {
			Choices []struct {
				Delta struct {
					ToolCalls []struct {
						Index    int
						ID, Type string
						Function struct{ Name, Arguments string }
					} `json:"tool_calls"`
				}
				FinishReason *string `json:"finish_reason"`
			}
			Usage json.RawMessage
		}
		if err := json.Unmarshal([]byte(d), &c); err != nil {
			t.Fatalf("chunk %s: %v", d, err)
		}
		if string(c.Usage) != "null" && c.Usage != nil {
			use = string(c.Usage)
		}
		for _, ch := range c.Choices {
			if ch.FinishReason != nil {
				finish = *ch.FinishReason
			}
			for _, tc := range ch.Delta.ToolCalls {
				if tc.ID != "" {
					calls = append(calls, call{ID: tc.ID, Name: tc.Function.Name})
					continue
				}
				calls[tc.Index].Args += tc.Function.Arguments
				fragments++
			}
		}
	}
	if finish != "tool_calls" || fragments < 2*len(calls) {
		t.Errorf("finish %q after %d argument fragments, want tool_calls and several fragments per call", finish, fragments)
	}
	return calls, use
}

func assembleAnthropic(t *testing.T, names, data []string) ([]call, string) {
	t.Helper()
	var calls []call
	var use []string
	stop, thinking := "", false
	for i, d := range data {
		var e struct {
			Type         string
			Index        int
			ContentBlock struct{ Type, ID, Name string } `json:"content_block"`
			Delta        struct {
				Type        string
				PartialJSON string `json:"partial_json"`
				StopReason  string `json:"stop_reason"`
			}
			Message struct{ Usage json.RawMessage }
			Usage   json.RawMessage
		}
		if err := json.Unmarshal([]byte(d), &e); err != nil || e.Type != names[i] {
			t.Fatalf("event %s %s: %v; want the type to match the event name", names[i], d, err)
		}
		switch e.Type {
		case "message_start":
			use = append(use, string(e.Message.Usage))
		case "content_block_start":
			switch e.ContentBlock.Type {
			case "tool_use":
				calls = append(calls, call{ID: e.ContentBlock.ID, Name: e.ContentBlock.Name})
			case "thinking":
				thinking = true
			}
		case "content_block_delta":
			if e.Delta.Type == "input_json_delta" {
				calls[len(calls)-1].Args += e.Delta.PartialJSON
			}
		case "message_delta":
			stop = e.Delta.StopReason
			use = append(use, string(e.Usage))
		}
	}
	if stop != "tool_use" || !thinking {
		t.Errorf("stop reason %q, thinking block %v; want tool_use after a thinking block", stop, thinking)
	}
	return calls, strings.Join(use, "/")
}

func assembleWorkersAI(t *testing.T, _, data []string) ([]call, string) {
	t.Helper()
	var calls []call
	use := ""
	if data[len(data)-1] != "[DONE]" {
		t.Errorf("last event %s, want [DONE]", data[len(data)-1])
	}
	for _, d := range data[:len(data)-1] {
		var e struct {
			Response  *string
			ToolCalls []struct {
				Name      string
				Arguments json.RawMessage
			} `json:"tool_calls"`
			Usage json.RawMessage
		}
		if err := json.Unmarshal([]byte(d), &e); err != nil || e.Response == nil {
			t.Fatalf("event %s: %v; want a response field", d, err)
		}
		for _, tc := range e.ToolCalls {
			calls = append(calls, call{Name: tc.Name, Args: string(tc.Arguments)})
		}
		if e.Usage != nil {
			use = string(e.Usage)
		}
	}
	return calls, use
}

func TestStreamedText(t *testing.T) {
	t.Parallel()
	_, ts := start(t)
	// The conversation of TestDefaultCompletion, so the same text.
	const msgs = `[{"role":"system","content":"You are terse."},{"role":"user","content":"Say hi"}]`
	r := mustDo(t, ts, "POST", workersAIPath, "", `{"stream":true,"max_tokens":5,"messages":`+msgs+`}`)
	_, data := events(t, r.body)
	want := []string{`{"response":"fake "}`, `{"response":"completion "}`, `{"response":"a25a3a158384"}`,
		`{"response":"","usage":{"prompt_tokens":14,"completion_tokens":5,"total_tokens":19}}`, `[DONE]`}
	if diff := cmp.Diff(want, data); diff != "" {
		t.Errorf("Workers AI stream mismatch (-want +got):\n%s", diff)
	}

	// OpenAI: the text with logprobs per chunk, a refusal as refusal deltas.
	r = mustDo(t, ts, "POST", "/v1/chat/completions", "", `{"model":"m","stream":true,"logprobs":true,"messages":`+msgs+`}`)
	_, data = events(t, r.body)
	var text strings.Builder
	for _, d := range data[:len(data)-1] {
		var c struct {
			Choices []struct {
				Delta    struct{ Content string }
				Logprobs *struct{ Content []struct{ Token string } }
			}
		}
		if err := json.Unmarshal([]byte(d), &c); err != nil {
			t.Fatal(err)
		}
		if len(c.Choices) == 1 && c.Choices[0].Delta.Content != "" {
			ch := c.Choices[0]
			if ch.Logprobs == nil || len(ch.Logprobs.Content) != 1 || ch.Logprobs.Content[0].Token != ch.Delta.Content {
				t.Errorf("chunk %s: want the logprob of its own token", d)
			}
			text.WriteString(ch.Delta.Content)
		}
	}
	if text.String() != "fake completion a25a3a158384" {
		t.Errorf("streamed text = %q, want the default completion", text.String())
	}
}

func TestStreamCutDuringToolArguments(t *testing.T) {
	t.Parallel()
	for _, path := range []string{"/v1/chat/completions", "/v1/messages"} {
		t.Run(path, func(t *testing.T) {
			t.Parallel()
			f, ts := start(t)
			f.Script(fake.Scripted{StreamCutAfter: 2})
			body := `{"model":"m","max_tokens":64,"stream":true,` + openaiTools + `,"messages":[{"role":"user","content":"x"}]}`
			if path == "/v1/messages" {
				body = `{"model":"m","max_tokens":64,"stream":true,` + anthropicTools + `,"messages":[{"role":"user","content":"x"}]}`
			}
			r, err := do(t, t.Context(), ts, "POST", path, "", body)
			if err == nil && (strings.Contains(r.body, "[DONE]") || strings.Contains(r.body, "message_stop")) {
				t.Errorf("stream ended normally: %s", r.body)
			}
			if !strings.Contains(r.body, `{\"city`) && !strings.Contains(r.body, `{\"city\":`) {
				t.Errorf("body %s, want the first argument fragments before the cut", r.body)
			}
		})
	}
}
