package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/testdb"
	"github.com/tollgate/tollgate/provider/fake"
)

// A server configured by nothing but the environment knows from the
// built-in price list that o3-mini is a reasoning model: the output limit
// Tollgate adds to a request that sets none (TOLLGATE_DEFAULT_MAX_TOKENS)
// reaches OpenAI as max_completion_tokens, which such a model requires
// (the fake, like OpenAI, refuses max_tokens for it), and the start-up
// line says where the prices come from. With TOLLGATE_PRICES_FILE=none
// the name passes through undescribed, the limit goes as max_tokens and
// the provider's refusal comes back. (A limit the client sets keeps the
// name the client gave it.)
func TestZeroConfigKnowsReasoningModels(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name       string
		pricesFile string
		status     int
		source     string // prices_source at start-up
		sent       string // the output-limit field the provider received
	}{
		{"the embedded list", "", http.StatusOK, "built-in defaults, then the embedded price list", "max_completion_tokens"},
		{"no list", "none", http.StatusBadRequest, "built-in defaults", "max_tokens"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			fp := fake.New(fake.WithReasoningModels("o3-mini"))
			srv := httptest.NewServer(fp)
			t.Cleanup(srv.Close)
			t.Cleanup(fp.Close)
			addr := freeAddr(t)
			getenv := envFunc(map[string]string{
				"DATABASE_URL":           testdb.New(t),
				"TOLLGATE_ADDR":          addr,
				"MODEL_BASE_URL":         srv.URL + "/v1",
				"TOLLGATE_PRICES_FILE":   c.pricesFile,
				"TOLLGATE_DRAIN_DELAY_S": "0",
			})
			var out, errb strings.Builder
			if err := run(context.Background(), []string{"keys", "create", "--owner", "acme", "--role", "client"}, getenv, strings.NewReader(""), &out, &errb); err != nil {
				t.Fatalf("keys create: %v\nstderr: %s", err, errb.String())
			}
			key := strings.TrimSpace(out.String())
			if err := run(context.Background(), []string{"budget", "set", "--owner", "acme", "--total-micros", "1000000"}, getenv, strings.NewReader(""), io.Discard, &errb); err != nil {
				t.Fatalf("budget set: %v\nstderr: %s", err, errb.String())
			}
			serveCtx, stop := context.WithCancel(context.Background())
			logs := &syncBuffer{}
			done := make(chan error, 1)
			go func() { done <- run(serveCtx, []string{"serve"}, getenv, strings.NewReader(""), io.Discard, logs) }()
			t.Cleanup(func() {
				stop()
				select {
				case <-done:
				case <-time.After(time.Minute):
					t.Errorf("serve did not return within a minute of cancel")
				}
			})
			client := &http.Client{Timeout: 30 * time.Second}
			base := "http://" + addr
			waitHealthy(t, client, base, done, logs)

			req, err := http.NewRequest(http.MethodPost, base+"/v1/chat/completions",
				strings.NewReader(`{"model":"o3-mini","messages":[{"role":"user","content":"Think"}]}`))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Authorization", "Bearer "+key)
			req.Header.Set("Content-Type", "application/json")
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != c.status {
				t.Errorf("POST /v1/chat/completions: %d %s; want %d", resp.StatusCode, body, c.status)
			}
			calls := fp.Calls()
			if len(calls) != 1 {
				t.Fatalf("provider calls = %d, want 1", len(calls))
			}
			var sent map[string]any
			if err := json.Unmarshal(calls[0].Body, &sent); err != nil {
				t.Fatal(err)
			}
			for _, field := range []string{"max_tokens", "max_completion_tokens"} {
				if _, ok := sent[field]; ok != (field == c.sent) {
					t.Errorf("the provider received %s: %v; want only %s", field, ok, c.sent)
				}
			}
			var source any
			for _, l := range logLines(t, logs.String()) {
				if l["msg"] == "tollgate starting" {
					cfg, _ := l["config"].(map[string]any)
					source = cfg["prices_source"]
				}
			}
			if source != c.source {
				t.Errorf("prices_source = %v, want %q", source, c.source)
			}
		})
	}
}
