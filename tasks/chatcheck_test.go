package tasks

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// decodeRequest reads a request as the server does (numbers kept exact).
func decodeRequest(t *testing.T, s string) Request {
	t.Helper()
	var r Request
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		t.Fatalf("decode %s: %v", s, err)
	}
	return r
}

// agentRequest uses every field of the chat request, validly.
const agentRequest = `{
	"model": "m",
	"messages": [
		{"role": "developer", "content": "Be brief."},
		{"role": "system", "content": [{"type": "text", "text": "Use tools."}]},
		{"role": "user", "name": "ann", "content": [
			{"type": "text", "text": "What is in this picture, and the weather?"},
			{"type": "image_url", "image_url": {"url": "https://example.com/a.png", "detail": "low"}},
			{"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}
		]},
		{"role": "assistant", "content": null, "tool_calls": [
			{"id": "call_1", "type": "function", "function": {"name": "weather", "arguments": "{\"city\":\"Oslo\"}"}},
			{"id": "call_2", "type": "function", "function": {"name": "time", "arguments": "not json, kept as is"}}
		]},
		{"role": "tool", "tool_call_id": "call_1", "content": "12 C"},
		{"role": "tool", "tool_call_id": "call_2", "content": [{"type": "text", "text": "noon"}]},
		{"role": "assistant", "refusal": "I cannot say."},
		{"role": "user", "content": "Try again."}
	],
	"max_completion_tokens": 100,
	"tools": [
		{"type": "function", "function": {"name": "weather", "description": "Weather now", "strict": true,
			"parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"], "additionalProperties": false}}},
		{"type": "function", "function": {"name": "time"}}
	],
	"tool_choice": {"type": "function", "function": {"name": "weather"}},
	"parallel_tool_calls": false,
	"response_format": {"type": "json_schema", "json_schema": {"name": "answer", "strict": true,
		"schema": {"type": "object", "properties": {"text": {"type": "string"}}}}},
	"temperature": 0.2, "top_p": 0.9, "seed": -9223372036854775808, "stop": ["END", "STOP"],
	"presence_penalty": -2, "frequency_penalty": 2, "logit_bias": {"50256": -100, "1": 100},
	"logprobs": true, "top_logprobs": 20, "n": 128, "user": "u-1", "safety_identifier": "s-1",
	"reasoning_effort": "minimal", "verbosity": "low",
	"passthrough": {"service_tier": "flex", "prediction": {"type": "content", "content": "x"}, "store": false, "metadata": {"team": "search"}},
	"metadata": {"ticket": 7},
	"deadline_s": 60
}`

func TestValidateAcceptsEveryFieldOfAnAgentRequest(t *testing.T) {
	t.Parallel()
	if err := decodeRequest(t, agentRequest).Validate(); err != nil {
		t.Fatal(err)
	}
}

// Each bad request is refused with exactly the fields at fault, by their
// JSON paths.
func TestValidateNamesEveryBadChatField(t *testing.T) {
	t.Parallel()
	const user = `{"role":"user","content":"hi"}`
	const call = `{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]}`
	const tool = `{"type":"function","function":{"name":"f"}}`
	cases := []struct {
		name   string
		body   string // members after "messages"
		msgs   string // the messages; user when empty
		fields []string
	}{
		{"bad role", ``, `{"role":"robot","content":"x"}`, []string{"messages[0].role"}},
		{"empty user content", ``, `{"role":"user","content":""}`, []string{"messages[0].content"}},
		{"empty parts", ``, `{"role":"user","content":[]}`, []string{"messages[0].content"}},
		{"assistant with nothing", ``, user + `,{"role":"assistant"}`, []string{"messages[1].content"}},
		{"tool message without tool_call_id", ``, user + `,` + call + `,{"role":"tool","content":"r"}`, []string{"messages[2].tool_call_id"}},
		{"tool message naming no earlier call", ``, user + `,` + call + `,{"role":"tool","tool_call_id":"c2","content":"r"}`, []string{"messages[2].tool_call_id"}},
		{"tool message before its call", ``, `{"role":"tool","tool_call_id":"c1","content":"r"},` + call, []string{"messages[0].tool_call_id"}},
		{"is_error and cache_control on a user message", ``, `{"role":"user","content":"x","is_error":true,"cache_control":{"type":"ephemeral"}}`,
			[]string{"messages[0].is_error", "messages[0].cache_control"}},
		{"thinking from the user, a thinking block unsigned, a misplaced signature", ``,
			`{"role":"user","content":[{"type":"thinking","thinking":"t","signature":"s"}]},{"role":"assistant","content":[{"type":"thinking","thinking":"t"},{"type":"text","text":"x","signature":"s"},{"type":"redacted_thinking"}]}`,
			[]string{"messages[0].content[0].type", "messages[1].content[0].signature", "messages[1].content[1].signature", "messages[1].content[2].data"}},
		{"cache_control of another type or ttl", `,"tools":[{"type":"function","function":{"name":"f"},"cache_control":{"type":"persistent"}}],"cache_control":{"type":"ephemeral","ttl":"1d"}`,
			`{"role":"user","content":[{"type":"text","text":"x","cache_control":{"type":"ephemeral","ttl":"2h"}}]}`,
			[]string{"messages[0].content[0].cache_control.ttl", "tools[0].cache_control.type", "cache_control.ttl"}},
		{"thinking budget under 1024, then at max_tokens", `,"max_tokens":2000,"thinking":{"type":"enabled","budget_tokens":100}`, ``, []string{"thinking.budget_tokens"}},
		{"thinking budget at max_tokens", `,"max_tokens":2000,"thinking":{"type":"enabled","budget_tokens":2000}`, ``, []string{"thinking.budget_tokens"}},
		{"thinking of another type and display", `,"thinking":{"type":"on","display":"full"}`, ``,
			[]string{"thinking.type", "thinking.display"}},
		{"adaptive thinking beside reasoning_effort, a budget without enabled", `,"thinking":{"type":"adaptive","budget_tokens":2048},"reasoning_effort":"low"`, ``,
			[]string{"thinking.budget_tokens", "thinking"}},
		{"anthropic-beta values and top_k", `,"anthropic_beta":["ok-1","bad value"],"top_k":-1`, ``, []string{"anthropic_beta[1]", "top_k"}},
		{"tool_call_id on a user message", ``, `{"role":"user","content":"x","tool_call_id":"c1"}`, []string{"messages[0].tool_call_id"}},
		{"tool calls on a user message", ``, `{"role":"user","content":"x","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":""}}]}`, []string{"messages[0].tool_calls"}},
		{"refusal on a user message", ``, `{"role":"user","content":"x","refusal":"no"}`, []string{"messages[0].refusal"}},
		{"tool call without id, type, name", ``, user + `,{"role":"assistant","tool_calls":[{"id":"","type":"fn","function":{"name":"","arguments":"{}"}}]}`,
			[]string{"messages[1].tool_calls[0].id", "messages[1].tool_calls[0].type", "messages[1].tool_calls[0].function.name"}},
		{"repeated tool call id", ``, user + `,` + call + `,` + call, []string{"messages[2].tool_calls[0].id"}},
		{"part of another type", ``, `{"role":"user","content":[{"type":"input_audio"}]}`, []string{"messages[0].content[0].type"}},
		{"image on a system message", ``, `{"role":"system","content":[{"type":"image_url","image_url":{"url":"https://e.com/a.png"}}]}`, []string{"messages[0].content[0].type"}},
		{"image part without image_url", ``, `{"role":"user","content":[{"type":"image_url"}]}`, []string{"messages[0].content[0].image_url"}},
		{"image_url on a text part", ``, `{"role":"user","content":[{"type":"text","text":"x","image_url":{"url":"https://e.com/a.png"}}]}`, []string{"messages[0].content[0].image_url"}},
		{"image URL of another scheme", ``, `{"role":"user","content":[{"type":"image_url","image_url":{"url":"file:///etc/passwd"}}]}`, []string{"messages[0].content[0].image_url.url"}},
		{"image URL without host", ``, `{"role":"user","content":[{"type":"image_url","image_url":{"url":"https:///a.png"}}]}`, []string{"messages[0].content[0].image_url.url"}},
		{"data URL not an image", ``, `{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:text/plain;base64,aGk="}}]}`, []string{"messages[0].content[0].image_url.url"}},
		{"data URL not base64", ``, `{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png,abc"}}]}`, []string{"messages[0].content[0].image_url.url"}},
		{"data URL with bad base64", ``, `{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,!!!"}}]}`, []string{"messages[0].content[0].image_url.url"}},
		{"image detail", ``, `{"role":"user","content":[{"type":"image_url","image_url":{"url":"https://e.com/a.png","detail":"max"}}]}`, []string{"messages[0].content[0].image_url.detail"}},
		{"both output limits", `,"max_tokens":5,"max_completion_tokens":5`, ``, []string{"max_completion_tokens"}},
		{"max_completion_tokens too big", `,"max_completion_tokens":1000001`, ``, []string{"max_completion_tokens"}},
		{"tool of another type", `,"tools":[{"type":"custom","function":{"name":"f"}}]`, ``, []string{"tools[0].type"}},
		{"tool name pattern", `,"tools":[{"type":"function","function":{"name":"a b"}}]`, ``, []string{"tools[0].function.name"}},
		{"tool name too long", `,"tools":[{"type":"function","function":{"name":"` + strings.Repeat("a", 65) + `"}}]`, ``, []string{"tools[0].function.name"}},
		{"duplicate tool names", `,"tools":[` + tool + `,` + tool + `]`, ``, []string{"tools[1].function.name"}},
		{"too many tools", `,"tools":[` + manyTools(MaxTools+1) + `]`, ``, []string{"tools"}},
		{"parameters not a schema", `,"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"objekt"}}}]`, ``, []string{"tools[0].function.parameters"}},
		{"parameters not an object", `,"tools":[{"type":"function","function":{"name":"f","parameters":"object"}}]`, ``, []string{"tools[0].function.parameters"}},
		{"parameters refer to a file", `,"tools":[{"type":"function","function":{"name":"f","parameters":{"$ref":"file:///etc/passwd"}}}]`, ``, []string{"tools[0].function.parameters"}},
		{"tool_choice without tools", `,"tool_choice":"auto"`, ``, []string{"tool_choice"}},
		{"tool_choice mode", `,"tools":[` + tool + `],"tool_choice":"always"`, ``, []string{"tool_choice"}},
		{"tool_choice naming no tool", `,"tools":[` + tool + `],"tool_choice":{"type":"function","function":{"name":"g"}}`, ``, []string{"tool_choice.function.name"}},
		{"parallel_tool_calls without tools", `,"parallel_tool_calls":true`, ``, []string{"parallel_tool_calls"}},
		{"response_format type", `,"response_format":{"type":"xml"}`, ``, []string{"response_format.type"}},
		{"json_schema without schema object", `,"response_format":{"type":"json_schema"}`, ``, []string{"response_format.json_schema"}},
		{"json_schema on json_object", `,"response_format":{"type":"json_object","json_schema":{"name":"a"}}`, ``, []string{"response_format.json_schema"}},
		{"json_schema name", `,"response_format":{"type":"json_schema","json_schema":{"name":"a.b","schema":{"type":"object"}}}`, ``, []string{"response_format.json_schema.name"}},
		{"json_schema schema", `,"response_format":{"type":"json_schema","json_schema":{"name":"a","schema":{"required":"x"}}}`, ``, []string{"response_format.json_schema.schema"}},
		{"json_mode and response_format", `,"json_mode":true,"response_format":{"type":"json_object"}`, ``, []string{"json_mode"}},
		{"temperature", `,"temperature":2.01`, ``, []string{"temperature"}},
		{"negative temperature", `,"temperature":-0.1`, ``, []string{"temperature"}},
		{"top_p", `,"top_p":1.5`, ``, []string{"top_p"}},
		{"penalties", `,"presence_penalty":-2.5,"frequency_penalty":3`, ``, []string{"presence_penalty", "frequency_penalty"}},
		{"logit_bias key", `,"logit_bias":{"hello":1}`, ``, []string{`logit_bias["hello"]`}},
		{"logit_bias key not canonical", `,"logit_bias":{"01":1}`, ``, []string{`logit_bias["01"]`}},
		{"logit_bias value", `,"logit_bias":{"5":101}`, ``, []string{`logit_bias["5"]`}},
		{"top_logprobs without logprobs", `,"top_logprobs":2`, ``, []string{"top_logprobs"}},
		{"top_logprobs too many", `,"logprobs":true,"top_logprobs":21`, ``, []string{"top_logprobs"}},
		{"too many stops", `,"stop":["a","b","c","d","e"]`, ``, []string{"stop"}},
		{"empty stop", `,"stop":["a",""]`, ``, []string{"stop[1]"}},
		{"n too big", `,"n":129`, ``, []string{"n"}},
		{"n negative", `,"n":-1`, ``, []string{"n"}},
		{"reasoning_effort", `,"reasoning_effort":"extreme"`, ``, []string{"reasoning_effort"}},
		{"verbosity", `,"verbosity":"loud"`, ``, []string{"verbosity"}},
		{"passthrough naming a field", `,"passthrough":{"temperature":1,"stream":true}`, ``, []string{"passthrough.stream", "passthrough.temperature"}},
		{"passthrough name", `,"passthrough":{"Service Tier":"x"}`, ``, []string{`passthrough["Service Tier"]`}},
		{"passthrough metadata without store", `,"passthrough":{"metadata":{"team":"a"}}`, ``, []string{"passthrough.metadata"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			msgs := c.msgs
			if msgs == "" {
				msgs = user
			}
			err := decodeRequest(t, `{"messages":[`+msgs+`]`+c.body+`}`).Validate()
			var ve *ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("Validate = %v, want a ValidationError", err)
			}
			var got []string
			for _, f := range ve.Fields {
				got = append(got, f.Field)
				if f.Message == "" {
					t.Errorf("%s without a message", f.Field)
				}
			}
			if diff := cmp.Diff(c.fields, got); diff != "" {
				t.Errorf("fields mismatch (-want +got):\n%s\n%v", diff, err)
			}
		})
	}
}

func manyTools(n int) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`{"type":"function","function":{"name":"f` + strings.Repeat("x", i%50) + string(rune('a'+i/50)) + `"}}`)
	}
	return b.String()
}

// The most tools a request may carry pass.
func TestValidateAcceptsTheToolLimit(t *testing.T) {
	t.Parallel()
	r := decodeRequest(t, `{"messages":[{"role":"user","content":"hi"}],"tools":[`+manyTools(MaxTools)+`]}`)
	if err := r.Validate(); err != nil {
		t.Fatal(err)
	}
	if len(r.Tools) != MaxTools {
		t.Fatalf("%d tools", len(r.Tools))
	}
}

// Validate reads no value of the request into its messages: a schema's
// content stays out of the error.
func TestSchemaErrorsQuoteNoValue(t *testing.T) {
	t.Parallel()
	r := decodeRequest(t, `{"messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"a":{"type":"secret-value"}}}}}]}`)
	err := r.Validate()
	if err == nil || strings.Contains(err.Error(), "secret-value") {
		t.Fatalf("Validate = %v, want an error that does not quote the schema's values", err)
	}
	if !strings.Contains(err.Error(), "/properties/a/type") {
		t.Errorf("Validate = %v, want the schema location", err)
	}
}
