package server

import (
	"bytes"
	"encoding/json"
	"mime"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/labstack/echo/v4"
)

// fuzzBodyLimit is small so that the fuzzer reaches the size limit too.
const fuzzBodyLimit = 2048

// FuzzDecodeTaskRequest feeds arbitrary bodies and content types to the
// decoding of POST /v1/tasks (decodeJSON, then Validate, then Hash) and
// checks that hostile input only ever earns a clear 4xx: 400, 413 or 415,
// never a panic or a 5xx. A body that is accepted must be exactly one JSON
// value, within the limit, of a JSON content type, and its canonical form
// must be stable: decoding the re-encoded request gives the same hash, so
// a retry of an accepted request is recognised as the same request.
func FuzzDecodeTaskRequest(f *testing.F) {
	for _, seed := range []struct{ body, ct string }{
		{`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"max_tokens":16}`, "application/json"},
		{`{"messages":[{"role":"user","content":"hi"}],"metadata":{"a":[1,2.5e300,{"b":null}]},"deadline_s":60}`, ""},
		{`{"messages":[{"role":"user","content":"hi"}]} {}`, "application/json"},
		{`{"messages":[{"role":"user","content":"hi"}],"extra":1}`, "application/json"},
		{`{"model":"a","model":"b","messages":[]}`, "application/json; charset=utf-8"},
		{`{"max_tokens":-1}`, "application/problem+json"},
		{`{"max_tokens":99999999999999999999}`, "application/json"},
		{`{"max_tokens":1.5}`, "application/json"},
		{"{\"messages\":[{\"role\":\"user\",\"content\":\"\xff\xfe\"}]}", "application/json"},
		{`[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]`, "application/json"},
		{`{"messages":[{"role":"user","content":"` + strings.Repeat("x", 3000) + `"}]}`, "application/json"},
		{`{"messages":[{"role":"user","content":"hi"}]}`, "text/plain"},
		{`{"messages":`, "application/json; charset"},
		{``, "application/json"},
		{`{"messages":[{"role":"user","content":"hi"}],"max_tokens":16,"MAX_TOKENS":1000000}`, "application/json"},
		{`{"messages":[{"role":"user","content":"hi","Content":"x"}],"max_toKens":5}`, "application/json"},
		{`{"messages":[{"role":"user","content":"a\u0000b"}]}`, "application/json"},
		{`{"messages":[{"role":"user","content":"\ud800"}]}`, "application/json"},
		{`{"messages":[{"role":"user","content":"hi"}],"metadata":{"n":1e999999,"m":1e-999999}}`, "application/json"},
		{`{"messages":[{"role":"user","content":"hi"}],"max_tokens":1e3,"deadline_s":6.0e1}`, "application/json"},
		{`{"route":"tagline","input":{"product":"x\u0000"}}`, "application/json"},
		{`{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBO"}}]},{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c","content":"r"}],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"a":{"$ref":"#/properties/a"}}}}}],"tool_choice":{"type":"function","function":{"name":"f"}}}`, "application/json"},
		{`{"messages":[{"role":"user","content":"hi"}],"response_format":{"type":"json_schema","json_schema":{"name":"s","schema":{"type":"object","TYPE":1}}},"passthrough":{"service_tier":"flex","Store":true},"stop":"x","logit_bias":{"1":-100}}`, "application/json"},
	} {
		f.Add([]byte(seed.body), seed.ct)
	}
	e := echo.New()
	f.Fuzz(func(t *testing.T, body []byte, ct string) {
		var in taskInput
		err := decodeBody(e, body, ct, &in)
		req := in.Request
		if err == nil {
			err = req.Validate()
		}
		if err != nil {
			p := problemOf(err)
			switch p.Status {
			case http.StatusBadRequest, http.StatusRequestEntityTooLarge, http.StatusUnsupportedMediaType:
			default:
				t.Fatalf("body %q (Content-Type %q): status %d %s (%v), want 400, 413 or 415", body, ct, p.Status, p.Code, err)
			}
			if p.Code == "" || titles[p.Code] == "" {
				t.Fatalf("body %q: problem code %q has no title", body, p.Code)
			}
			return
		}
		if !json.Valid(body) {
			t.Fatalf("accepted a body that is not exactly one JSON value: %q", body)
		}
		if len(body) > fuzzBodyLimit {
			t.Fatalf("accepted a %d-byte body over the %d-byte limit", len(body), fuzzBodyLimit)
		}
		if ct != "" {
			mt, _, perr := mime.ParseMediaType(ct)
			if perr != nil || (mt != "application/json" && !strings.HasSuffix(mt, "+json")) {
				t.Fatalf("accepted Content-Type %q", ct)
			}
		}
		checkAccepted(t, body, in, taskFields)
		hash := req.Hash() // panics on a request that does not re-encode
		again, err := json.Marshal(req)
		if err != nil {
			t.Fatalf("accepted request does not re-encode: %v", err)
		}
		var in2 taskInput
		err = decodeBody(e, again, "application/json", &in2)
		req2 := in2.Request
		if err != nil && len(again) <= fuzzBodyLimit {
			t.Fatalf("re-encoded request %s is refused: %v", again, err)
		} else if err == nil && !bytes.Equal(req2.Hash(), hash) {
			t.Fatalf("hash changed across a round trip:\n first %q\nsecond %s", body, again)
		}
	})
}

// The member names of each level of the bodies the fuzz targets decode.
var (
	chatFields = []string{"model", "messages", "max_tokens", "max_completion_tokens", "tools", "tool_choice", "parallel_tool_calls",
		"response_format", "temperature", "top_p", "seed", "stop", "presence_penalty", "frequency_penalty", "logit_bias",
		"logprobs", "top_logprobs", "n", "user", "safety_identifier", "reasoning_effort", "verbosity"}
	taskFields    = fieldSet(append(chatFields, "passthrough", "metadata", "json_mode", "deadline_s", "route", "input")...)
	messageFields = fieldSet("role", "content", "name", "tool_calls", "tool_call_id", "refusal")
	oaiFields     = fieldSet(append(chatFields, "passthrough", "stream", "stream_options", "metadata")...)
	oaiMsgFields  = messageFields
)

func fieldSet(names ...string) map[string]bool {
	m := map[string]bool{}
	for _, n := range names {
		m[n] = true
	}
	return m
}

// checkAccepted fails unless what an accepted body decoded into holds no
// NUL and re-encodes, and unless every top-level key of the body that
// names a field case-insensitively names it exactly, so that no case
// variant can have bound to a field (in messages too, when present).
func checkAccepted(t *testing.T, body []byte, decoded any, fields map[string]bool) {
	t.Helper()
	out, err := json.Marshal(decoded)
	if err != nil {
		t.Fatalf("accepted body %q does not re-encode: %v", body, err)
	}
	if bytes.Contains(out, []byte(`\u0000`)) {
		t.Fatalf("accepted body %q decodes to a NUL: %s", body, out)
	}
	var top map[string]json.RawMessage
	if json.Unmarshal(body, &top) != nil {
		return
	}
	exact(t, body, top, fields)
	var msgs []map[string]json.RawMessage
	if raw, ok := top["messages"]; ok && json.Unmarshal(raw, &msgs) == nil {
		for _, m := range msgs {
			exact(t, body, m, messageFields)
		}
	}
}

func exact(t *testing.T, body []byte, obj map[string]json.RawMessage, fields map[string]bool) {
	t.Helper()
	for k := range obj {
		for f := range fields {
			if strings.EqualFold(k, f) && k != f {
				t.Fatalf("accepted body %q binds key %q to field %q", body, k, f)
			}
		}
	}
}

// FuzzDecodeChatCompletion feeds arbitrary bodies to the decoding of POST
// /v1/chat/completions (the chat dialect's decode, then the mapping to a task request
// and its validation): only ever a 400 or 413, never a panic or another
// status; an accepted body holds no NUL and binds no case variant of a
// field (unknown fields are ignored there, case variants are not).
func FuzzDecodeChatCompletion(f *testing.F) {
	for _, seed := range []string{
		`{"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":16}`,
		`{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}],"max_completion_tokens":1e3,"n":1.0}`,
		`{"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":16,"MAX_TOKENS":1000000}`,
		`{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"a","TEXT":"b"}]}]}`,
		`{"model":"m","messages":[{"role":"user","content":"hi"}],"metadata":{"x":1e999999},"temperature":0.2}`,
		`{"model":"m","messages":[{"role":"user","content":"\u0000"}],"user":"\udc00"}`,
		`{"model":"m","messages":[{"role":"developer","content":"hi"}],"stream":true,"stream_options":{"include_usage":true}}`,
		`{"model":"m","messages":[{"role":"user","content":"hi"}],"service_tier":"flex","prediction":{"type":"content","content":"x"},"passthrough":{"a":1},"n":2,"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"auto"}`,
	} {
		f.Add([]byte(seed))
	}
	e := echo.New()
	f.Fuzz(func(t *testing.T, body []byte) {
		r := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", bytes.NewReader(body))
		_, a, err := oaiChat{}.decode(e.NewContext(r, httptest.NewRecorder()), &Deps{MaxBodyBytes: fuzzBodyLimit})
		req := a.req
		if err == nil {
			err = req.Validate()
		}
		if err != nil {
			status, envelope := oaiError(err)
			if status != http.StatusBadRequest && status != http.StatusRequestEntityTooLarge {
				t.Fatalf("body %q: status %d (%v), want 400 or 413", body, status, err)
			}
			if _, ok := envelope["error"].(map[string]any)["param"]; !ok {
				t.Fatalf("body %q: OpenAI error without param", body)
			}
			return
		}
		var top map[string]json.RawMessage
		if json.Unmarshal(body, &top) == nil {
			exact(t, body, top, oaiFields)
			var msgs []map[string]json.RawMessage
			if json.Unmarshal(top["messages"], &msgs) == nil {
				for _, m := range msgs {
					exact(t, body, m, oaiMsgFields)
				}
			}
		}
		if out, _ := json.Marshal(req); bytes.Contains(out, []byte(`\u0000`)) {
			t.Fatalf("accepted body %q maps to a NUL: %s", body, out)
		}
		_ = req.Hash()
	})
}

// FuzzDecodeAdminBodies feeds arbitrary bodies to the decoders of the
// route call, budget, top-up and privacy bodies: a 400 or 413, never a
// panic or a 5xx; an accepted body holds no NUL and binds no case variant.
func FuzzDecodeAdminBodies(f *testing.F) {
	for _, seed := range []struct {
		kind uint8
		body string
	}{
		{0, `{"input":{"product":"kettle"},"user":"u-1"}`},
		{0, `{"input":{"product":"k"},"user":"a\u0000b","USER":"x"}`},
		{1, `{"total_micros":9223372036854775807,"period":"month","workloads":{"w":{"total_micros":1e3}}}`},
		{1, `{"total_micros":9223372036854775808}`},
		{1, `{"total_micros":1,"Total_Micros":2}`},
		{2, `{"amount_micros":1.0,"workload":"w","note":"n"}`},
		{2, `{"amount_micros":1e999999}`},
		{3, `{"redaction_policy":"hash-only","body_retention_days":30,"metadata_retention_days":1e2}`},
		{3, `{"redaction_policy":"\ud800x"}`},
	} {
		f.Add(seed.kind, []byte(seed.body))
	}
	e := echo.New()
	type target struct {
		new    func() any
		fields map[string]bool
	}
	targets := []target{
		{func() any { return new(routeCall) }, fieldSet("input", "user")},
		{func() any { return new(budgetInput) }, fieldSet("total_micros", "period", "workloads")},
		{func() any { return new(topupInput) }, fieldSet("amount_micros", "workload", "note")},
		{func() any { return new(privacyInput) }, fieldSet("redaction_policy", "body_retention_days", "metadata_retention_days")},
	}
	f.Fuzz(func(t *testing.T, kind uint8, body []byte) {
		tg := targets[int(kind)%len(targets)]
		dst := tg.new()
		if err := decodeBody(e, body, "application/json", dst); err != nil {
			p := problemOf(err)
			if p.Status != http.StatusBadRequest && p.Status != http.StatusRequestEntityTooLarge {
				t.Fatalf("body %q: status %d %s (%v), want 400 or 413", body, p.Status, p.Code, err)
			}
			return
		}
		checkAccepted(t, body, dst, tg.fields)
	})
}

// FuzzRequestParams feeds arbitrary query strings, path segments and
// header values to the edge check every route runs (checkParams) and to
// the Prefer: wait parser: never a panic; what passes is valid UTF-8 with
// no NUL; a wait is never negative nor above its cap.
func FuzzRequestParams(f *testing.F) {
	f.Add("q=kettle&limit=10", "acme", "ticket-1", "wait=5")
	f.Add("q=%00", "a%FFb", "\xff", "wait=9300000000")
	f.Add("owner=%C3%28&x=1", "\x00", "", "wait=99999999999999999999999")
	f.Add("%ZZ=1;a=b", "", "r\u00e9", "respond-async, wait=-1")
	e := echo.New()
	e.GET("/v1/budgets/:owner", func(c echo.Context) error { return nil })
	const maxWait = 60 * time.Second
	f.Fuzz(func(t *testing.T, query, owner, reason, prefer string) {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.URL.RawQuery = query
		r.Header.Set("X-Reason", reason)
		r.Header.Set("Prefer", prefer)
		c := e.NewContext(r, httptest.NewRecorder())
		c.SetPath("/v1/budgets/:owner")
		c.SetParamNames("owner")
		c.SetParamValues(owner)
		if err := paramsProblem(c); err != nil {
			if p := problemOf(err); p.Status != http.StatusBadRequest || len(p.Errors) != 1 {
				t.Fatalf("status %d with %d field errors, want 400 naming one field", p.Status, len(p.Errors))
			}
		} else {
			for name, vs := range c.QueryParams() {
				for _, v := range append(vs, name) {
					if !utf8.ValidString(v) || strings.ContainsRune(v, 0) {
						t.Fatalf("query %q passed with %q", query, v)
					}
				}
			}
			for _, v := range []string{owner, reason, prefer} {
				if !utf8.ValidString(v) || strings.ContainsRune(v, 0) {
					t.Fatalf("%q passed", v)
				}
			}
		}
		d, set := preferWait(prefer, maxWait)
		if d < 0 || d > maxWait || (!set && d != 0) {
			t.Fatalf("Prefer %q: wait %v (set %v), want within [0, %v]", prefer, d, set, maxWait)
		}
	})
}

func decodeBody(e *echo.Echo, body []byte, ct string, dst any) error {
	r := httptest.NewRequest(http.MethodPost, "/v1/tasks", bytes.NewReader(body))
	if ct != "" {
		r.Header.Set(echo.HeaderContentType, ct)
	}
	return decodeJSON(e.NewContext(r, httptest.NewRecorder()), fuzzBodyLimit, dst)
}
