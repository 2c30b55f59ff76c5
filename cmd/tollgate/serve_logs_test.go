package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/testdb"
	"github.com/tollgate/tollgate/provider/fake"
)

// logLines decodes the JSON log lines in s.
func logLines(t *testing.T, s string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(s), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line %q is not JSON: %v", line, err)
		}
		out = append(out, m)
	}
	return out
}

// The start-up line shows what a catalog file configures and leaves out
// the zero-config settings it replaces, durations read as durations, and
// a graceful stop logs nothing above info.
func TestServeLogsAStartAndAStopThatTellTheTruth(t *testing.T) {
	t.Parallel()
	fp := fake.New()
	srv := httptest.NewServer(fp)
	t.Cleanup(srv.Close)
	t.Cleanup(fp.Close)
	cfgPath := filepath.Join(t.TempDir(), "tollgate.yaml")
	yml := "providers:\n  - {key: main, kind: openai, base_url: \"" + srv.URL + "/v1\"}\n" +
		"models:\n  - {name: chat, provider: main, provider_model: gpt-test, input_micros_per_mtok: 1000, output_micros_per_mtok: 2000}\n" +
		"default_model: chat\n"
	if err := os.WriteFile(cfgPath, []byte(yml), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	getenv := envFunc(map[string]string{
		"DATABASE_URL":             testdb.New(t),
		"TOLLGATE_ADDR":            addr,
		"TOLLGATE_CONFIG":          cfgPath,
		"TOLLGATE_DRAIN_TIMEOUT_S": "45",
		"TOLLGATE_PRICES":          "chat=1:2",
		"MODEL_NAME":               "unused-model",
		"TOLLGATE_DATA_KEY":        "BwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwc=",
		"TOLLGATE_METRICS_TOKEN":   "metrics-token",
	})
	var out, errb strings.Builder
	if err := run(context.Background(), []string{"keys", "create", "--owner", "acme", "--role", "client"}, getenv, strings.NewReader(""), &out, &errb); err != nil {
		t.Fatalf("keys create: %v\nstderr: %s", err, errb.String())
	}
	key := strings.TrimSpace(out.String())
	if err := run(context.Background(), []string{"budget", "set", "--owner", "acme", "--total-micros", "unlimited"}, getenv, strings.NewReader(""), io.Discard, &errb); err != nil {
		t.Fatalf("budget set: %v\nstderr: %s", err, errb.String())
	}
	serveCtx, stop := context.WithCancel(context.Background())
	logs := &syncBuffer{}
	done := make(chan error, 1)
	go func() { done <- run(serveCtx, []string{"serve"}, getenv, strings.NewReader(""), io.Discard, logs) }()
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			stop()
			<-done
		}
	})
	client := &http.Client{Timeout: 30 * time.Second}
	waitHealthy(t, client, "http://"+addr, done, logs)
	// A task run before the stop, so that every loop has had work.
	req, err := http.NewRequest(http.MethodPost, "http://"+addr+"/v1/tasks", strings.NewReader(`{"messages":[{"role":"user","content":"Say hello"}],"max_tokens":8}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", "logs-1")
	req.Header.Set("Prefer", "wait=10")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST /v1/tasks: %d; logs:\n%s", resp.StatusCode, logs)
	}
	stopped = true
	stop()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("serve returned %v after cancel; want nil\nlogs:\n%s", err, logs)
		}
	case <-time.After(time.Minute):
		t.Fatalf("serve did not return within a minute of cancel\nlogs:\n%s", logs)
	}

	var starting, shutting map[string]any
	for _, l := range logLines(t, logs.String()) {
		switch l["msg"] {
		case "tollgate starting":
			starting = l
		case "shutting down: no new requests; waiting for running tasks":
			shutting = l
		}
		if lvl := l["level"]; lvl != "INFO" && lvl != "DEBUG" {
			t.Errorf("a graceful start and stop logged at %v: %v", lvl, l)
		}
	}
	if starting == nil || shutting == nil {
		t.Fatalf("start-up or shutdown line missing; logs:\n%s", logs)
	}
	cfg, _ := starting["config"].(map[string]any)
	for _, unused := range []string{"model_name", "model_base_url", "model_api_key_set", "prices"} {
		if v, ok := cfg[unused]; ok {
			t.Errorf("config line shows %s = %v, unused with a catalog file", unused, v)
		}
	}
	if cfg["config_file"] != cfgPath {
		t.Errorf("config_file = %v, want %s", cfg["config_file"], cfgPath)
	}
	if cfg["drain_timeout"] != "45s" || shutting["drain_timeout"] != "45s" {
		t.Errorf("drain_timeout = %v (config line), %v (shutdown line); want \"45s\"", cfg["drain_timeout"], shutting["drain_timeout"])
	}
}
