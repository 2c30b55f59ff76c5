package server_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/tollgate/tollgate/accounts"
)

// The request bodies of an agent's call, with every field of the chat
// request set: on the native API (Tollgate's passthrough object, any
// metadata) and on the OpenAI-compatible one (unknown fields at the top,
// string metadata).
const agentMessages = `[
	{"role": "developer", "content": "Be brief."},
	{"role": "system", "content": [{"type": "text", "text": "Use tools."}]},
	{"role": "user", "name": "ann", "content": [
		{"type": "text", "text": "What is in this picture, and the weather?"},
		{"type": "image_url", "image_url": {"url": "https://example.com/a.png", "detail": "low"}},
		{"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}
	]},
	{"role": "assistant", "content": null, "tool_calls": [
		{"id": "call_1", "type": "function", "function": {"name": "weather", "arguments": "{\"city\":\"Oslo\"}"}},
		{"id": "call_2", "type": "function", "function": {"name": "clock", "arguments": "{}"}}
	]},
	{"role": "tool", "tool_call_id": "call_1", "content": "12 C"},
	{"role": "tool", "tool_call_id": "call_2", "content": [{"type": "text", "text": "noon"}]},
	{"role": "assistant", "refusal": "I cannot say."},
	{"role": "user", "content": "Try again."}
]`

const agentFields = `
	"model": "agent-model",
	"messages": ` + agentMessages + `,
	"max_completion_tokens": 40,
	"tools": [
		{"type": "function", "function": {"name": "weather", "description": "Weather now", "strict": true,
			"parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"], "additionalProperties": false}}},
		{"type": "function", "function": {"name": "clock", "parameters": {"type": "object", "properties": {}}}}
	],
	"tool_choice": "auto",
	"parallel_tool_calls": true,
	"response_format": {"type": "json_schema", "json_schema": {"name": "answer", "strict": true,
		"schema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"], "additionalProperties": false}}},
	"temperature": 0.2, "top_p": 0.9, "seed": 42, "stop": ["END", "STOP"],
	"presence_penalty": -0.5, "frequency_penalty": 0.5, "logit_bias": {"50256": -100},
	"logprobs": true, "top_logprobs": 2, "n": 2, "user": "u-1", "safety_identifier": "s-1",
	"reasoning_effort": "low", "verbosity": "low"`

var (
	nativeAgentBody = `{` + agentFields + `, "passthrough": {"service_tier": "flex", "prompt_cache_key": "pk-1"}, "metadata": {"ticket": "7"}, "deadline_s": 300}`
	openAIAgentBody = `{` + agentFields + `, "service_tier": "flex", "prompt_cache_key": "pk-1", "metadata": {"ticket": "7"}}`
)

// change edits a decoded body; extra sets a passthrough field wherever
// the endpoint keeps them.
type change func(body map[string]any, extra func(name string, v any))

func changed(t *testing.T, body string, openAI bool, ch change) []byte {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(body), &m); err != nil {
		t.Fatal(err)
	}
	ch(m, func(name string, v any) {
		if openAI {
			m[name] = v
			return
		}
		m["passthrough"].(map[string]any)[name] = v
	})
	out, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func msg(m map[string]any, i int) map[string]any { return m["messages"].([]any)[i].(map[string]any) }
func part(m map[string]any, i, j int) map[string]any {
	return msg(m, i)["content"].([]any)[j].(map[string]any)
}
func toolCall(m map[string]any, i, j int) map[string]any {
	return msg(m, i)["tool_calls"].([]any)[j].(map[string]any)
}
func toolFn(m map[string]any, i int) map[string]any {
	return m["tools"].([]any)[i].(map[string]any)["function"].(map[string]any)
}

// fieldChanges each change one field of the agent body that changes the
// provider call.
var fieldChanges = []struct {
	field  string
	change change
}{
	{"model", func(m map[string]any, _ func(string, any)) { m["model"] = "agent-model-b" }},
	{"messages[].role", func(m map[string]any, _ func(string, any)) { msg(m, 0)["role"] = "system" }},
	{"messages[].content", func(m map[string]any, _ func(string, any)) { msg(m, 7)["content"] = "Try once more." }},
	{"messages[].name", func(m map[string]any, _ func(string, any)) { msg(m, 2)["name"] = "bob" }},
	{"messages[].content[].text", func(m map[string]any, _ func(string, any)) { part(m, 2, 0)["text"] = "What is this?" }},
	{"messages[].content[].image_url.url", func(m map[string]any, _ func(string, any)) {
		part(m, 2, 1)["image_url"].(map[string]any)["url"] = "https://example.com/b.png"
	}},
	{"messages[].content[].image_url.detail", func(m map[string]any, _ func(string, any)) {
		part(m, 2, 1)["image_url"].(map[string]any)["detail"] = "high"
	}},
	{"messages[].tool_calls[].function.arguments", func(m map[string]any, _ func(string, any)) {
		toolCall(m, 3, 0)["function"].(map[string]any)["arguments"] = `{"city":"Bergen"}`
	}},
	{"messages[].tool_calls[].function.name", func(m map[string]any, _ func(string, any)) {
		toolCall(m, 3, 1)["function"].(map[string]any)["name"] = "weather"
	}},
	{"messages[].tool_call_id", func(m map[string]any, _ func(string, any)) {
		msg(m, 4)["tool_call_id"], msg(m, 5)["tool_call_id"] = "call_2", "call_1"
	}},
	{"messages[].refusal", func(m map[string]any, _ func(string, any)) { msg(m, 6)["refusal"] = "No." }},
	{"max_completion_tokens", func(m map[string]any, _ func(string, any)) { m["max_completion_tokens"] = 41 }},
	{"max_tokens", func(m map[string]any, _ func(string, any)) { delete(m, "max_completion_tokens"); m["max_tokens"] = 40 }},
	{"tools[].function.description", func(m map[string]any, _ func(string, any)) { toolFn(m, 0)["description"] = "Weather" }},
	{"tools[].function.parameters", func(m map[string]any, _ func(string, any)) {
		toolFn(m, 0)["parameters"].(map[string]any)["required"] = []any{}
	}},
	{"tools[].function.strict", func(m map[string]any, _ func(string, any)) { toolFn(m, 0)["strict"] = false }},
	{"tools", func(m map[string]any, _ func(string, any)) {
		m["tools"] = m["tools"].([]any)[:1]
		msg(m, 3)["tool_calls"] = msg(m, 3)["tool_calls"].([]any)[:1]
		m["messages"] = append(m["messages"].([]any)[:5], m["messages"].([]any)[6:]...)
	}},
	{"tool_choice", func(m map[string]any, _ func(string, any)) {
		m["tool_choice"] = map[string]any{"type": "function", "function": map[string]any{"name": "clock"}}
	}},
	{"parallel_tool_calls", func(m map[string]any, _ func(string, any)) { m["parallel_tool_calls"] = false }},
	{"response_format", func(m map[string]any, _ func(string, any)) {
		m["response_format"] = map[string]any{"type": "json_object"}
	}},
	{"response_format.json_schema.schema", func(m map[string]any, _ func(string, any)) {
		m["response_format"].(map[string]any)["json_schema"].(map[string]any)["schema"].(map[string]any)["required"] = []any{}
	}},
	{"temperature", func(m map[string]any, _ func(string, any)) { m["temperature"] = 0.3 }},
	{"top_p", func(m map[string]any, _ func(string, any)) { m["top_p"] = 1 }},
	{"seed", func(m map[string]any, _ func(string, any)) { m["seed"] = 43 }},
	{"stop", func(m map[string]any, _ func(string, any)) { m["stop"] = "END" }},
	{"presence_penalty", func(m map[string]any, _ func(string, any)) { m["presence_penalty"] = 0 }},
	{"frequency_penalty", func(m map[string]any, _ func(string, any)) { delete(m, "frequency_penalty") }},
	{"logit_bias", func(m map[string]any, _ func(string, any)) { m["logit_bias"] = map[string]any{"50256": -99} }},
	{"logprobs", func(m map[string]any, _ func(string, any)) { m["logprobs"] = false; delete(m, "top_logprobs") }},
	{"top_logprobs", func(m map[string]any, _ func(string, any)) { m["top_logprobs"] = 3 }},
	{"n", func(m map[string]any, _ func(string, any)) { m["n"] = 3 }},
	{"user", func(m map[string]any, _ func(string, any)) { m["user"] = "u-2" }},
	{"safety_identifier", func(m map[string]any, _ func(string, any)) { m["safety_identifier"] = "s-2" }},
	{"reasoning_effort", func(m map[string]any, _ func(string, any)) { m["reasoning_effort"] = "high" }},
	{"verbosity", func(m map[string]any, _ func(string, any)) { m["verbosity"] = "medium" }},
	{"passthrough value", func(_ map[string]any, extra func(string, any)) { extra("service_tier", "priority") }},
	{"passthrough added", func(_ map[string]any, extra func(string, any)) { extra("store", true) }},
}

// The same Idempotency-Key with any one field changed is refused with 422
// on both surfaces, before any call; the same request again is the same
// task.
func TestSameKeyWithAnyChangedFieldIsRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	key := e.owner("acme", accounts.RoleClient, 1_000_000_000)
	surfaces := []struct {
		name   string
		body   string
		openAI bool
		post   func(idem string, body []byte) response
		taskID func(r response) string
	}{
		{"POST /v1/tasks", nativeAgentBody, false,
			func(idem string, body []byte) response {
				return e.post(key, idem, body, map[string]string{"Prefer": "wait=10"})
			},
			func(r response) string {
				if r.status >= 400 {
					return ""
				}
				return r.task(t).ID
			}},
		{"POST /v1/chat/completions", openAIAgentBody, true,
			func(idem string, body []byte) response {
				return e.do(http.MethodPost, "/v1/chat/completions", key, body, map[string]string{"Idempotency-Key": idem})
			},
			func(r response) string { return r.header.Get("X-Tollgate-Task-Id") }},
	}
	for _, s := range surfaces {
		// The task's outcome depends on what the provider makes of the
		// request; the key is bound to it whatever the outcome.
		first := s.post("agent-"+s.name, []byte(s.body))
		id := s.taskID(first)
		if id == "" {
			t.Fatalf("%s: first request created no task: %d %s", s.name, first.status, first.body)
		}
		e.waitFinished(key, id)
		calls := e.fake.CallCount()
		for _, c := range fieldChanges {
			r := s.post("agent-"+s.name, changed(t, s.body, s.openAI, c.change))
			if r.status != http.StatusUnprocessableEntity || !strings.Contains(string(r.body), "idempotency_key_reused") {
				t.Errorf("%s, %s changed: %d %s, want 422 idempotency_key_reused", s.name, c.field, r.status, r.body)
			}
			// The change is a valid request of its own: it makes a task.
			if r := s.post("fresh-"+s.name+"-"+c.field, changed(t, s.body, s.openAI, c.change)); r.status == http.StatusBadRequest && s.taskID(r) == "" {
				t.Errorf("%s, %s changed, under a new key: %d %s", s.name, c.field, r.status, r.body)
			}
		}
		again := s.post("agent-"+s.name, []byte(s.body))
		if again.status != first.status || s.taskID(again) != id || again.header.Get("Idempotent-Replayed") != "true" {
			t.Errorf("%s: the same request again: %d, task %s (want %d, %s), replayed %q", s.name, again.status, s.taskID(again), first.status, id, again.header.Get("Idempotent-Replayed"))
		}
		if n := e.fake.CallCount() - calls; n != len(fieldChanges) {
			t.Errorf("%s: %d provider calls after the first, want %d (one per fresh key)", s.name, n, len(fieldChanges))
		}
	}
}

// A request a client sends the same way through either surface is the
// same task request: the OpenAI body, under the native API's key, is a
// replay.
func TestBothSurfacesDecodeTheSameRequest(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	key := e.owner("acme", accounts.RoleClient, 1_000_000_000)
	r := e.do(http.MethodPost, "/v1/chat/completions", key, []byte(openAIAgentBody), map[string]string{"Idempotency-Key": "same"})
	if r.header.Get("X-Tollgate-Task-Id") == "" {
		t.Fatalf("chat completion made no task: %d %s", r.status, r.body)
	}
	native := e.post(key, "same", []byte(strings.Replace(nativeAgentBody, `, "deadline_s": 300`, "", 1)), nil)
	if native.status != http.StatusOK || native.header.Get("Idempotent-Replayed") != "true" || native.task(t).ID != r.header.Get("X-Tollgate-Task-Id") {
		t.Errorf("native body under the same key: %d %s, want a replay of task %s", native.status, native.body, r.header.Get("X-Tollgate-Task-Id"))
	}
}

// Every bad chat field is refused with a 400 naming it, on both surfaces,
// before anything is spent: no provider call, no task, the key still free.
func TestBadChatFieldsAreRefusedBeforeAnythingIsSpent(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	key := e.owner("acme", accounts.RoleClient, 1_000_000_000)
	const user = `{"role":"user","content":"hi"}`
	const call = `{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]}`
	body := func(msgs, rest string) string {
		if msgs == "" {
			msgs = user
		}
		return `{"model":"test-model","messages":[` + msgs + `]` + rest + `}`
	}
	both := []struct {
		name, body, field string
	}{
		{"tool message naming no earlier call", body(user+","+call+`,{"role":"tool","tool_call_id":"c9","content":"r"}`, ""), "messages[2].tool_call_id"},
		{"schema that is no JSON Schema", body("", `,"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"objekt"}}}]`), "tools[0].function.parameters"},
		{"json_schema that is no JSON Schema", body("", `,"response_format":{"type":"json_schema","json_schema":{"name":"a","schema":{"properties":[]}}}`), "response_format.json_schema.schema"},
		{"image URL of another scheme", body(`{"role":"user","content":[{"type":"image_url","image_url":{"url":"ftp://example.com/a.png"}}]}`, ""), "messages[0].content[0].image_url.url"},
		{"image data URL not base64", body(`{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,%%%"}}]}`, ""), "messages[0].content[0].image_url.url"},
		{"too many tools", body("", `,"tools":[`+tools(129)+`]`), "tools"},
		{"duplicate tool names", body("", `,"tools":[`+tools(1)+`,`+tools(1)+`]`), "tools[1].function.name"},
		{"tool_choice naming no tool", body("", `,"tools":[`+tools(1)+`],"tool_choice":{"type":"function","function":{"name":"g"}}`), "tool_choice.function.name"},
		{"tool_choice without tools", body("", `,"tool_choice":"required"`), "tool_choice"},
		{"temperature", body("", `,"temperature":2.5`), "temperature"},
		{"top_logprobs without logprobs", body("", `,"top_logprobs":1`), "top_logprobs"},
		{"five stops", body("", `,"stop":["a","b","c","d","e"]`), "stop"},
		{"n", body("", `,"n":129`), "n"},
		{"reasoning_effort", body("", `,"reasoning_effort":"huge"`), "reasoning_effort"},
		{"both output limits", body("", `,"max_tokens":5,"max_completion_tokens":5`), "max_completion_tokens"},
		{"logit_bias", body("", `,"logit_bias":{"x":1}`), `logit_bias["x"]`},
		{"part type", body(`{"role":"user","content":[{"type":"file","text":"x"}]}`, ""), "messages[0].content[0].type"},
		{"unknown message field", body(`{"role":"user","content":"x","audio":{"id":"a"}}`, ""), "messages[0].audio"},
		{"unknown tool field", body("", `,"tools":[{"type":"function","function":{"name":"f","parametres":{}}}]`), "tools[0].function.parametres"},
		{"case variant of a field", body("", `,"Temperature":1`), "Temperature"},
	}
	native := append(both[:len(both):len(both)], []struct{ name, body, field string }{
		{"unknown top-level field", body("", `,"service_tier":"flex"`), "service_tier"},
		{"passthrough naming a field", body("", `,"passthrough":{"temperature":1}`), "passthrough.temperature"},
		{"passthrough stream", body("", `,"passthrough":{"stream":true}`), "passthrough.stream"},
		{"json_mode with response_format", body("", `,"json_mode":true,"response_format":{"type":"json_object"}`), "json_mode"},
		{"route with a chat field", `{"route":"tagline","input":{"product":"p"},"temperature":1}`, "temperature"},
	}...)
	openAI := append(both[:len(both):len(both)], []struct{ name, body, field string }{
		{"stream with n > 1", body("", `,"n":2,"stream":true`), "n"},
		{"metadata of numbers", body("", `,"metadata":{"a":1}`), `metadata.a`},
		{"unknown stream option", body("", `,"stream":true,"stream_options":{"include_usage":true,"x":1}`), "stream_options.x"},
	}...)
	for _, c := range native {
		t.Run("native "+c.name, func(t *testing.T) {
			r := e.post(key, "k-"+c.name, []byte(c.body), nil)
			if r.status != http.StatusBadRequest || r.problemCode(t) != "invalid_request" {
				t.Fatalf("%d %s, want 400 invalid_request", r.status, r.body)
			}
			if got := problemFields(t, r); len(got) == 0 || got[0] != c.field {
				t.Errorf("fields %v, want %q first; body %s", got, c.field, r.body)
			}
		})
	}
	for _, c := range openAI {
		t.Run("openai "+c.name, func(t *testing.T) {
			r := e.do(http.MethodPost, "/v1/chat/completions", key, []byte(c.body), map[string]string{"Idempotency-Key": "ko-" + c.name})
			var env struct {
				Error struct {
					Type  string  `json:"type"`
					Param *string `json:"param"`
				} `json:"error"`
			}
			if err := json.Unmarshal(r.body, &env); err != nil || r.status != http.StatusBadRequest || env.Error.Type != "invalid_request_error" {
				t.Fatalf("%d %s, want 400 invalid_request_error", r.status, r.body)
			}
			if env.Error.Param == nil || *env.Error.Param != c.field {
				t.Errorf("param %v, want %q; body %s", env.Error.Param, c.field, r.body)
			}
		})
	}
	e.checkNothingWritten()
	// The keys were never consumed: a valid request under one succeeds.
	if r := e.post(key, "k-"+native[0].name, taskBody("hello", 10), nil); r.status != http.StatusAccepted {
		t.Errorf("valid POST after refusals: %d %s, want 202", r.status, r.body)
	}
	if r := e.do(http.MethodPost, "/v1/chat/completions", key, []byte(`{"model":"test-model","messages":[{"role":"user","content":"hi"}]}`),
		map[string]string{"Idempotency-Key": "ko-" + openAI[0].name}); r.status != http.StatusOK {
		t.Errorf("valid chat completion after refusals: %d %s, want 200", r.status, r.body)
	}
}

func tools(n int) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"type":"function","function":{"name":"f%d","parameters":{"type":"object"}}}`, i)
	}
	return b.String()
}

func problemFields(t *testing.T, r response) []string {
	t.Helper()
	var p struct {
		Errors []struct {
			Field string `json:"field"`
		} `json:"errors"`
	}
	if err := json.Unmarshal(r.body, &p); err != nil {
		t.Fatalf("decode problem %s: %v", r.body, err)
	}
	var out []string
	for _, f := range p.Errors {
		out = append(out, f.Field)
	}
	return out
}

// openapi.yaml describes the request bodies the server accepts: the agent
// bodies, with every field set, match their schemas, and bodies the server
// refuses for their shape do not.
func TestRequestSchemasDescribeAcceptedBodies(t *testing.T) {
	t.Parallel()
	doc, err := openapi3.NewLoader().LoadFromFile("../openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		schema, body string
		valid        bool
	}{
		{"TaskRequest", nativeAgentBody, true},
		{"ChatCompletionRequest", openAIAgentBody, true},
		{"ChatCompletionRequest", `{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true,"stream_options":{"include_usage":true}}`, true},
		{"TaskRequest", `{"messages":[{"role":"user","content":"hi"}],"service_tier":"flex"}`, false},
		{"TaskRequest", `{"messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"a b"}}]}`, false},
		{"TaskRequest", `{"messages":[{"role":"robot","content":"hi"}]}`, false},
		{"ChatCompletionRequest", `{"messages":[{"role":"user","content":[{"type":"input_audio"}]}]}`, false},
		{"ChatCompletionRequest", `{"messages":[{"role":"user","content":"hi"}],"n":129}`, false},
		{"ChatCompletionRequest", `{"messages":[{"role":"user","content":"hi"}],"reasoning_effort":"huge"}`, false},
	}
	for _, c := range cases {
		var v any
		if err := json.Unmarshal([]byte(c.body), &v); err != nil {
			t.Fatal(err)
		}
		err := doc.Components.Schemas[c.schema].Value.VisitJSON(v, openapi3.MultiErrors())
		if (err == nil) != c.valid {
			t.Errorf("%s %s: %v, want valid %v", c.schema, c.body, err, c.valid)
		}
	}
}
