package docs

import (
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
)

// compareOutput holds out to the documented output want of this kind; it
// returns what differs.
func compareOutput(kind, want, out string) []string {
	switch kind {
	case "":
		return nil
	case "http":
		return compareHTTP(want, out)
	case "json":
		got, err := lastJSON(out)
		if err != nil {
			return []string{"no JSON in the output: " + err.Error()}
		}
		var w any
		if err := json.Unmarshal([]byte(want), &w); err != nil {
			return []string{"the documented JSON does not parse: " + err.Error()}
		}
		return compareShape("$", w, got)
	case "text":
		wl, gl := strings.SplitN(want, "\n", 2), strings.SplitN(strings.TrimLeft(out, "\n"), "\n", 2)
		if gl[0] != wl[0] {
			return []string{fmt.Sprintf("first line %q, documented %q", gl[0], wl[0])}
		}
		return nil
	}
	return []string{"unknown kind " + kind}
}

// response is one HTTP response as curl -i prints it.
type response struct {
	status  string
	headers http.Header
	body    string
}

// responses splits curl -i output (or a documented ```http block) at its
// status lines.
func responses(s string) []response {
	var out []response
	var cur *response
	inHeaders := false
	for _, l := range strings.Split(strings.ReplaceAll(s, "\r\n", "\n"), "\n") {
		if strings.HasPrefix(l, "HTTP/") {
			out = append(out, response{status: strings.Fields(l)[1], headers: http.Header{}})
			cur, inHeaders = &out[len(out)-1], true
			continue
		}
		switch {
		case cur == nil:
		case inHeaders && l == "":
			inHeaders = false
		case inHeaders:
			if k, v, ok := strings.Cut(l, ":"); ok {
				cur.headers.Add(k, strings.TrimSpace(v))
			}
		default:
			cur.body += l + "\n"
		}
	}
	return out
}

func compareHTTP(want, out string) []string {
	ws, gs := responses(want), responses(out)
	if len(ws) == 0 {
		return []string{"the documented ```http block has no status line"}
	}
	if len(gs) < len(ws) {
		return []string{fmt.Sprintf("%d responses printed, documented %d", len(gs), len(ws))}
	}
	gs = gs[len(gs)-len(ws):] // earlier commands of the block may print theirs
	var problems []string
	for i, w := range ws {
		g := gs[i]
		if g.status != w.status {
			problems = append(problems, fmt.Sprintf("status %s, documented %s", g.status, w.status))
		}
		for k := range w.headers {
			if gv, wv := mask(g.headers.Get(k)), mask(w.headers.Get(k)); gv != wv {
				problems = append(problems, fmt.Sprintf("header %s: %q, documented %q", k, g.headers.Get(k), w.headers.Get(k)))
			}
		}
		var gotBody any
		if err := json.Unmarshal([]byte(firstJSONLine(g.body)), &gotBody); err != nil {
			problems = append(problems, "the body is not JSON: "+err.Error())
			continue
		}
		var wantBody any
		if err := json.Unmarshal([]byte(w.body), &wantBody); err != nil {
			if !strings.Contains(w.body, "...") {
				problems = append(problems, "the documented body does not parse (abbreviate with ...): "+err.Error())
			}
			continue // an abbreviated body: status and headers only
		}
		problems = append(problems, compareShape("$", wantBody, gotBody)...)
	}
	return problems
}

// firstJSONLine is the body up to the end of its first JSON value: after
// a compact body, a block may print more (an id it kept).
func firstJSONLine(body string) string {
	dec := json.NewDecoder(strings.NewReader(body))
	var raw json.RawMessage
	if err := dec.Decode(&raw); err != nil {
		return body
	}
	return string(raw)
}

// lastJSON decodes the last JSON value of out, which may begin with other
// lines (a value echoed by tee before the one shown).
func lastJSON(out string) (any, error) {
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	var err error
	for start := len(lines) - 1; start >= 0; start-- {
		var v any
		if err = json.Unmarshal([]byte(strings.Join(lines[start:], "\n")), &v); err == nil {
			return v, nil
		}
	}
	return nil, err
}

// volatile are the parts of a string that change from run to run.
var volatile = []struct {
	re   *regexp.Regexp
	with string
}{
	{regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`), "<uuid>"},
	{regexp.MustCompile(`\d{4}-\d{2}-\d{2}(T\d{2}:\d{2}:\d{2}(\.\d+)?Z)?`), "<time>"},
	{regexp.MustCompile(`[0-9a-f]{12,}`), "<hex>"},
	{regexp.MustCompile(`\b\d{9,}\b`), "<n>"},                            // Unix times in keys
	{regexp.MustCompile(`^(\(devel\)|v\d+\.\d+\.\d+\S*)$`), "<version>"}, // build_version
}

func mask(s string) string {
	for _, v := range volatile {
		s = v.re.ReplaceAllString(s, v.with)
	}
	return s
}

// compareShape compares a documented JSON value with the one printed:
// the same keys, types and array lengths, the same strings once volatile
// parts are masked, the same booleans; numbers by type only.
func compareShape(path string, want, got any) []string {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return []string{fmt.Sprintf("%s: %s, documented an object", path, kind(got))}
		}
		var problems []string
		for k, wv := range w {
			gv, ok := g[k]
			if !ok {
				problems = append(problems, fmt.Sprintf("%s.%s: missing", path, k))
				continue
			}
			problems = append(problems, compareShape(path+"."+k, wv, gv)...)
		}
		for k := range g {
			if _, ok := w[k]; !ok {
				problems = append(problems, fmt.Sprintf("%s.%s: not documented", path, k))
			}
		}
		return problems
	case []any:
		g, ok := got.([]any)
		if !ok {
			return []string{fmt.Sprintf("%s: %s, documented an array", path, kind(got))}
		}
		if len(g) != len(w) {
			return []string{fmt.Sprintf("%s: %d items, documented %d", path, len(g), len(w))}
		}
		var problems []string
		for i := range w {
			problems = append(problems, compareShape(fmt.Sprintf("%s[%d]", path, i), w[i], g[i])...)
		}
		return problems
	case string:
		if g, ok := got.(string); !ok || mask(g) != mask(w) {
			return []string{fmt.Sprintf("%s: %s, documented %q", path, show(got), w)}
		}
	case bool:
		if g, ok := got.(bool); !ok || g != w {
			return []string{fmt.Sprintf("%s: %s, documented %v", path, show(got), w)}
		}
	default: // numbers and null
		if kind(got) != kind(want) {
			return []string{fmt.Sprintf("%s: %s, documented %s", path, show(got), show(want))}
		}
	}
	return nil
}

func kind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case map[string]any:
		return "an object"
	case []any:
		return "an array"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case float64:
		return "a number"
	}
	return fmt.Sprintf("%T", v)
}

func show(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// The comparison can fail: each kind of drift is caught.
func TestCompareOutputCatchesDrift(t *testing.T) {
	t.Parallel()
	doc := "HTTP/1.1 202 Accepted\nContent-Type: application/json\n\n" +
		`{"id":"5996c67b-7497-4b65-aff4-bc50613ee22c","status":"running","attempts":1,"error":null,"at":"2026-12-06T01:29:06.510876Z"}`
	tests := []struct {
		name, out string
		wantOK    bool
	}{
		{"same shape, other ids and times", "HTTP/1.1 202 Accepted\r\nContent-Type: application/json\r\nDate: x\r\n\r\n" +
			`{"id":"0b97f5dc-4c7f-40bf-a9fd-577369f6bdc9","status":"running","attempts":7,"error":null,"at":"2027-01-01T00:00:00Z"}` + "\n", true},
		{"other status code", "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n" +
			`{"id":"0b97f5dc-4c7f-40bf-a9fd-577369f6bdc9","status":"running","attempts":1,"error":null,"at":"2026-12-06T01:29:06Z"}`, false},
		{"other task status", "HTTP/1.1 202 Accepted\r\nContent-Type: application/json\r\n\r\n" +
			`{"id":"0b97f5dc-4c7f-40bf-a9fd-577369f6bdc9","status":"queued","attempts":1,"error":null,"at":"2026-12-06T01:29:06Z"}`, false},
		{"a new key", "HTTP/1.1 202 Accepted\r\nContent-Type: application/json\r\n\r\n" +
			`{"id":"0b97f5dc-4c7f-40bf-a9fd-577369f6bdc9","status":"running","attempts":1,"error":null,"at":"2026-12-06T01:29:06Z","new":1}`, false},
		{"a type changed", "HTTP/1.1 202 Accepted\r\nContent-Type: application/json\r\n\r\n" +
			`{"id":"0b97f5dc-4c7f-40bf-a9fd-577369f6bdc9","status":"running","attempts":1,"error":{},"at":"2026-12-06T01:29:06Z"}`, false},
		{"other header value", "HTTP/1.1 202 Accepted\r\nContent-Type: application/problem+json\r\n\r\n" +
			`{"id":"0b97f5dc-4c7f-40bf-a9fd-577369f6bdc9","status":"running","attempts":1,"error":null,"at":"2026-12-06T01:29:06Z"}`, false},
		{"no response", "curl: (7) Failed to connect", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			problems := compareOutput("http", doc, tt.out)
			if ok := len(problems) == 0; ok != tt.wantOK {
				t.Errorf("compareOutput ok = %v, want %v; problems: %q", ok, tt.wantOK, problems)
			}
		})
	}
}
