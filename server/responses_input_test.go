package server_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/accounts"
)

// oaiEnvelope reads an error in OpenAI's envelope, failing unless the
// body is one.
func oaiEnvelope(t *testing.T, r response) (typ string, param *string) {
	t.Helper()
	var env struct {
		Error *struct {
			Message *string `json:"message"`
			Type    string  `json:"type"`
			Param   *string `json:"param"`
			Code    *string `json:"code"`
		} `json:"error"`
	}
	if err := json.Unmarshal(r.body, &env); err != nil || env.Error == nil || env.Error.Message == nil || env.Error.Code == nil {
		t.Fatalf("%d %s: not OpenAI's error envelope", r.status, r.body)
	}
	return env.Error.Type, env.Error.Param
}

// Every bad request on the Responses endpoints is a 4xx in OpenAI's
// envelope naming the field, before anything is called or written.
func TestResponsesBadInputIsRefusedBeforeAnythingIsSpent(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{maxBody: 8192})
	key := e.owner("acme", accounts.RoleClient, 1_000_000_000)
	const fn = `{"type":"function","name":"f","parameters":{"type":"object"}}`
	body := func(rest string) string { return `{"model":"test-model","input":"hi"` + rest + `}` }
	items := func(list string) string { return `{"model":"test-model","input":[` + list + `]}` }
	// What chat cannot say goes as it came to an OpenAI-kind provider
	// (responses_native_test.go); an Anthropic one refuses it by name.
	ant := func(rest string) string { return `{"model":"backup-model","input":"hi"` + rest + `}` }
	antItems := func(list string) string { return `{"model":"backup-model","input":[` + list + `]}` }
	cases := []struct {
		name, method, path, body string
		header                   map[string]string
		status                   int
		param                    string // "" when the error names no field
	}{
		{"malformed JSON", "POST", "/v1/responses", `{"input":`, nil, 400, ""},
		{"not JSON", "POST", "/v1/responses", `hello`, nil, 400, "body"},
		{"empty body", "POST", "/v1/responses", ``, nil, 400, ""},
		{"two values", "POST", "/v1/responses", body("") + `{}`, nil, 400, ""},
		{"input a number", "POST", "/v1/responses", `{"input":5}`, nil, 400, "input"},
		{"temperature a string", "POST", "/v1/responses", body(`,"temperature":"hot"`), nil, 400, "temperature"},
		{"tools an object", "POST", "/v1/responses", body(`,"tools":{}`), nil, 400, "tools"},
		{"max_output_tokens a fraction", "POST", "/v1/responses", body(`,"max_output_tokens":1.5`), nil, 400, "max_output_tokens"},
		{"max_output_tokens zero", "POST", "/v1/responses", body(`,"max_output_tokens":0`), nil, 400, "max_output_tokens"},
		{"max_output_tokens huge", "POST", "/v1/responses", body(`,"max_output_tokens":99999999999999999999`), nil, 400, "max_output_tokens"},
		{"max_output_tokens above the bound", "POST", "/v1/responses", body(`,"max_output_tokens":2000000`), nil, 400, "max_output_tokens"},
		{"temperature out of range", "POST", "/v1/responses", body(`,"temperature":3`), nil, 400, "temperature"},
		{"temperature 1e999", "POST", "/v1/responses", body(`,"temperature":1e999`), nil, 400, "temperature"},
		{"metadata of numbers", "POST", "/v1/responses", body(`,"metadata":{"a":1}`), nil, 400, "metadata.a"},
		{"store a string", "POST", "/v1/responses", body(`,"store":"yes"`), nil, 400, "store"},
		{"escaped NUL in input", "POST", "/v1/responses", `{"input":"a\u0000b"}`, nil, 400, "input"},
		{"raw NUL in input", "POST", "/v1/responses", "{\"input\":\"a\x00b\"}", nil, 400, "input"},
		{"NUL in an item", "POST", "/v1/responses", items(`{"role":"user","content":"a\u0000"}`), nil, 400, "input[0].content"},
		{"unknown field", "POST", "/v1/responses", ant(`,"conversation":"conv_1"`), nil, 400, "conversation"},
		{"case variant of a field", "POST", "/v1/responses", body(`,"Temperature":1`), nil, 400, "Temperature"},
		{"hosted tool", "POST", "/v1/responses", ant(`,"tools":[{"type":"web_search"}]`), nil, 400, "tools[0]"},
		{"file_search tool", "POST", "/v1/responses", ant(`,"tools":[{"type":"file_search","vector_store_ids":["v"]}]`), nil, 400, "tools[0]"},
		{"unknown tool field", "POST", "/v1/responses", ant(`,"tools":[{"type":"function","name":"f","parametres":{}}]`), nil, 400, "tools[0].parametres"},
		{"tool schema that is no JSON Schema", "POST", "/v1/responses", body(`,"tools":[{"type":"function","name":"f","parameters":{"type":"objekt"}}]`), nil, 400, "tools[0].parameters"},
		{"hosted tool_choice", "POST", "/v1/responses", ant(`,"tools":[` + fn + `],"tool_choice":{"type":"web_search_preview"}`), nil, 400, "tool_choice"},
		{"tool_choice naming no tool", "POST", "/v1/responses", body(`,"tools":[` + fn + `],"tool_choice":{"type":"function","name":"g"}`), nil, 400, "tool_choice.name"},
		{"reasoning summary", "POST", "/v1/responses", ant(`,"reasoning":{"summary":"auto"}`), nil, 400, "reasoning.summary"},
		{"reasoning effort", "POST", "/v1/responses", body(`,"reasoning":{"effort":"huge"}`), nil, 400, "reasoning.effort"},
		{"include", "POST", "/v1/responses", ant(`,"include":["reasoning.encrypted_content"]`), nil, 400, "include"},
		{"truncation auto", "POST", "/v1/responses", ant(`,"truncation":"auto"`), nil, 400, "truncation"},
		{"json_schema that is no JSON Schema", "POST", "/v1/responses", body(`,"text":{"format":{"type":"json_schema","name":"a","schema":{"properties":[]}}}`), nil, 400, "text.format.schema"},
		{"json_schema without a name", "POST", "/v1/responses", body(`,"text":{"format":{"type":"json_schema","schema":{"type":"object"}}}`), nil, 400, "text.format.name"},
		{"format type", "POST", "/v1/responses", body(`,"text":{"format":{"type":"xml"}}`), nil, 400, "text.format.type"},
		{"background without store", "POST", "/v1/responses", body(`,"background":true,"store":false`), nil, 400, "store"},
		{"reasoning item", "POST", "/v1/responses", antItems(`{"role":"user","content":"x"},{"type":"reasoning","summary":[]}`), nil, 400, "input[1]"},
		{"unknown item field", "POST", "/v1/responses", antItems(`{"role":"user","content":"x","phase":"final_answer"}`), nil, 400, "input[0].phase"},
		{"item role", "POST", "/v1/responses", items(`{"role":"robot","content":"x"}`), nil, 400, "input[0].role"},
		{"input_file part", "POST", "/v1/responses", antItems(`{"role":"user","content":[{"type":"input_file","file_id":"f"}]}`), nil, 400, "input[0].content[0]"},
		{"image by file_id", "POST", "/v1/responses", antItems(`{"role":"user","content":[{"type":"input_image","file_id":"f","detail":"auto"}]}`), nil, 400, "input[0].content[0]"},
		{"member of another part type", "POST", "/v1/responses", antItems(`{"role":"user","content":[{"type":"input_text","text":"x","image_url":"https://a"}]}`), nil, 400, "input[0].content[0].image_url"},
		{"output_text in a user message", "POST", "/v1/responses", items(`{"role":"user","content":[{"type":"output_text","text":"x"}]}`), nil, 400, "input[0].content[0].type"},
		{"output of no call", "POST", "/v1/responses", items(`{"role":"user","content":"x"},{"type":"function_call_output","call_id":"c9","output":"r"}`), nil, 400, "input[1]"},
		{"function call without call_id", "POST", "/v1/responses", items(`{"type":"function_call","name":"f","arguments":"{}"}`), nil, 400, "input[0]"},
		{"empty input", "POST", "/v1/responses", `{"model":"test-model"}`, nil, 400, "input"},
		{"unknown model", "POST", "/v1/responses", `{"model":"no-such-model","input":"hi"}`, nil, 400, "model"},
		{"previous_response_id not an id", "POST", "/v1/responses", body(`,"previous_response_id":"resp_nothex"`), nil, 404, "previous_response_id"},
		{"previous_response_id unknown", "POST", "/v1/responses", body(`,"previous_response_id":"resp_0123456789abcdef0123456789abcdef"`), nil, 404, "previous_response_id"},
		{"oversized", "POST", "/v1/responses", `{"input":"` + strings.Repeat("x", 9000) + `"}`, nil, 413, ""},
		{"bad Idempotency-Key", "POST", "/v1/responses", body(""), map[string]string{"Idempotency-Key": strings.Repeat("k", 300)}, 400, ""},
		{"no key", "POST", "/v1/responses", body(""), map[string]string{"Authorization": ""}, 401, ""},
		{"wrong key", "POST", "/v1/responses", body(""), map[string]string{"Authorization": "Bearer tg_nope"}, 401, ""},
		{"GET unknown id", "GET", "/v1/responses/resp_0123456789abcdef0123456789abcdef", "", nil, 404, ""},
		{"GET malformed id", "GET", "/v1/responses/nope", "", nil, 404, ""},
		{"GET unknown parameter", "GET", "/v1/responses/resp_0123456789abcdef0123456789abcdef?after=3", "", nil, 400, "after"},
		{"GET starting_after negative", "GET", "/v1/responses/resp_0123456789abcdef0123456789abcdef?starting_after=-1", "", nil, 400, "starting_after"},
		{"GET stream not a boolean", "GET", "/v1/responses/resp_0123456789abcdef0123456789abcdef?stream=maybe", "", nil, 400, "stream"},
		{"GET include", "GET", "/v1/responses/resp_0123456789abcdef0123456789abcdef?include[]=message.output_text.logprobs", "", nil, 400, "include"},
		{"GET body of the wrong type", "GET", "/v1/responses/resp_0123456789abcdef0123456789abcdef", `{"stream":"yes"}`, nil, 400, "stream"},
		{"GET without a key", "GET", "/v1/responses/resp_0123456789abcdef0123456789abcdef", "", map[string]string{"Authorization": ""}, 401, ""},
		{"cancel unknown id", "POST", "/v1/responses/resp_0123456789abcdef0123456789abcdef/cancel", "", nil, 404, ""},
		{"cancel malformed id", "POST", "/v1/responses/resp_x/cancel", "", nil, 404, ""},
		{"cancel id with NUL", "POST", "/v1/responses/resp_%00/cancel", "", nil, 400, "id"},
		{"cancel without a key", "POST", "/v1/responses/resp_0123456789abcdef0123456789abcdef/cancel", "", map[string]string{"Authorization": ""}, 401, ""},
		{"DELETE unknown id", "DELETE", "/v1/responses/resp_0123456789abcdef0123456789abcdef", "", nil, 404, ""},
		{"DELETE without a key", "DELETE", "/v1/responses/resp_0123456789abcdef0123456789abcdef", "", map[string]string{"Authorization": ""}, 401, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var b []byte
			if c.body != "" {
				b = []byte(c.body)
			}
			if c.name == "empty body" {
				b = []byte{}
			}
			r := e.do(c.method, c.path, key, b, c.header)
			if r.status != c.status {
				t.Fatalf("%d %s, want %d", r.status, r.body, c.status)
			}
			typ, param := oaiEnvelope(t, r)
			switch {
			case c.status == 401 && typ != "authentication_error":
				t.Errorf("type %q, want authentication_error", typ)
			case c.status != 401 && typ != "invalid_request_error":
				t.Errorf("type %q, want invalid_request_error", typ)
			}
			if got := ""; param != nil {
				got = *param
				if got != c.param {
					t.Errorf("param %q, want %q; body %s", got, c.param, r.body)
				}
			} else if c.param != "" {
				t.Errorf("param null, want %q; body %s", c.param, r.body)
			}
		})
	}
	e.checkNothingWritten()
	// Nothing was consumed: a valid request passes.
	if r := e.do(http.MethodPost, "/v1/responses", key, []byte(body("")), nil); r.status != http.StatusOK {
		t.Errorf("valid request after refusals: %d %s, want 200", r.status, r.body)
	}
}

// The native API does not take the field the Responses API keeps on a
// task's request.
func TestNativeTaskRefusesConversation(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	key := e.owner("acme", accounts.RoleClient, 1_000_000)
	r := e.post(key, "k", []byte(`{"messages":[{"role":"user","content":"hi"}],"conversation":{"unstored":true}}`), nil)
	if r.status != http.StatusBadRequest || r.problemCode(t) != "invalid_request" {
		t.Fatalf("%d %s, want 400 invalid_request", r.status, r.body)
	}
	if got := problemFields(t, r); len(got) != 1 || got[0] != "conversation" {
		t.Errorf("fields %v, want conversation", got)
	}
	e.checkNothingWritten()
}
