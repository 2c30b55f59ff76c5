package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	"github.com/tollgate/tollgate/accounts"
	"github.com/tollgate/tollgate/tasks"
)

// goSpeak reports whether a public answer speaks in Go's terms rather
// than the API's: a Go field path, a Go type, int64's range or a strconv
// error.
func goSpeak(body []byte) bool {
	for _, w := range []string{"Request.", "int64", "9223372036854775807", "strconv", "json: ", "invalid character"} {
		if strings.Contains(string(body), w) {
			return true
		}
	}
	return false
}

// Numbers are JSON numbers, not Go types: an integral 1.0 or 1e3 is a
// whole number, a fraction or an out-of-range one is refused naming the
// field (never a Go type or a Go field path), metadata numbers are bounded
// to what PostgreSQL's numeric holds, a case variant of a field is refused
// instead of silently winning, and Prefer: wait beyond any cap waits the
// cap, never a negative time.
func TestNumbersFieldNamesAndWaitsAtTheEdge(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	key := e.owner("acme", accounts.RoleClient, 100_000_000)
	msgs := `"messages":[{"role":"user","content":"hi"}]`

	accepted := []struct{ name, body string }{
		{"max_tokens 1.0", `{` + msgs + `,"max_tokens":1.0}`},
		{"max_tokens 1e3", `{` + msgs + `,"max_tokens":1e3}`},
		{"deadline_s 6.0E1", `{` + msgs + `,"deadline_s":6.0E1}`},
		{"metadata within float64", `{` + msgs + `,"metadata":{"n":1.7e308,"m":-2.5e-300}}`},
	}
	for i, c := range accepted {
		r := e.post(key, fmt.Sprintf("ok-%d", i), []byte(c.body), nil)
		if r.status != http.StatusAccepted {
			t.Errorf("%s: %d %s, want 202", c.name, r.status, r.body)
		}
	}
	var maxTokens int64
	if err := e.pool.QueryRow(context.Background(), `SELECT (request->>'max_tokens')::bigint FROM tasks WHERE idempotency_key = $1`, e.tasks.StoredKey("ok-1")).Scan(&maxTokens); err != nil || maxTokens != 1000 {
		t.Errorf("stored max_tokens = %d (%v), want 1000", maxTokens, err)
	}

	// msg, when given, is the whole reason: the range the API documents,
	// whatever the number, never Go's int64 range or a decoder's words.
	const tokens, deadline = "must be between 1 and 1000000", "must be between 1 and 604800 seconds"
	refused := []struct{ name, body, field, msg string }{
		{"max_tokens fraction", `{` + msgs + `,"max_tokens":1.5}`, "max_tokens", "must be a whole number between 1 and 1000000"},
		{"max_tokens beyond int64", `{` + msgs + `,"max_tokens":1e20}`, "max_tokens", tokens},
		{"max_tokens 0", `{` + msgs + `,"max_tokens":0}`, "max_tokens", tokens},
		{"max_tokens 0.0", `{` + msgs + `,"max_tokens":0.0}`, "max_tokens", tokens},
		{"max_tokens -1", `{` + msgs + `,"max_tokens":-1}`, "max_tokens", tokens},
		{"max_tokens 1e30", `{` + msgs + `,"max_tokens":1e30}`, "max_tokens", tokens},
		{"max_tokens int64's maximum + 1", `{` + msgs + `,"max_tokens":9223372036854775808}`, "max_tokens", tokens},
		{"max_tokens int64's minimum - 1", `{` + msgs + `,"max_tokens":-9223372036854775809}`, "max_tokens", tokens},
		{"max_tokens 1e999999", `{` + msgs + `,"max_tokens":1e999999}`, "max_tokens", tokens},
		{"max_tokens as a string", `{` + msgs + `,"max_tokens":"16"}`, "max_tokens", "must be a whole number between 1 and 1000000, not a string"},
		{"max_tokens NaN as a string", `{` + msgs + `,"max_tokens":"NaN"}`, "max_tokens", "must be a whole number between 1 and 1000000, not a string (NaN is not a number)"},
		{"max_tokens NaN", `{` + msgs + `,"max_tokens":NaN}`, "max_tokens", "must be a whole number between 1 and 1000000 (NaN is not a number)"},
		{"max_completion_tokens 0", `{` + msgs + `,"max_completion_tokens":0}`, "max_completion_tokens", tokens},
		{"deadline_s 0", `{` + msgs + `,"deadline_s":0}`, "deadline_s", deadline},
		{"deadline_s 1e30", `{` + msgs + `,"deadline_s":1e30}`, "deadline_s", deadline},
		{"deadline_s 1.5", `{` + msgs + `,"deadline_s":1.5}`, "deadline_s", "must be a whole number between 1 and 604800 seconds"},
		{"deadline_s -Infinity", `{` + msgs + `,"deadline_s":-Infinity}`, "deadline_s", "must be a whole number between 1 and 604800 seconds (-Infinity is not a finite number)"},
		{"temperature NaN", `{` + msgs + `,"temperature":NaN}`, "temperature", "must be a number between 0 and 2 (NaN is not a number)"},
		{"temperature Infinity", `{` + msgs + `,"temperature":Infinity}`, "temperature", "must be a number between 0 and 2 (Infinity is not a finite number)"},
		{"temperature Infinity as a string", `{` + msgs + `,"temperature":"Infinity"}`, "temperature", "must be a number between 0 and 2, not a string (Infinity is not a finite number)"},
		{"temperature 1e400", `{` + msgs + `,"temperature":1e400}`, "temperature", "must be between 0 and 2"},
		{"top_p -1e400", `{` + msgs + `,"top_p":-1e400}`, "top_p", "must be between 0 and 1"},
		{"n 0", `{` + msgs + `,"n":0}`, "n", "must be between 1 and 128"},
		{"top_k 1e30", `{` + msgs + `,"top_k":1e30}`, "top_k", "must be between 0 and 1000000"},
		{"top_logprobs 1e30", `{` + msgs + `,"logprobs":true,"top_logprobs":1e30}`, "top_logprobs", "must be between 0 and 20"},
		{"presence_penalty 1e400", `{` + msgs + `,"presence_penalty":1e400}`, "presence_penalty", "must be between -2 and 2"},
		{"seed beyond OpenAI's range", `{` + msgs + `,"seed":9223372036854775808}`, "seed", "must be between -9223372036854775808 and 9223372036854775807"},
		{"logit_bias 1e30", `{` + msgs + `,"logit_bias":{"5":1e30}}`, `logit_bias["5"]`, "must be between -100 and 100"},
		{"thinking budget 1e30", `{` + msgs + `,"thinking":{"type":"enabled","budget_tokens":1e30}}`, "thinking.budget_tokens", "must be between 1024 and 999999"},
		{"metadata 1e999999", `{` + msgs + `,"metadata":{"n":1e999999}}`, "metadata.n", ""},
		{"metadata 1e-999999", `{` + msgs + `,"metadata":{"n":1e-999999}}`, "metadata.n", ""},
		{"metadata nested 1e400", `{` + msgs + `,"metadata":{"a":[{"b":1e400}]}}`, "metadata.a[0].b", ""},
		{"metadata NaN", `{` + msgs + `,"metadata":{"a":[NaN]}}`, "metadata.a[0]", "must be a finite JSON number (NaN is not a number)"},
		{"case variant MAX_TOKENS", `{` + msgs + `,"max_tokens":16,"MAX_TOKENS":1000000}`, "MAX_TOKENS", ""},
		{"case variant with the Kelvin sign", `{` + msgs + `,"max_to` + "\u212a" + `ens":16}`, `["max_to` + "\u212a" + `ens"]`, ""},
		{"case variant in a message", `{"messages":[{"role":"user","content":"hi","Content":"x"}]}`, "messages[0].Content", ""},
		{"NUL in content", `{"messages":[{"role":"user","content":"a\u0000b"}]}`, "messages[0].content", ""},
		{"NUL in a metadata key", `{` + msgs + `,"metadata":{"a\u0000":1}}`, `metadata["a\x00"]`, ""},
	}
	for i, c := range refused {
		r := e.post(key, fmt.Sprintf("bad-%d", i), []byte(c.body), nil)
		if r.status != http.StatusBadRequest {
			t.Errorf("%s: %d %s, want 400", c.name, r.status, r.body)
			continue
		}
		var p struct {
			Detail string             `json:"detail"`
			Errors []tasks.FieldError `json:"errors"`
		}
		_ = json.Unmarshal(r.body, &p)
		if len(p.Errors) == 0 || p.Errors[0].Field != c.field {
			t.Errorf("%s: errors %+v, want field %q", c.name, p.Errors, c.field)
			continue
		}
		if c.msg != "" {
			if diff := cmp.Diff(tasks.FieldError{Field: c.field, Message: c.msg}, p.Errors[0]); diff != "" {
				t.Errorf("%s: mismatch (-want +got):\n%s", c.name, diff)
			}
			if want := c.field + " " + c.msg + "."; p.Detail != want {
				t.Errorf("%s: detail %q, want %q", c.name, p.Detail, want)
			}
		}
		if goSpeak(r.body) && c.field != "seed" {
			t.Errorf("%s: a Go name or range in a public message: %s", c.name, r.body)
		}
	}

	// The OpenAI-compatible decoder: the same rules, in OpenAI's envelope.
	for _, c := range []struct{ name, body, param string }{
		{"case variant", `{"model":"test-model",` + msgs + `,"max_tokens":16,"MAX_TOKENS":1000000}`, "MAX_TOKENS"},
		{"case variant in a text part", `{"model":"test-model","messages":[{"role":"user","content":[{"type":"text","text":"a","TEXT":"b"}]}]}`, "messages[0].content[0].TEXT"},
		{"fraction", `{"model":"test-model",` + msgs + `,"max_tokens":0.5}`, "max_tokens"},
		{"NUL in user", `{"model":"test-model",` + msgs + `,"user":"\u0000"}`, "user"},
	} {
		r := e.do(http.MethodPost, "/v1/chat/completions", key, []byte(c.body), nil)
		var env struct {
			Error struct {
				Param *string `json:"param"`
			} `json:"error"`
		}
		_ = json.Unmarshal(r.body, &env)
		if r.status != http.StatusBadRequest || env.Error.Param == nil || *env.Error.Param != c.param {
			t.Errorf("chat completions %s: %d %s, want 400 with param %q", c.name, r.status, r.body, c.param)
		}
	}
	r := e.do(http.MethodPost, "/v1/chat/completions", key, []byte(`{"model":"test-model",`+msgs+`,"max_tokens":1e1,"n":1.0}`), nil)
	if r.status != http.StatusOK {
		t.Errorf("chat completions with max_tokens 1e1 and n 1.0: %d %s, want 200", r.status, r.body)
	}

	// Prefer: wait beyond what a Duration holds: the cap, never negative.
	r = e.post(key, "wait-huge", taskBody("hi", 5), map[string]string{"Prefer": "wait=9300000000"})
	if r.status != http.StatusOK || r.header.Get("Preference-Applied") != "wait=60" {
		t.Errorf("Prefer: wait=9300000000: %d Preference-Applied %q, want 200 and wait=60", r.status, r.header.Get("Preference-Applied"))
	}
	id := r.task(t).ID
	for _, w := range []string{"wait=9300000000", "wait=99999999999999999999999"} {
		r := e.do(http.MethodGet, "/v1/tasks/"+id, key, nil, map[string]string{"Prefer": w})
		if r.status != http.StatusOK || r.header.Get("Preference-Applied") != "wait=60" {
			t.Errorf("GET with Prefer: %s: %d Preference-Applied %q, want 200 and wait=60", w, r.status, r.header.Get("Preference-Applied"))
		}
	}
}

// A NUL or invalid UTF-8 in a query parameter, an owner path segment,
// X-Reason or a route's user is a 400 naming it, never a 500 from
// PostgreSQL refusing the text.
func TestHostileTextOutsideBodiesIsNamed(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{noWorkers: true})
	key := e.owner("acme", accounts.RoleClient, 1_000_000)
	support := e.owner("help", accounts.RoleSupport, 0)
	admin := e.owner("ops", accounts.RoleAdmin, 0)
	id := e.submit(key, "k1", taskBody("hello", 5))
	cases := []struct {
		name, method, path, key string
		header                  map[string]string
		body                    string
		field                   string
	}{
		{"q with NUL", "GET", "/v1/replays?q=a%00b", support, nil, "", "q"},
		{"model with invalid UTF-8", "GET", "/v1/replays?model=%FF", support, nil, "", "model"},
		{"owner query with NUL", "GET", "/v1/usage?owner=%00", admin, nil, "", "owner"},
		{"audit task_id with invalid UTF-8", "GET", "/v1/audit?task_id=%C3%28", admin, nil, "", "task_id"},
		{"owner path with NUL", "GET", "/v1/budgets/a%00b", admin, nil, "", "owner"},
		{"owner path with invalid UTF-8", "PUT", "/v1/owners/%FF/privacy", admin, nil, `{"redaction_policy":"redact","body_retention_days":1,"metadata_retention_days":1}`, "owner"},
		{"topup owner with NUL", "POST", "/v1/budgets/%00/topups", admin, nil, `{"amount_micros":1}`, "owner"},
		{"X-Reason with invalid UTF-8", "GET", "/v1/tasks/" + id + "/replay", support, map[string]string{"X-Reason": "ticket \xff\xfe 42"}, "", "X-Reason"},
		{"route user with NUL", "POST", "/v1/routes/tagline", key, map[string]string{"Idempotency-Key": "r1"}, `{"input":{"product":"kettle"},"user":"u\u0000"}`, "user"},
		{"route user with a lone surrogate", "POST", "/v1/routes/tagline", key, map[string]string{"Idempotency-Key": "r2"}, `{"input":{"product":"kettle"},"user":"\udc00"}`, "user"},
		{"top-up note with NUL", "POST", "/v1/budgets/acme/topups", admin, nil, `{"amount_micros":1,"note":"\u0000"}`, "note"},
	}
	hc := &http.Client{}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var body []byte
			if c.body != "" {
				body = []byte(c.body)
			}
			h := map[string]string{"Authorization": "Bearer " + c.key}
			for k, v := range c.header {
				h[k] = v
			}
			r := hostileDo(t, hc, e.url, hostileCase{method: c.method, path: c.path, header: h, body: body})
			if r.status != http.StatusBadRequest {
				t.Fatalf("%d %s, want 400", r.status, r.body)
			}
			if got := problemField(t, r, "field"); got != c.field {
				t.Errorf("names %q, want %q: %s", got, c.field, r.body)
			}
		})
	}
	if n := e.scalar(`SELECT count(*) FROM replay_audit`); n != 0 {
		t.Errorf("audit rows = %d, want 0", n)
	}
}

// Every 5xx is logged with the trace id the client is told to quote, on
// the OpenAI-compatible endpoint as on the native API, and when a handler
// writes the 5xx itself. A trigger makes every task INSERT fail, as an
// unexpected database failure would.
func TestServerErrorsAreLoggedWithTheirTraceID(t *testing.T) {
	t.Parallel()
	logs := &syncBuffer{}
	e := newEnv(t, envOptions{noWorkers: true, logs: logs})
	key := e.owner("acme", accounts.RoleClient, 1_000_000)
	for _, sql := range []string{
		`CREATE FUNCTION test_refuse_task() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'injected failure'; END $$`,
		`CREATE TRIGGER test_refuse_task BEFORE INSERT ON tasks FOR EACH ROW EXECUTE FUNCTION test_refuse_task()`,
	} {
		if _, err := e.pool.Exec(context.Background(), sql); err != nil {
			t.Fatal(err)
		}
	}
	hc := &http.Client{}
	for _, c := range []struct{ path, body string }{
		{"/v1/chat/completions", `{"model":"test-model","messages":[{"role":"user","content":"hi"}]}`},
		{"/v1/tasks", string(taskBody("hi", 5))},
	} {
		r := hostileDo(t, hc, e.url, hostileCase{method: http.MethodPost, path: c.path, body: []byte(c.body),
			header: map[string]string{"Authorization": "Bearer " + key, "Idempotency-Key": "k-" + c.path}})
		if r.status != http.StatusInternalServerError {
			t.Fatalf("%s: %d %s, want 500", c.path, r.status, r.body)
		}
		trace := r.header.Get("X-Trace-Id")
		found := false
		for _, line := range strings.Split(logs.String(), "\n") {
			if strings.Contains(line, `"trace_id":"`+trace+`"`) && strings.Contains(line, `"level":"ERROR"`) && strings.Contains(line, `"status":500`) {
				found = true
			}
		}
		if trace == "" || !found {
			t.Errorf("%s: the 500 with trace id %q is not logged as an error:\n%s", c.path, trace, logs.String())
		}
	}
	// A 5xx a handler writes itself is logged too: /readyz on a schema
	// marked dirty answers 503.
	if _, err := e.pool.Exec(context.Background(), `UPDATE schema_migrations SET dirty = true`); err != nil {
		t.Fatal(err)
	}
	r := hostileDo(t, hc, e.url, hostileCase{method: http.MethodGet, path: "/readyz"})
	trace := r.header.Get("X-Trace-Id")
	if r.status != http.StatusServiceUnavailable || !strings.Contains(logs.String(), `"trace_id":"`+trace+`"`) {
		t.Errorf("/readyz: %d, trace id %q logged: %v", r.status, trace, strings.Contains(logs.String(), trace))
	}
}

// The largest prompt the body limit admits is stored and searchable: 840
// KB of distinct numbers, whose whole tsvector would pass PostgreSQL's
// 1 MiB limit and fail the task's INSERT. The word search covers the
// first tasks.SearchPrefixChars characters of the stored request, the
// expression its index is built on.
func TestLargestAdmittedRequestIsStoredAndSearchable(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{noWorkers: true})
	key := e.owner("acme", accounts.RoleClient, 1_000_000_000)
	support := e.owner("help", accounts.RoleSupport, 0)
	var b strings.Builder
	b.WriteString("kettle ")
	for i := 1_000_000; b.Len() < 840_000; i++ {
		fmt.Fprintf(&b, "%d ", i)
	}
	b.WriteString("teapot")
	body, _ := json.Marshal(map[string]any{"model": testModel, "max_tokens": 5,
		"messages": []map[string]string{{"role": "user", "content": b.String()}}})
	if len(body) >= 1<<20 || len(body) < 840_000 {
		t.Fatalf("body is %d bytes, want 840 KB to 1 MiB", len(body))
	}
	r := e.post(key, "big", body, nil)
	if r.status != http.StatusAccepted {
		t.Fatalf("POST of %d bytes: %d %s, want 202", len(body), r.status, truncate(r.body))
	}
	id := r.task(t).ID
	search := func(q string) int {
		t.Helper()
		ids := e.searchReplays(support, "owner=acme&q="+q)
		if len(ids) == 1 && ids[0] != id {
			t.Fatalf("search %q found task %s, want %s", q, ids[0], id)
		}
		return len(ids)
	}
	if n := search("kettle"); n != 1 {
		t.Errorf("search for a word in the prefix: %d results, want 1", n)
	}
	if n := search("teapot"); n != 0 {
		t.Errorf("search for a word past the %d-character prefix: %d results, want 0 (the documented bound)", tasks.SearchPrefixChars, n)
	}
	var def string
	if err := e.pool.QueryRow(context.Background(), `SELECT indexdef FROM pg_indexes WHERE indexname = 'tasks_request_text'`).Scan(&def); err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf(`"left"((request)::text, %d)`, tasks.SearchPrefixChars); !strings.Contains(def, want) {
		t.Errorf("index %s does not cover %s", def, want)
	}
}

// The search prefix holds for the densest documents found: within
// tasks.SearchPrefixChars characters, no text makes a tsvector near
// PostgreSQL's 1 MiB limit (the worst, hyphenated pairs of 4-byte CJK
// characters, makes about 8 bytes of lexemes and positions a character).
func TestSearchPrefixBoundsEveryTsvector(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{noWorkers: true})
	cjk := func(i int) string { return string(rune(0x20000 + i)) }
	patterns := map[string]func(i int) string{
		"distinct numbers":         func(i int) string { return fmt.Sprintf("%d ", i) },
		"hyphenated CJK pairs":     func(i int) string { return cjk(2*i) + "-" + cjk(2*i+1) + " " },
		"hyphenated CJK triples":   func(i int) string { return cjk(3*i) + "-" + cjk(3*i+1) + "-" + cjk(3*i+2) + " " },
		"single CJK words":         func(i int) string { return cjk(i) + " " },
		"hyphenated number pairs":  func(i int) string { return fmt.Sprintf("%d-%d ", 2*i, 2*i+1) },
		"urls":                     func(i int) string { return fmt.Sprintf("http://h%d.example.com/p%d ", i, i) },
		"versions":                 func(i int) string { return fmt.Sprintf("1.%d.%d ", i, i) },
		"hyphenated ascii and CJK": func(i int) string { return cjk(i) + "-x" + fmt.Sprint(i) + " " },
	}
	const limit = 1<<20 - 1 // MAXSTRPOS
	for name, p := range patterns {
		var b strings.Builder
		for i, n := 0, 0; n < tasks.SearchPrefixChars+1000; i++ {
			w := p(i)
			b.WriteString(w)
			n += utf8.RuneCountInString(w)
		}
		doc, _ := json.Marshal(map[string]any{"messages": []map[string]string{{"role": "user", "content": b.String()}}})
		var size int64
		err := e.pool.QueryRow(context.Background(),
			fmt.Sprintf(`SELECT pg_column_size(to_tsvector('simple', left($1::jsonb::text, %d)))`, tasks.SearchPrefixChars), string(doc)).Scan(&size)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		t.Logf("%s: tsvector of the prefix is %d bytes (%.0f%% of the limit)", name, size, 100*float64(size)/limit)
		if size > limit*3/4 {
			t.Errorf("%s: tsvector of the prefix is %d bytes, over 3/4 of the %d-byte limit", name, size, limit)
		}
	}
}
