package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"text/template"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/tollgate/tollgate/internal/testdb"
	"github.com/tollgate/tollgate/provider/fake"
)

// The faithful suite proves, end to end, that what an application sends
// through the official Go SDK reaches each kind of provider: one `tollgate
// serve`, run as an operator runs it, in front of fake providers of every
// wire format, with the catalog below.

// Provider kinds, as the catalog names them.
const (
	kindOpenAI     = "openai"
	kindAnthropic  = "anthropic"
	kindCloudflare = "cloudflare"
)

var kinds = []string{kindOpenAI, kindAnthropic, kindCloudflare}

// faithfulMaxAttempts is TOLLGATE_MAX_ATTEMPTS for the suite's serve.
const faithfulMaxAttempts = 3

// reasoningProviderModel is the provider's name of the OpenAI reasoning
// model: the fake refuses max_tokens for it, as OpenAI does.
const reasoningProviderModel = "o-test"

// lanes isolate what the fake provider shares between calls: its script
// queue and call count, and what Tollgate keeps per provider key (throttle
// pauses, breakers). Calls on lane "main" are never scripted and are found
// in the call log by a marker in their text; every scripted case has a
// lane of its own.
var lanes = []string{"main", "parallel", "ctxlen", "ratelimit", "quota", "transient"}

// catalogTemplate is the catalog of one lane: one provider key per kind,
// each on its own fake, and models with their capabilities. Model names
// are "<lane>-<kind>" and "<lane>-openai-reasoning".
const catalogTemplate = `
providers:
{{- range .Lanes}}
  - {key: {{.}}-openai, kind: openai, base_url: "{{index $.URLs (print . "-openai")}}/v1"}
  - {key: {{.}}-anthropic, kind: anthropic, base_url: "{{index $.URLs (print . "-anthropic")}}"}
  - {key: {{.}}-cloudflare, kind: cloudflare, base_url: "{{index $.URLs (print . "-cloudflare")}}", account_id: acct-1}
{{- end}}
models:
{{- range .Lanes}}
  - name: {{.}}-openai
    provider: {{.}}-openai
    provider_model: gpt-test
    input_micros_per_mtok: 150000
    output_micros_per_mtok: 600000
    tools: true
    vision: true
    json_schema: true
    context_window: 128000
    max_output_tokens: 16384
  - name: {{.}}-openai-reasoning
    provider: {{.}}-openai
    provider_model: ` + reasoningProviderModel + `
    input_micros_per_mtok: 1100000
    output_micros_per_mtok: 4400000
    tools: true
    vision: true
    json_schema: true
    reasoning: true
    context_window: 200000
    max_output_tokens: 100000
  - name: {{.}}-anthropic
    provider: {{.}}-anthropic
    provider_model: claude-test
    input_micros_per_mtok: 3000000
    output_micros_per_mtok: 15000000
    tools: true
    vision: true
    json_schema: true
    reasoning: true
    context_window: 200000
    max_output_tokens: 8192
  - name: {{.}}-cloudflare
    provider: {{.}}-cloudflare
    provider_model: "@cf/meta/llama-test"
    input_micros_per_mtok: 270000
    output_micros_per_mtok: 850000
    tools: true
    vision: true
    json_schema: true
    context_window: 24000
    max_output_tokens: 4096
{{- end}}
routes:
{{- range .Kinds}}
  - name: weather-{{.}}
    prompt_version: "1"
    system_prompt: "You answer questions about the weather."
    user_template: "{{"{{q}}"}}"
    input: [{name: q, type: string, max_length: 200}]
    model: main-{{.}}
    max_tokens: 200
    deadline_ms: 20000
    output: {type: text, max_length: 2000}
    fallback: "The weather is unavailable."
    on_failure: error
    tools:
      - name: get_weather
        description: The weather in a city now.
        parameters: {type: object, properties: {city: {type: string}}, required: [city]}
{{- end}}
`

// faithfulWorld is the running serve and its fakes.
type faithfulWorld struct {
	base  string // http://host:port of serve
	key   string // a client key of owner acme, whose budget is unlimited
	fakes map[string]*fake.Server
	logs  fmt.Stringer
	http  *http.Client
}

// startFaithful starts the fakes and serve, and stops them when t ends.
func startFaithful(t *testing.T) *faithfulWorld {
	t.Helper()
	w := &faithfulWorld{fakes: map[string]*fake.Server{}, http: &http.Client{Timeout: 60 * time.Second}}
	urls := map[string]string{}
	for _, lane := range lanes {
		for _, kind := range kinds {
			fp := fake.New(fake.WithReasoningModels(reasoningProviderModel))
			srv := httptest.NewServer(fp)
			t.Cleanup(srv.Close)
			t.Cleanup(fp.Close)
			w.fakes[lane+"-"+kind] = fp
			urls[lane+"-"+kind] = srv.URL
		}
	}
	var yml bytes.Buffer
	tmpl := template.Must(template.New("catalog").Parse(catalogTemplate))
	if err := tmpl.Execute(&yml, map[string]any{"Lanes": lanes, "Kinds": kinds, "URLs": urls}); err != nil {
		t.Fatal(err)
	}
	cfgPath := filepath.Join(t.TempDir(), "tollgate.yaml")
	if err := os.WriteFile(cfgPath, yml.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}

	addr := freeAddr(t)
	getenv := envFunc(map[string]string{
		"DATABASE_URL":          testdb.New(t),
		"TOLLGATE_ADDR":         addr,
		"TOLLGATE_CONFIG":       cfgPath,
		"TOLLGATE_MAX_ATTEMPTS": fmt.Sprint(faithfulMaxAttempts),
	})
	ctx := context.Background()
	var out, errb bytes.Buffer
	if err := run(ctx, []string{"keys", "create", "--owner", "acme", "--role", "client"}, getenv, strings.NewReader(""), &out, &errb); err != nil {
		t.Fatalf("keys create: %v\nstderr: %s", err, errb.String())
	}
	w.key = strings.TrimSpace(out.String())
	if err := run(ctx, []string{"budget", "set", "--owner", "acme", "--total-micros", "unlimited"}, getenv, strings.NewReader(""), io.Discard, &errb); err != nil {
		t.Fatalf("budget set: %v\nstderr: %s", err, errb.String())
	}

	serveCtx, stop := context.WithCancel(ctx)
	logs := &syncBuffer{}
	w.logs = logs
	done := make(chan error, 1)
	exited := make(chan struct{})
	var serveErr error
	go func() {
		serveErr = run(serveCtx, []string{"serve"}, getenv, strings.NewReader(""), io.Discard, logs)
		close(exited)
		done <- serveErr
	}()
	// Stop serve before testdb drops its database.
	t.Cleanup(func() {
		stop()
		select {
		case <-exited:
			if serveErr != nil && !t.Failed() {
				t.Errorf("serve returned %v after cancel; want nil\nlogs:\n%s", serveErr, logs)
			}
		case <-time.After(time.Minute):
			t.Errorf("serve did not return within a minute of cancel")
		}
	})
	w.base = "http://" + addr
	waitHealthy(t, w.http, w.base, done, logs)
	return w
}

// fake returns the fake provider behind lane's provider key of kind.
func (w *faithfulWorld) fake(lane, kind string) *fake.Server { return w.fakes[lane+"-"+kind] }

// sdkLog records what the SDK sent and received: one entry per HTTP
// request, retries included.
type sdkLog struct {
	mu       sync.Mutex
	bodies   [][]byte
	statuses []int
	headers  []http.Header
}

func (l *sdkLog) middleware(r *http.Request, next option.MiddlewareNext) (*http.Response, error) {
	var body []byte
	if r.Body != nil {
		body, _ = io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
	}
	res, err := next(r)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.bodies = append(l.bodies, body)
	if res != nil {
		l.statuses = append(l.statuses, res.StatusCode)
		l.headers = append(l.headers, res.Header.Clone())
		// The SDK's own waits run at once; the headers above keep the
		// waits Tollgate asked for.
		if res.Header.Get("retry-after-ms") != "" {
			res.Header.Set("retry-after-ms", "1")
		}
	}
	return res, err
}

// requests is how many HTTP requests the SDK sent.
func (l *sdkLog) requests() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.bodies)
}

// sent is the body of the SDK's last request, decoded.
func (l *sdkLog) sent(t *testing.T) map[string]any {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.bodies) == 0 {
		t.Fatal("the SDK sent no request")
	}
	return decodeObject(t, l.bodies[len(l.bodies)-1])
}

// answerHeaders are the headers of every answer the SDK received.
func (l *sdkLog) answerHeaders() []http.Header {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]http.Header(nil), l.headers...)
}

// sdk is the official client as an application builds it (default
// retries), pointed at serve, with a log of what it sent.
func (w *faithfulWorld) sdk() (openai.Client, *sdkLog) {
	log := &sdkLog{}
	return openai.NewClient(option.WithBaseURL(w.base+"/v1/"), option.WithAPIKey(w.key),
		option.WithHTTPClient(w.http), option.WithMiddleware(log.middleware)), log
}

// receivedCalls returns the bodies, decoded, of the calls lane's fake of
// kind received whose body holds marker, in order.
func (w *faithfulWorld) receivedCalls(t *testing.T, lane, kind, marker string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, c := range w.fake(lane, kind).Calls() {
		if bytes.Contains(c.Body, []byte(marker)) {
			out = append(out, decodeObject(t, c.Body))
		}
	}
	return out
}

// received is the one call holding marker; it fails t unless there is
// exactly want such calls, and returns the last.
func (w *faithfulWorld) received(t *testing.T, lane, kind, marker string, want int) map[string]any {
	t.Helper()
	calls := w.receivedCalls(t, lane, kind, marker)
	if len(calls) != want {
		t.Fatalf("the %s provider received %d calls holding %q; want %d\nlogs:\n%s", kind, len(calls), marker, want, w.logs)
	}
	if want == 0 {
		return nil
	}
	return calls[len(calls)-1]
}

// postJSON sends body to path on serve with the client key and headers,
// and returns the status, headers and decoded answer.
func (w *faithfulWorld) postJSON(t *testing.T, path string, body any, headers map[string]string) (int, http.Header, map[string]any) {
	t.Helper()
	raw, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodPost, w.base+path, bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+w.key)
	req.Header.Set("Content-Type", "application/json")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := w.http.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read POST %s: %v", path, err)
	}
	var out map[string]any
	if err := json.Unmarshal(got, &out); err != nil {
		t.Fatalf("POST %s: %d %s: not a JSON object: %v", path, resp.StatusCode, got, err)
	}
	return resp.StatusCode, resp.Header, out
}

func decodeObject(t *testing.T, raw []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("decode %s: %v", raw, err)
	}
	return m
}

// jsonValue decodes a JSON literal, so that expectations read as the wire.
func jsonValue(t *testing.T, lit string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(lit), &v); err != nil {
		t.Fatalf("bad JSON in the test: %v\n%s", err, lit)
	}
	return v
}

// answerJSON decodes JSON text the model answered (an output, tool-call
// arguments), failing t with what it was when it is not JSON.
func answerJSON(t *testing.T, what, text string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(text), &v); err != nil {
		t.Fatalf("%s %q is not JSON: %v", what, text, err)
	}
	return v
}

// checkField compares one field of a received body with its expected
// JSON, naming the field.
func checkField(t *testing.T, kind string, body map[string]any, field, want string) {
	t.Helper()
	got, ok := body[field]
	if want == "" {
		if ok {
			t.Errorf("%s provider received %s = %v; want it absent", kind, field, got)
		}
		return
	}
	if !ok {
		t.Errorf("%s provider received no %s; want %s", kind, field, want)
		return
	}
	if diff := cmp.Diff(jsonValue(t, want), got); diff != "" {
		t.Errorf("%s provider received %s mismatch (-want +got):\n%s", kind, field, diff)
	}
}

// checkSameFields checks that every field the SDK sent reached an
// OpenAI-kind provider unchanged, but the model, which the catalog names.
func checkSameFields(t *testing.T, sent, received map[string]any, providerModel string) {
	t.Helper()
	for k, v := range sent {
		if k == "model" {
			continue
		}
		if diff := cmp.Diff(v, received[k]); diff != "" {
			t.Errorf("the OpenAI provider received %s changed (-sent +received):\n%s", k, diff)
		}
	}
	if received["model"] != providerModel {
		t.Errorf("the OpenAI provider received model %v; want %q", received["model"], providerModel)
	}
}

// TestFaithfulRequests runs every case against one serve.
func TestFaithfulRequests(t *testing.T) {
	t.Parallel()
	w := startFaithful(t)
	t.Run("tools", func(t *testing.T) { t.Parallel(); testFaithfulTools(t, w) })
	t.Run("formats", func(t *testing.T) { t.Parallel(); testFaithfulFormats(t, w) })
	t.Run("sampling", func(t *testing.T) { t.Parallel(); testFaithfulSampling(t, w) })
	t.Run("errors", func(t *testing.T) { t.Parallel(); testFaithfulErrors(t, w) })
}
