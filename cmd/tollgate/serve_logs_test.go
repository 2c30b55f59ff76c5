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
	"sync"
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

// held lets the first chat completion through to the fake provider only
// once release is closed, and tells arrived when it comes.
type held struct {
	next     http.Handler
	once     sync.Once
	arrived  chan struct{}
	release  chan struct{}
	released sync.Once
}

func (h *held) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if strings.HasSuffix(r.URL.Path, "/chat/completions") {
		h.once.Do(func() {
			close(h.arrived)
			<-h.release
		})
	}
	h.next.ServeHTTP(w, r)
}

func (h *held) let() { h.released.Do(func() { close(h.release) }) }

// getStatus answers the status and body of GET url, or the error.
func getStatus(client *http.Client, url string) (int, string, error) {
	resp, err := client.Get(url)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// The start-up line shows what a catalog file configures and leaves out
// the zero-config settings it replaces, durations read as durations. A
// stop with a task in flight drains: /readyz answers 503 draining and
// /healthz 200 while the task finishes, and the whole stop logs nothing
// above info (the task's finish is announced during the stop).
func TestServeLogsAStartAndAStopThatTellTheTruth(t *testing.T) {
	t.Parallel()
	fp := fake.New()
	provider := &held{next: fp, arrived: make(chan struct{}), release: make(chan struct{})}
	srv := httptest.NewServer(provider)
	t.Cleanup(srv.Close)
	t.Cleanup(fp.Close)
	t.Cleanup(provider.let)
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
		// Long enough for the probes below on a loaded machine; the
		// test waits on what it sees, never on this.
		"TOLLGATE_DRAIN_DELAY_S": "3",
		"TOLLGATE_PRICES":        "chat=1:2",
		"MODEL_NAME":             "unused-model",
		"TOLLGATE_DATA_KEY":      "BwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwc=",
		"TOLLGATE_METRICS_TOKEN": "metrics-token",
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
	base := "http://" + addr
	waitHealthy(t, client, base, done, logs)
	// A task in flight when the stop begins: its provider call is held.
	req, err := http.NewRequest(http.MethodPost, base+"/v1/tasks", strings.NewReader(`{"messages":[{"role":"user","content":"Say hello"}],"max_tokens":8}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", "logs-1")
	req.Header.Set("Prefer", "wait=40")
	type answer struct {
		status int
		body   string
		err    error
	}
	answered := make(chan answer, 1)
	go func() {
		resp, err := client.Do(req)
		if err != nil {
			answered <- answer{err: err}
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		answered <- answer{resp.StatusCode, string(b), err}
	}()
	select {
	case <-provider.arrived:
	case a := <-answered:
		t.Fatalf("POST /v1/tasks answered %d %s %v before its provider call; logs:\n%s", a.status, a.body, a.err, logs)
	case <-time.After(30 * time.Second):
		t.Fatalf("the task's provider call did not come within 30s; logs:\n%s", logs)
	}
	stopped = true
	stop()
	// Draining: /readyz turns 503 with the documented body while the
	// listener still serves, and /healthz stays 200.
	for {
		code, body, err := getStatus(client, base+"/readyz")
		if err != nil {
			t.Fatalf("GET /readyz while draining: %v (the listener closed before /readyz answered 503)\nlogs:\n%s", err, logs)
		}
		if code == http.StatusServiceUnavailable {
			if want := `"checks":{"process":"draining"}`; !strings.Contains(body, want) || !strings.Contains(body, `"status":"unavailable"`) {
				t.Errorf("GET /readyz while draining = %s; want status unavailable and %s", body, want)
			}
			break
		}
		if code != http.StatusOK {
			t.Fatalf("GET /readyz = %d %s; want 200, then 503 once the stop begins", code, body)
		}
	}
	if code, body, err := getStatus(client, base+"/healthz"); err != nil || code != http.StatusOK {
		t.Errorf("GET /healthz while draining = %d %s %v; want 200", code, body, err)
	}
	provider.let()
	select {
	case a := <-answered:
		if a.err != nil || a.status != http.StatusOK || !strings.Contains(a.body, `"succeeded"`) {
			t.Errorf("the task in flight at the stop answered %d %s %v; want 200 succeeded\nlogs:\n%s", a.status, a.body, a.err, logs)
		}
	case <-time.After(time.Minute):
		t.Fatalf("the task in flight at the stop did not answer within a minute\nlogs:\n%s", logs)
	}
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
	if cfg["prices_source"] != "TOLLGATE_CONFIG" {
		t.Errorf("prices_source = %v, want TOLLGATE_CONFIG (a catalog file's prices win over TOLLGATE_PRICES)", cfg["prices_source"])
	}
	if cfg["config_file"] != cfgPath {
		t.Errorf("config_file = %v, want %s", cfg["config_file"], cfgPath)
	}
	if cfg["drain_timeout"] != "45s" || shutting["drain_timeout"] != "45s" {
		t.Errorf("drain_timeout = %v (config line), %v (shutdown line); want \"45s\"", cfg["drain_timeout"], shutting["drain_timeout"])
	}
	if cfg["drain_delay"] != "3s" {
		t.Errorf("drain_delay = %v (config line), want \"3s\"", cfg["drain_delay"])
	}
}
