package server_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/accounts"
)

// Every endpoint that takes a body, tried with hostile bodies: a clear
// 4xx, nothing stored, no model call, never a 5xx.
func TestHostileBodiesOnEveryEndpoint(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{maxBody: 64 << 10})
	client := e.owner("acme", accounts.RoleClient, 1_000_000)
	admin := e.owner("ops", accounts.RoleAdmin, 0)
	endpoints := []struct {
		method, path, key string
	}{
		{http.MethodPost, "/v1/tasks", client},
		{http.MethodPost, "/v1/chat/completions", client},
		{http.MethodPost, "/v1/routes/tagline", client},
		{http.MethodPut, "/v1/budgets/acme", admin},
		{http.MethodPost, "/v1/budgets/acme/topups", admin},
		{http.MethodPut, "/v1/owners/acme/privacy", admin},
		{http.MethodPut, "/v1/limits/acme", admin},
		{http.MethodPut, "/v1/owners/acme/webhook", client},
	}
	deep := strings.Repeat(`{"a":`, 20000) + "1" + strings.Repeat("}", 20000)
	bodies := map[string]string{
		"malformed":            `{"messages": [`,
		"deep nesting":         deep,
		"huge string":          `{"messages":[{"role":"user","content":"` + strings.Repeat("x", 70<<10) + `"}]}`,
		"invalid utf-8":        "{\"messages\":[{\"role\":\"user\",\"content\":\"\xff\xfe\"}]}",
		"duplicated key":       `{"messages":[{"role":"user","content":"a","content":"b"}],"total_micros":1,"total_micros":2}`,
		"negative number":      `{"max_tokens":-5,"total_micros":-5,"amount_micros":-5,"body_retention_days":-1,"messages":[{"role":"user","content":"x"}]}`,
		"overflowing number":   `{"max_tokens":1e400,"total_micros":99999999999999999999999,"amount_micros":99999999999999999999999,"messages":[{"role":"user","content":"x"}]}`,
		"wrong top-level type": `"just a string"`,
		"webhook url with NUL": `{"url":"https://example.com/\u0000x","events":["task.failed"]}`,
		"webhook url too long": `{"url":"https://example.com/` + strings.Repeat("a", 3000) + `","events":["task.failed"]}`,
		"webhook url numeric":  `{"url":1e400,"events":["task.failed"]}`,
		"webhook file url":     `{"url":"file:///etc/passwd","events":["task.failed"]}`,
		"webhook events huge":  `{"url":"https://example.com/","events":["` + strings.Repeat("e", 60<<10) + `"]}`,
	}
	for _, ep := range endpoints {
		for name, body := range bodies {
			t.Run(ep.method+" "+ep.path+" "+name, func(t *testing.T) {
				r := e.do(ep.method, ep.path, ep.key, []byte(body), map[string]string{"Idempotency-Key": "hostile"})
				if r.status < 400 || r.status >= 500 {
					t.Errorf("%d %s, want a 4xx", r.status, truncate(r.body))
				}
			})
		}
		t.Run(ep.method+" "+ep.path+" wrong content type", func(t *testing.T) {
			r := e.do(ep.method, ep.path, ep.key, []byte(`{}`), map[string]string{"Idempotency-Key": "hostile", "Content-Type": "text/xml"})
			if r.status < 400 || r.status >= 500 {
				t.Errorf("%d, want a 4xx", r.status)
			}
		})
	}
	// Each endpoint's own numbers, out of range in every way a client
	// can send: refused naming the field and its documented range, never
	// in Go's terms (int64's range, a strconv or decoder error).
	numbers := map[string]string{
		"/v1/tasks":               "max_tokens",
		"/v1/chat/completions":    "max_tokens",
		"/v1/budgets/acme":        "total_micros",
		"/v1/budgets/acme/topups": "amount_micros",
		"/v1/owners/acme/privacy": "body_retention_days",
		"/v1/limits/acme":         "requests_per_minute",
	}
	literals := []string{"-1", "1.5", "1e30", "9223372036854775808", "-9223372036854775809", "1e400", "NaN", "-Infinity", `"NaN"`, `"1e30"`, "true", "[1]"}
	for _, ep := range endpoints {
		field, ok := numbers[ep.path]
		if !ok {
			continue
		}
		for _, lit := range literals {
			t.Run(ep.method+" "+ep.path+" "+field+" "+lit, func(t *testing.T) {
				r := e.do(ep.method, ep.path, ep.key, []byte(`{"`+field+`":`+lit+`}`), map[string]string{"Idempotency-Key": "hostile"})
				if r.status != http.StatusBadRequest || !strings.Contains(string(r.body), field+" must be ") {
					t.Errorf("%d %s, want a 400 saying %q", r.status, truncate(r.body), field+" must be ...")
				}
				if goSpeak(r.body) {
					t.Errorf("speaks Go: %s", truncate(r.body))
				}
			})
		}
	}
	e.checkNothingWritten()
}

func truncate(b []byte) string {
	if len(b) > 200 {
		return string(b[:200]) + "…"
	}
	return string(b)
}
