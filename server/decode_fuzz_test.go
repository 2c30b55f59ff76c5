package server

import (
	"bytes"
	"encoding/json"
	"mime"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/tollgate/tollgate/tasks"
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
	} {
		f.Add([]byte(seed.body), seed.ct)
	}
	e := echo.New()
	f.Fuzz(func(t *testing.T, body []byte, ct string) {
		var req tasks.Request
		err := decodeBody(e, body, ct, &req)
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
		hash := req.Hash() // panics on a request that does not re-encode
		again, err := json.Marshal(req)
		if err != nil {
			t.Fatalf("accepted request does not re-encode: %v", err)
		}
		var req2 tasks.Request
		if err := decodeBody(e, again, "application/json", &req2); err != nil && len(again) <= fuzzBodyLimit {
			t.Fatalf("re-encoded request %s is refused: %v", again, err)
		} else if err == nil && !bytes.Equal(req2.Hash(), hash) {
			t.Fatalf("hash changed across a round trip:\n first %q\nsecond %s", body, again)
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
