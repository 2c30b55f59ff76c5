package fake_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tollgate/tollgate/provider/fake"
)

const weatherSchema = `{"type":"object","properties":{"city":{"type":"string"},"unit":{"type":"string","enum":["c","f"]},"days":{"type":"integer","minimum":1}},"required":["city","unit"]}`

// Requests with two tools, get_weather first, in each format.
var (
	openaiTools = `"tools":[{"type":"function","function":{"name":"get_weather","description":"Weather","parameters":` + weatherSchema + `}},` +
		`{"type":"function","function":{"name":"lookup","parameters":{"type":"object","properties":{"q":{"type":"string"}}}}}]`
	anthropicTools = `"tools":[{"name":"get_weather","description":"Weather","input_schema":` + weatherSchema + `},` +
		`{"name":"lookup","input_schema":{"type":"object","properties":{"q":{"type":"string"}}}}]`
	workersAITools = `"tools":[{"name":"get_weather","description":"Weather","parameters":` + weatherSchema + `},` +
		`{"type":"function","function":{"name":"lookup","parameters":{"type":"object","properties":{"q":{"type":"string"}}}}}]`
)

// answer is what the tests read of an answer in any format.
type answer struct {
	Text   string
	Calls  []call
	Finish string
}

type call struct{ ID, Name, Args string }

func readOpenAI(t *testing.T, body string) answer {
	t.Helper()
	var c struct {
		Choices []struct {
			Message struct {
				Content   *string
				ToolCalls []struct {
					ID, Type string
					Function struct{ Name, Arguments string }
				} `json:"tool_calls"`
			}
			FinishReason string `json:"finish_reason"`
		}
	}
	if err := json.Unmarshal([]byte(body), &c); err != nil || len(c.Choices) == 0 {
		t.Fatalf("not a chat completion: %s (%v)", body, err)
	}
	ch := c.Choices[0]
	a := answer{Finish: ch.FinishReason}
	if ch.Message.Content != nil {
		a.Text = *ch.Message.Content
	}
	for _, tc := range ch.Message.ToolCalls {
		if tc.Type != "function" {
			t.Errorf("tool call type %q, want function", tc.Type)
		}
		a.Calls = append(a.Calls, call{tc.ID, tc.Function.Name, tc.Function.Arguments})
	}
	return a
}

func readAnthropic(t *testing.T, body string) answer {
	t.Helper()
	var m struct {
		Content []struct {
			Type, Text, ID, Name string
			Input                json.RawMessage
		}
		StopReason string `json:"stop_reason"`
	}
	if err := json.Unmarshal([]byte(body), &m); err != nil || m.StopReason == "" {
		t.Fatalf("not a message: %s (%v)", body, err)
	}
	a := answer{Finish: m.StopReason}
	for _, b := range m.Content {
		switch b.Type {
		case "text":
			a.Text += b.Text
		case "tool_use":
			a.Calls = append(a.Calls, call{b.ID, b.Name, string(b.Input)})
		}
	}
	return a
}

func readWorkersAI(t *testing.T, body string) answer {
	t.Helper()
	var e struct {
		Result struct {
			Response  json.RawMessage
			ToolCalls []struct {
				Name      string
				Arguments json.RawMessage
			} `json:"tool_calls"`
		}
		Success bool
	}
	if err := json.Unmarshal([]byte(body), &e); err != nil || !e.Success {
		t.Fatalf("not a Workers AI answer: %s (%v)", body, err)
	}
	var a answer
	var s string
	if json.Unmarshal(e.Result.Response, &s) == nil {
		a.Text = s
	} else if string(e.Result.Response) != "null" {
		a.Text = string(e.Result.Response)
	}
	for _, tc := range e.Result.ToolCalls {
		a.Calls = append(a.Calls, call{Name: tc.Name, Args: string(tc.Arguments)})
	}
	return a
}

// format is one wire format: where to post and how to read the answer.
type format struct {
	name, path string
	read       func(*testing.T, string) answer
}

var formats = map[string]format{
	"openai":    {"openai", "/v1/chat/completions", readOpenAI},
	"anthropic": {"anthropic", "/v1/messages", readAnthropic},
	"workersai": {"workersai", workersAIPath, readWorkersAI},
}

func TestToolCalls(t *testing.T) {
	t.Parallel()
	const weatherArgs = `{"city":"fake","unit":"c"}`
	const lookupArgs = `{"q":"fake"}`
	const user = `{"role":"user","content":"Weather in Paris?"}`
	tests := []struct {
		name, format, body string
		script             []fake.Scripted
		want               answer
	}{
		{"openai: the first tool", "openai", `{"model":"m",` + openaiTools + `,"messages":[` + user + `]}`, nil,
			answer{Calls: []call{{"call_fake_1", "get_weather", weatherArgs}}, Finish: "tool_calls"}},
		{"openai: a named tool_choice", "openai", `{"model":"m",` + openaiTools + `,"tool_choice":{"type":"function","function":{"name":"lookup"}},"messages":[` + user + `]}`, nil,
			answer{Calls: []call{{"call_fake_1", "lookup", lookupArgs}}, Finish: "tool_calls"}},
		{"openai: tool_choice required", "openai", `{"model":"m",` + openaiTools + `,"tool_choice":"required","messages":[` + user + `]}`, nil,
			answer{Calls: []call{{"call_fake_1", "get_weather", weatherArgs}}, Finish: "tool_calls"}},
		{"openai: tool_choice none answers text", "openai", `{"model":"m",` + openaiTools + `,"tool_choice":"none","messages":[` + user + `]}`, nil,
			answer{Text: "fake completion ", Finish: "stop"}},
		{"openai: scripted parallel calls", "openai", `{"model":"m",` + openaiTools + `,"messages":[` + user + `]}`, []fake.Scripted{{ToolCalls: 3}},
			answer{Calls: []call{{"call_fake_1", "get_weather", weatherArgs}, {"call_fake_2", "lookup", lookupArgs}, {"call_fake_3", "get_weather", weatherArgs}}, Finish: "tool_calls"}},
		{"openai: parallel_tool_calls false caps at one", "openai", `{"model":"m",` + openaiTools + `,"parallel_tool_calls":false,"messages":[` + user + `]}`, []fake.Scripted{{ToolCalls: 3}},
			answer{Calls: []call{{"call_fake_1", "get_weather", weatherArgs}}, Finish: "tool_calls"}},
		{"openai: scripted tool", "openai", `{"model":"m",` + openaiTools + `,"messages":[` + user + `]}`, []fake.Scripted{{Tool: "lookup", ToolCalls: 2}},
			answer{Calls: []call{{"call_fake_1", "lookup", lookupArgs}, {"call_fake_2", "lookup", lookupArgs}}, Finish: "tool_calls"}},
		{"openai: scripted tool the request lacks", "openai", `{"model":"m","messages":[` + user + `]}`, []fake.Scripted{{Tool: "rogue"}},
			answer{Calls: []call{{"call_fake_1", "rogue", `{}`}}, Finish: "tool_calls"}},
		{"openai: scripted text", "openai", `{"model":"m",` + openaiTools + `,"messages":[` + user + `]}`, []fake.Scripted{{Text: true}},
			answer{Text: "fake completion ", Finish: "stop"}},
		{"openai: after a tool result, text", "openai", `{"model":"m",` + openaiTools + `,"messages":[` + user + `,` +
			`{"role":"assistant","content":null,"tool_calls":[{"id":"call_fake_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\": \"Paris\", \"unit\": \"c\"}"}}]},` +
			`{"role":"tool","tool_call_id":"call_fake_1","content":"18C"}]}`, nil,
			answer{Text: "fake completion ", Finish: "stop"}},
		{"openai: after a tool result, a scripted call numbered after the earlier one", "openai", `{"model":"m",` + openaiTools + `,"messages":[` + user + `,` +
			`{"role":"assistant","content":null,"tool_calls":[{"id":"call_fake_1","type":"function","function":{"name":"get_weather","arguments":"{}"}}]},` +
			`{"role":"tool","tool_call_id":"call_fake_1","content":"18C"}]}`, []fake.Scripted{{ToolCalls: 1}},
			answer{Calls: []call{{"call_fake_2", "get_weather", weatherArgs}}, Finish: "tool_calls"}},
		{"openai: scripted finish reason", "openai", `{"model":"m","messages":[` + user + `]}`, []fake.Scripted{{FinishReason: "length", Content: "cut"}},
			answer{Text: "cut", Finish: "length"}},

		{"anthropic: the first tool", "anthropic", `{"model":"c","max_tokens":64,` + anthropicTools + `,"messages":[` + user + `]}`, nil,
			answer{Calls: []call{{"toolu_fake_1", "get_weather", weatherArgs}}, Finish: "tool_use"}},
		{"anthropic: tool_choice tool", "anthropic", `{"model":"c","max_tokens":64,` + anthropicTools + `,"tool_choice":{"type":"tool","name":"lookup"},"messages":[` + user + `]}`, nil,
			answer{Calls: []call{{"toolu_fake_1", "lookup", lookupArgs}}, Finish: "tool_use"}},
		{"anthropic: tool_choice none", "anthropic", `{"model":"c","max_tokens":64,` + anthropicTools + `,"tool_choice":{"type":"none"},"messages":[` + user + `]}`, nil,
			answer{Text: "fake completion ", Finish: "end_turn"}},
		{"anthropic: parallel disabled", "anthropic", `{"model":"c","max_tokens":64,` + anthropicTools + `,"tool_choice":{"type":"any","disable_parallel_tool_use":true},"messages":[` + user + `]}`, []fake.Scripted{{ToolCalls: 2}},
			answer{Calls: []call{{"toolu_fake_1", "get_weather", weatherArgs}}, Finish: "tool_use"}},
		{"anthropic: scripted parallel calls", "anthropic", `{"model":"c","max_tokens":64,` + anthropicTools + `,"messages":[` + user + `]}`, []fake.Scripted{{ToolCalls: 2}},
			answer{Calls: []call{{"toolu_fake_1", "get_weather", weatherArgs}, {"toolu_fake_2", "lookup", lookupArgs}}, Finish: "tool_use"}},
		{"anthropic: after a tool result, text", "anthropic", `{"model":"c","max_tokens":64,` + anthropicTools + `,"messages":[` + user + `,` +
			`{"role":"assistant","content":[{"type":"tool_use","id":"toolu_fake_1","name":"get_weather","input":{"city":"Paris","unit":"c"}}]},` +
			`{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_fake_1","content":"18C"}]}]}`, nil,
			answer{Text: "fake completion ", Finish: "end_turn"}},
		{"anthropic: scripted refusal", "anthropic", `{"model":"c","max_tokens":64,"messages":[` + user + `]}`, []fake.Scripted{{Refusal: "I can't help with that."}},
			answer{Text: "I can't help with that.", Finish: "refusal"}},

		{"workers AI: the first tool", "workersai", `{` + workersAITools + `,"messages":[` + user + `]}`, nil,
			answer{Calls: []call{{"", "get_weather", weatherArgs}}}},
		{"workers AI: scripted parallel calls", "workersai", `{` + workersAITools + `,"messages":[` + user + `]}`, []fake.Scripted{{ToolCalls: 2}},
			answer{Calls: []call{{"", "get_weather", weatherArgs}, {"", "lookup", lookupArgs}}}},
		{"workers AI: after a tool result, text", "workersai", `{` + workersAITools + `,"messages":[` + user + `,` +
			`{"role":"assistant","content":"","tool_calls":[{"name":"get_weather","arguments":{"city":"Paris","unit":"c"}}]},` +
			`{"role":"tool","name":"get_weather","content":"18C"}]}`, nil,
			answer{Text: "fake completion "}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f, ts := start(t)
			f.Script(tt.script...)
			fm := formats[tt.format]
			r := mustDo(t, ts, "POST", fm.path, "", tt.body)
			if r.status != 200 {
				t.Fatalf("status %d, body %s; want 200", r.status, r.body)
			}
			got := fm.read(t, r.body)
			if strings.HasPrefix(got.Text, "fake completion ") && len(got.Text) == len("fake completion ")+12 {
				got.Text = "fake completion "
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("answer mismatch (-want +got):\n%s\nbody %s", diff, r.body)
			}
		})
	}
}

// TestToolLoopHashesAlikeInEveryFormat checks that one tool loop written in
// each format gets the same answer, so that tests can predict it whatever
// the adapter.
func TestToolLoopHashesAlikeInEveryFormat(t *testing.T) {
	t.Parallel()
	bodies := map[string]string{
		"openai": `{"model":"m",` + openaiTools + `,"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Weather?"},` +
			`{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\": \"Paris\"}"}}]},` +
			`{"role":"tool","tool_call_id":"call_1","content":"18C"}]}`,
		"anthropic": `{"model":"c","max_tokens":16,"system":"Be brief.",` + anthropicTools + `,"messages":[{"role":"user","content":"Weather?"},` +
			`{"role":"assistant","content":[{"type":"tool_use","id":"call_1","name":"get_weather","input":{"city":"Paris"}}]},` +
			`{"role":"user","content":[{"type":"tool_result","tool_use_id":"call_1","content":[{"type":"text","text":"18C"}]}]}]}`,
		"workersai": `{` + workersAITools + `,"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Weather?"},` +
			`{"role":"assistant","content":"","tool_calls":[{"id":"call_1","name":"get_weather","arguments":{"city":"Paris"}}]},` +
			`{"role":"tool","tool_call_id":"call_1","content":"18C"}]}`,
	}
	_, ts := start(t)
	texts := map[string]string{}
	for name, body := range bodies {
		fm := formats[name]
		r := mustDo(t, ts, "POST", fm.path, "", body)
		if r.status != 200 {
			t.Fatalf("%s: status %d, body %s", name, r.status, r.body)
		}
		texts[name] = fm.read(t, r.body).Text
	}
	if texts["openai"] == "" || texts["openai"] != texts["anthropic"] || texts["openai"] != texts["workersai"] {
		t.Errorf("answers = %v, want one text for all formats", texts)
	}
}

func TestStructuredOutput(t *testing.T) {
	t.Parallel()
	const schema = `{"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer","minimum":18},"tags":{"type":"array","items":{"type":"string"}}},"required":["name","age","tags"],"additionalProperties":false}`
	const want = `{"age":18,"name":"fake","tags":["fake"]}`
	const user = `{"role":"user","content":"Extract."}`
	tests := []struct {
		name, format, body, want string
	}{
		{"openai json_schema", "openai", `{"model":"m","response_format":{"type":"json_schema","json_schema":{"name":"person","strict":true,"schema":` + schema + `}},"messages":[` + user + `]}`, want},
		{"openai json_object", "openai", `{"model":"m","response_format":{"type":"json_object"},"messages":[` + user + `]}`, `{"completion":"fake completion `},
		{"openai text", "openai", `{"model":"m","response_format":{"type":"text"},"messages":[` + user + `]}`, `fake completion `},
		{"anthropic output_config", "anthropic", `{"model":"c","max_tokens":16,"output_config":{"format":{"type":"json_schema","schema":` + schema + `}},"messages":[` + user + `]}`, want},
		{"anthropic output_format", "anthropic", `{"model":"c","max_tokens":16,"output_format":{"type":"json_schema","schema":` + schema + `},"messages":[` + user + `]}`, want},
		{"workers AI json_schema", "workersai", `{"response_format":{"type":"json_schema","json_schema":` + schema + `},"messages":[` + user + `]}`, want},
		{"workers AI json_object", "workersai", `{"response_format":{"type":"json_object"},"messages":[` + user + `]}`, `{"completion":"fake completion `},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, ts := start(t)
			fm := formats[tt.format]
			r := mustDo(t, ts, "POST", fm.path, "", tt.body)
			if r.status != 200 {
				t.Fatalf("status %d, body %s", r.status, r.body)
			}
			got := fm.read(t, r.body).Text
			if !strings.HasPrefix(got, tt.want) {
				t.Errorf("content = %s, want %s", got, tt.want)
			}
			if strings.HasPrefix(tt.want, "{") && !json.Valid([]byte(got)) {
				t.Errorf("content %s is not JSON", got)
			}
		})
	}
}

func TestImages(t *testing.T) {
	t.Parallel()
	_, ts := start(t)
	const data = "iVBORw0KGgo="
	openai := func(parts string) string {
		return `{"model":"m","messages":[{"role":"user","content":[` + parts + `]}]}`
	}
	textOnly := mustDo(t, ts, "POST", "/v1/chat/completions", "", openai(`{"type":"text","text":"What is this?"}`))
	withImage := mustDo(t, ts, "POST", "/v1/chat/completions", "", openai(`{"type":"text","text":"What is this?"},{"type":"image_url","image_url":{"url":"data:image/png;base64,`+data+`"}}`))
	otherImage := mustDo(t, ts, "POST", "/v1/chat/completions", "", openai(`{"type":"text","text":"What is this?"},{"type":"image_url","image_url":{"url":"https://example.com/cat.png","detail":"low"}}`))
	anthropic := mustDo(t, ts, "POST", "/v1/messages", "", `{"model":"c","max_tokens":16,"messages":[{"role":"user","content":[`+
		`{"type":"text","text":"What is this?"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"`+data+`"}}]}]}`)
	for _, r := range []reply{textOnly, withImage, otherImage, anthropic} {
		if r.status != 200 {
			t.Fatalf("status %d, body %s", r.status, r.body)
		}
	}
	a, b, c := readOpenAI(t, textOnly.body).Text, readOpenAI(t, withImage.body).Text, readOpenAI(t, otherImage.body).Text
	if a == b || b == c || a == c {
		t.Errorf("texts %q, %q, %q: want each image to change the answer", a, b, c)
	}
	if got := readAnthropic(t, anthropic.body).Text; got != b {
		t.Errorf("Anthropic base64 image answer %q, want the answer to the same data URL on OpenAI %q", got, b)
	}
	var u1, u2 struct {
		Usage struct {
			PromptTokens int `json:"prompt_tokens"`
		}
	}
	_ = json.Unmarshal([]byte(textOnly.body), &u1)
	_ = json.Unmarshal([]byte(withImage.body), &u2)
	if u2.Usage.PromptTokens != u1.Usage.PromptTokens+85 {
		t.Errorf("prompt tokens with an image = %d, want %d + 85", u2.Usage.PromptTokens, u1.Usage.PromptTokens)
	}
}
