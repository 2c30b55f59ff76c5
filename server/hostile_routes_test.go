package server_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/tollgate/tollgate/accounts"
	"github.com/tollgate/tollgate/server"
)

// hostileBodies are a valid body for every route that reads one, keyed by
// "METHOD pattern". Every leaf and every field name of each is attacked
// in turn. A route whose method sends a body but which is missing here
// fails the test, so a new route cannot escape it.
var hostileBodies = map[string]string{
	"POST /v1/tasks":                 `{"model":"test-model","messages":[{"role":"user","content":"hi"}],"max_tokens":16,"metadata":{"m":"v","n":1},"deadline_s":60}`,
	"POST /v1/chat/completions":      `{"model":"test-model","messages":[{"role":"user","content":"hi"}],"max_tokens":16,"n":1,"user":"u","metadata":{"m":"v"}}`,
	"POST /v1/routes/:name":          `{"input":{"product":"kettle"},"user":"u-1"}`,
	"PUT /v1/budgets/:owner":         `{"total_micros":1000,"period":"none","workloads":{"w":{"total_micros":5,"period":"none"}}}`,
	"POST /v1/budgets/:owner/topups": `{"amount_micros":5,"workload":"","note":"n"}`,
	"PUT /v1/owners/:owner/privacy":  `{"redaction_policy":"redact","body_retention_days":30,"metadata_retention_days":30}`,
	"POST /v1/responses": `{"model":"test-model","input":[{"role":"user","content":[{"type":"input_text","text":"hi"}]}],"instructions":"be brief",` +
		`"max_output_tokens":16,"metadata":{"m":"v"},"user":"u","tools":[{"type":"function","name":"f","description":"d","strict":false}],` +
		`"tool_choice":"auto","text":{"format":{"type":"text"},"verbosity":"low"},"reasoning":{"effort":"low"},"store":true}`,
	"POST /v1/messages": `{"model":"test-model","max_tokens":16,"system":"be brief","messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}],` +
		`"temperature":0.5,"top_k":5,"stop_sequences":["x"],"metadata":{"user_id":"u"}}`,
	"POST /v1/messages/count_tokens": `{"model":"test-model","system":"be brief","messages":[{"role":"user","content":"hi"}]}`,
	"POST /v1/embeddings":            `{"model":"test-model","input":["hi","there"],"dimensions":8,"encoding_format":"float","user":"u"}`,
	"POST /v1/keys":                  `{"owner":"acme","role":"client","workload":"w","name":"n","expires_at":"2099-01-01T00:00:00Z"}`,
	"PUT /v1/limits/:owner":          `{"requests_per_minute":60,"tokens_per_minute":100000,"workloads":{"batch":{"requests_per_minute":6}}}`,
	"PUT /v1/owners/:owner/webhook":  `{"url":"https://hooks.example.com/tollgate","events":["task.succeeded","task.failed"]}`,
	// These read no body: they are sent the hostile bodies all the same.
	"POST /v1/tasks/:id/cancel": ``,
	"POST /v1/tasks/:id/rerun":  ``,

	"POST /v1/responses/:id/cancel": ``,

	"POST /v1/owners/:owner/webhook/rotate": ``,
}

// freeForm are the members whose values any JSON may fill: only the
// string and number checks apply below them, not types or field names.
// freeKeys are maps whose keys are free but whose values are typed.
var (
	freeForm = map[string]bool{"metadata": true, "input": true}
	freeKeys = map[string]bool{"workloads": true}
)

// numericQuery are the query parameters that are numbers, per route.
var numericQuery = map[string][]string{
	"GET /v1/tasks":     {"limit"},
	"GET /v1/replays":   {"limit"},
	"GET /v1/usage":     {"limit"},
	"GET /v1/usage.csv": {"limit"},
	"GET /v1/audit":     {"cursor"},

	"GET /v1/responses/:id": {"starting_after"},
}

type hostileCase struct {
	name   string
	method string
	path   string
	header map[string]string
	body   []byte
	status int    // 0: any 4xx
	field  string // the field the problem must name; "" for none required
}

// Every route the router knows, read from the router itself, is tried
// with hostile input: NUL, invalid UTF-8 and overlong values in query
// parameters, path segments and headers; malformed, oversized, empty and
// wrongly typed bodies; NUL, lone surrogates and invalid UTF-8 in every
// string of a body; extreme numbers in every number; a case variant and a
// duplicate of every field; missing credentials; every method the path
// does not take. Each answer must be a 4xx within the client's timeout
// (never a 5xx, never a hang) that names the field where there is one: in
// a problem's errors, or in param in OpenAI's envelope.
func TestHostileInputOnEveryRoute(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{noWorkers: true, maxBody: 64 << 10})
	client := e.owner("acme", accounts.RoleClient, 1_000_000)
	admin := e.owner("ops", accounts.RoleAdmin, 0)
	hc := &http.Client{Timeout: 20 * time.Second} // a hang fails the case

	type route struct{ method, path string }
	var list []route
	methods := map[string][]string{}
	for _, r := range server.New(server.Deps{}).Routes() {
		if strings.HasPrefix(r.Path, "/console") {
			continue // the console's own handler, tested in console/
		}
		list = append(list, route{r.Method, r.Path})
		methods[r.Path] = append(methods[r.Path], r.Method)
	}
	if len(list) < 20 {
		t.Fatalf("the router lists %d routes: %v", len(list), list)
	}
	sort.Slice(list, func(i, j int) bool { return list[i].path+list[i].method < list[j].path+list[j].method })

	var cases, unauth []hostileCase
	for _, r := range list {
		id := r.method + " " + r.path
		key := client
		if strings.Contains(r.path, "/budgets") || strings.Contains(r.path, "/owners") || strings.Contains(r.path, "/admin") || r.path == "/v1/audit" || strings.HasPrefix(r.path, "/v1/keys") || strings.HasPrefix(r.path, "/v1/limits") {
			key = admin
		}
		concrete := strings.NewReplacer(":id", uuid.NewString(), ":owner", "acme", ":name", "tagline").Replace(r.path)
		base := func(name string, hdr map[string]string) hostileCase {
			h := map[string]string{"Authorization": "Bearer " + key, "Idempotency-Key": "k-" + uuid.NewString()}
			for k, v := range hdr {
				h[k] = v
			}
			return hostileCase{name: id + " " + name, method: r.method, path: concrete, header: h}
		}

		// Query parameters, path segments and read headers.
		for name, v := range map[string]string{"NUL": "a%00b", "invalid UTF-8": "a%FFb", "overlong": strings.Repeat("q", 3000)} {
			c := base("query "+name, nil)
			c.path, c.status, c.field = concrete+"?q="+v, 400, "q"
			cases = append(cases, c)
		}
		c := base("query name with NUL", nil)
		c.path, c.status = concrete+"?a%00b=1", 400
		cases = append(cases, c)
		for _, p := range numericQuery[id] {
			for _, v := range []string{"99999999999999999999", "-1", "1e3", "0x10", "%00"} {
				c := base("query "+p+"="+v, nil)
				c.path, c.status, c.field = concrete+"?"+p+"="+v, 400, p
				cases = append(cases, c)
			}
		}
		for _, seg := range strings.Split(r.path, "/") {
			if !strings.HasPrefix(seg, ":") {
				continue
			}
			for name, v := range map[string]string{"NUL": "a%00b", "invalid UTF-8": "a%FFb", "overlong": strings.Repeat("p", 300)} {
				c := base("path "+seg+" "+name, nil)
				c.path = strings.Replace(r.path, seg, v, 1)
				c.path = strings.NewReplacer(":id", uuid.NewString(), ":owner", "acme", ":name", "tagline").Replace(c.path)
				c.status, c.field = 400, seg[1:]
				cases = append(cases, c)
			}
		}
		for _, h := range []string{"X-Reason", "Idempotency-Key", "Prefer"} {
			c := base("header "+h+" invalid UTF-8", map[string]string{h: "wait=\xff\xfe"})
			c.status, c.field = 400, h
			cases = append(cases, c)
		}
		c = base("header Prefer overlong", map[string]string{"Prefer": "wait=1, " + strings.Repeat("x", 2000)})
		c.status, c.field = 400, "Prefer"
		cases = append(cases, c)

		// Credentials: run last, since 20 failures from one address earn
		// 429 until the minute ends (a 4xx too).
		if strings.HasPrefix(r.path, "/v1/") {
			c := base("no credentials", map[string]string{"Authorization": ""})
			unauth = append(unauth, c)
			c = base("credentials with invalid UTF-8", map[string]string{"Authorization": "Bearer tg_\xff\xfe"})
			unauth = append(unauth, c)
		}

		// Bodies.
		if r.method != http.MethodPost && r.method != http.MethodPut {
			continue
		}
		valid, ok := hostileBodies[id]
		if !ok {
			t.Errorf("%s takes a body but has no entry in hostileBodies", id)
			continue
		}
		openai := r.path == "/v1/chat/completions" || r.path == "/v1/responses" || r.path == "/v1/embeddings"
		generic := map[string]struct {
			body   string
			status int
		}{
			"malformed JSON":   {`{"messages": [`, 400},
			"empty body":       {``, 400},
			"top-level string": {`"just a string"`, 400},
			"top-level array":  {`[]`, 400},
			"deep nesting":     {strings.Repeat(`{"metadata":`, 5000) + "1" + strings.Repeat("}", 5000), 400},
			"oversized":        {`{"model":"` + strings.Repeat("x", 70<<10) + `"}`, 413},
			"raw NUL byte":     {"{\"model\":\"a\x00b\"}", 400},
			"trailing value":   {`{} {}`, 400},
		}
		for name, g := range generic {
			if valid == "" && (name == "empty body" || name == "top-level array" || name == "top-level string" || name == "trailing value") {
				continue // a route that reads no body may accept these
			}
			c := base("body "+name, nil)
			c.body = []byte(g.body)
			if valid != "" {
				c.status = g.status
				if name == "raw NUL byte" {
					c.field = "model" // the member whose string holds it
				}
			}
			cases = append(cases, c)
		}
		if valid == "" {
			continue
		}
		if !openai {
			c := base("body wrong content type", map[string]string{"Content-Type": "text/xml"})
			c.body, c.status = []byte(valid), 415
			cases = append(cases, c)
		}
		for _, m := range mutations(t, valid) {
			c := base("body "+m.name, nil)
			c.body, c.status, c.field = m.body, 400, m.field
			cases = append(cases, c)
		}
	}

	// Every method a path does not take: 405 with Allow.
	for path, allowed := range methods {
		concrete := strings.NewReplacer(":id", uuid.NewString(), ":owner", "acme", ":name", "tagline").Replace(path)
		for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
			if hasMethod(allowed, m) {
				continue
			}
			c := hostileCase{name: m + " " + path + " wrong method", method: m, path: concrete, status: 405,
				header: map[string]string{"Authorization": "Bearer " + client}}
			c.body = []byte(`{}`)
			cases = append(cases, c)
			t.Run(c.name+" Allow", func(t *testing.T) {
				r := hostileDo(t, hc, e.url, c)
				for _, a := range allowed {
					if !strings.Contains(r.header.Get("Allow"), a) {
						t.Errorf("Allow %q, want it to list %s", r.header.Get("Allow"), a)
					}
				}
			})
		}
	}

	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := hostileDo(t, hc, e.url, c)
			if r.status < 400 || r.status >= 500 || (c.status != 0 && r.status != c.status) {
				t.Fatalf("%s %s: %d %s, want %s", c.method, truncate([]byte(c.path)), r.status, truncate(r.body), wantStatus(c.status))
			}
			if r.status == 405 {
				want := "method_not_allowed"
				if strings.HasPrefix(c.path, "/v1/messages") {
					want = "invalid_request_error" // Anthropic's envelope has types, not codes
				}
				if code := problemField(t, r, "code"); code != want {
					t.Errorf("code %q, want method_not_allowed", code)
				}
			}
			if c.field != "" {
				// The member itself, or a part of it named more precisely.
				got := problemField(t, r, "field")
				if got != c.field && !strings.HasPrefix(got, c.field+"[") && !strings.HasPrefix(got, c.field+".") {
					t.Errorf("names field %q, want %q; body %s", got, c.field, truncate(r.body))
				}
			}
		})
	}
	for _, c := range unauth {
		t.Run(c.name, func(t *testing.T) {
			r := hostileDo(t, hc, e.url, c)
			if r.status != http.StatusUnauthorized && r.status != http.StatusTooManyRequests {
				t.Fatalf("%s %s: %d %s, want 401 (or 429 after 20 failures)", c.method, c.path, r.status, truncate(r.body))
			}
		})
	}
	e.checkNothingWritten()
}

func wantStatus(s int) string {
	if s == 0 {
		return "a 4xx"
	}
	return fmt.Sprint(s)
}

func hasMethod(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// hostileDo sends c without the contract check (wrong methods and hostile
// requests are, by design, not in openapi.yaml).
func hostileDo(t *testing.T, hc *http.Client, base string, c hostileCase) response {
	t.Helper()
	req, err := http.NewRequest(c.method, base+c.path, bytes.NewReader(c.body))
	if err != nil {
		t.Fatal(err)
	}
	if c.body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range c.header {
		if v == "" {
			req.Header.Del(k)
			continue
		}
		req.Header[http.CanonicalHeaderKey(k)] = []string{v}
	}
	res, err := hc.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v (a hang or a dropped connection)", c.method, truncate([]byte(c.path)), err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return response{status: res.StatusCode, header: res.Header, body: b}
}

// problemField reads "code" or the named field ("field") of an error
// answer: a problem's first errors[].field, or param in OpenAI's envelope.
func problemField(t *testing.T, r response, what string) string {
	t.Helper()
	var p struct {
		Code   string `json:"code"`
		Errors []struct {
			Field string `json:"field"`
		} `json:"errors"`
		Type  string `json:"type"`
		Error *struct {
			Code    string  `json:"code"`
			Param   *string `json:"param"`
			Type    string  `json:"type"`
			Message string  `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(r.body, &p); err != nil {
		t.Fatalf("error body %q is not JSON: %v", truncate(r.body), err)
	}
	switch {
	case p.Type == "error" && p.Error != nil && what == "code":
		// Anthropic's envelope: its type is the nearest thing to a code.
		return p.Error.Type
	case p.Type == "error" && p.Error != nil:
		// Anthropic's envelope has no field member: the message names it
		// first, "field: reason".
		field, _, _ := strings.Cut(p.Error.Message, ": ")
		return field
	case p.Error != nil && what == "code":
		return p.Error.Code
	case p.Error != nil && p.Error.Param != nil:
		return *p.Error.Param
	case what == "code":
		return p.Code
	case len(p.Errors) > 0:
		return p.Errors[0].Field
	}
	return ""
}

type mutation struct {
	name, field string
	body        []byte
}

// mutations attacks every leaf and every field name of the valid body:
// NUL, a lone surrogate and invalid UTF-8 in strings, out-of-range and
// fractional numbers, a wrong type, a case variant of the name and the
// same name twice. Each must be refused naming the member's path.
func mutations(t *testing.T, valid string) []mutation {
	t.Helper()
	var root any
	dec := json.NewDecoder(strings.NewReader(valid))
	dec.UseNumber()
	if err := dec.Decode(&root); err != nil {
		t.Fatalf("hostileBodies entry %s: %v", valid, err)
	}
	const hole = "\x01hostile\x01"
	render := func(v any, raw string) []byte {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		quoted, _ := json.Marshal(hole)
		return bytes.Replace(b, quoted, []byte(raw), 1)
	}
	var out []mutation
	var walk func(v any, path string, typed, keysFree bool, set func(any) any)
	walk = func(v any, path string, typed, keysFree bool, set func(any) any) {
		add := func(name, raw string) {
			out = append(out, mutation{name: path + " " + name, field: path, body: render(set(hole), raw)})
		}
		switch x := v.(type) {
		case string:
			add("NUL", `"a\u0000b"`)
			add("lone surrogate", `"\ud800x"`)
			add("invalid UTF-8", "\"a\xff\xfeb\"")
			if typed {
				add("wrong type", `[1]`)
			}
		case json.Number:
			add("1e999999", `1e999999`)
			add("1e-999999", `1e-999999`)
			add("1e400", `1e400`)
			if typed {
				add("fraction", `1.5`)
				add("beyond int64", `9223372036854775808`)
				add("wrong type", `"16"`)
			}
		case []any:
			for i := range x {
				i := i
				walk(x[i], fmt.Sprintf("%s[%d]", path, i), typed, false, func(nv any) any {
					cp := append([]any(nil), x...)
					cp[i] = nv
					return set(cp)
				})
			}
		case map[string]any:
			for k := range x {
				k := k
				child := k
				if path != "" {
					child = path + "." + k
				}
				walk(x[k], child, typed && !freeForm[k], typed && freeKeys[k], func(nv any) any {
					cp := map[string]any{}
					for kk, vv := range x {
						cp[kk] = vv
					}
					cp[k] = nv
					return set(cp)
				})
				if !typed || keysFree {
					continue // map keys: any name, case variants included
				}
				variant := strings.ToUpper(k[:1]) + k[1:]
				if variant == k {
					variant = strings.ToLower(k)
				}
				vpath := variant
				if path != "" {
					vpath = path + "." + variant
				}
				for name, dupKey := range map[string]string{"case variant": variant, "duplicate": k} {
					cp := map[string]any{}
					for kk, vv := range x {
						cp[kk] = vv
					}
					marker := "\x02dup\x02"
					cp[marker] = x[k]
					b := render(set(cp), "")
					quoted, _ := json.Marshal(marker)
					b = bytes.Replace(b, quoted, []byte(`"`+dupKey+`"`), 1)
					field := vpath
					if name == "duplicate" {
						field = child
					}
					out = append(out, mutation{name: child + " " + name, field: field, body: b})
				}
			}
		}
	}
	walk(root, "", true, false, func(v any) any { return v })
	return out
}
