//go:build faults

package faults

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// dataKey is the fixed TOLLGATE_DATA_KEY every instance of a scenario
// shares (base64 of 32 bytes), so any instance can open what another sealed.
const dataKey = "ZmF1bHRzLXN1aXRlLWRhdGEta2V5LTMyLWJ5dGVzISE="

// freeAddr returns a loopback address that was free a moment ago: serve
// takes its address from TOLLGATE_ADDR and does not report the port it got.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// baseEnv is the environment every child process gets: nothing from the
// developer's shell but what a program needs to run, so that a stray
// DATABASE_URL or TOLLGATE_CONFIG cannot leak into a scenario.
func baseEnv() []string {
	var env []string
	for _, k := range []string{"PATH", "HOME", "TMPDIR", "TZ"} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	return env
}

func envList(m map[string]string) []string {
	env := baseEnv()
	for k, v := range m {
		env = append(env, k+"="+v)
	}
	return env
}

// proc is one child process of the suite, its output kept in a log file
// that is printed when the test fails.
type proc struct {
	name string
	cmd  *exec.Cmd
	done chan struct{} // closed when the process has exited
	err  error         // its exit status, once done is closed
}

func startProc(t *testing.T, name, logPath string, env map[string]string, args ...string) (*proc, error) {
	t.Helper()
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(logf, "\n=== %s start %s\n", name, time.Now().Format(time.RFC3339Nano))
	cmd := exec.Command(tollgateBin, args...)
	cmd.Env = envList(env)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, err
	}
	p := &proc{name: name, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		fmt.Fprintf(logf, "\n=== %s exited %s: %v\n", name, time.Now().Format(time.RFC3339Nano), p.err)
		logf.Close()
		close(p.done)
	}()
	return p, nil
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// kill sends SIGKILL and waits for the process to be gone.
func (p *proc) kill() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// stop asks the process to shut down (SIGTERM) and kills it if it has not
// exited within grace.
func (p *proc) stop(grace time.Duration) {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		p.kill()
	}
}

// dumpLogsOnFailure prints the tail of every log file in dir when t fails.
func dumpLogsOnFailure(t *testing.T, dir string) {
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		files, _ := filepath.Glob(filepath.Join(dir, "*.log"))
		for _, f := range files {
			b, _ := os.ReadFile(f)
			var errs []string
			for _, line := range strings.Split(string(b), "\n") {
				if strings.Contains(line, `"level":"ERROR"`) && len(errs) < 40 {
					errs = append(errs, line)
				}
			}
			const tail = 4000
			if len(b) > tail {
				b = b[len(b)-tail:]
			}
			t.Logf("--- %s: first errors ---\n%s\n--- tail ---\n%s", filepath.Base(f), strings.Join(errs, "\n"), b)
		}
	})
}

// waitHTTP polls url until it answers 200 or the timeout passes.
func waitHTTP(url string, timeout time.Duration, alive func() bool) error {
	deadline := time.Now().Add(timeout)
	hc := &http.Client{Timeout: time.Second}
	for {
		resp, err := hc.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if !alive() {
			return fmt.Errorf("%s: the process exited", url)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: not ready after %s (last error %v)", url, timeout, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// fakeProvider is a standalone `tollgate fakeprovider` process, driven
// through its control API.
type fakeProvider struct {
	url string
	p   *proc
}

func startFake(t *testing.T, logDir string) *fakeProvider {
	t.Helper()
	for try := 0; ; try++ {
		addr := freeAddr(t)
		p, err := startProc(t, "fakeprovider", filepath.Join(logDir, "fake.log"), map[string]string{"FAKE_ADDR": addr}, "fakeprovider")
		if err != nil {
			t.Fatalf("start fake provider: %v", err)
		}
		f := &fakeProvider{url: "http://" + addr, p: p}
		if err := waitHTTP(f.url+"/_fake/calls", 15*time.Second, func() bool { return !p.exited() }); err != nil {
			p.kill()
			if try < 3 {
				continue // the port was taken in between; pick another
			}
			t.Fatalf("fake provider: %v", err)
		}
		t.Cleanup(func() { p.stop(5 * time.Second) })
		return f
	}
}

// scripted is one canned answer of the fake (see provider/fake).
type scripted struct {
	Status  int               `json:"status,omitempty"`
	Headers map[string]string `json:"headers,omitempty"`
	Body    string            `json:"body,omitempty"`
	DelayMS int               `json:"delay_ms,omitempty"`
	Hang    bool              `json:"hang,omitempty"`
}

// call is one model call a provider received.
type call struct {
	ReceivedAt     time.Time `json:"received_at"`
	Model          string    `json:"model"`
	IdempotencyKey string    `json:"idempotency_key"`
}

func (f *fakeProvider) script(t *testing.T, rs ...scripted) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"responses": rs})
	resp, err := http.Post(f.url+"/_fake/script", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatalf("script the fake: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("script the fake: status %d", resp.StatusCode)
	}
}

func (f *fakeProvider) calls(t *testing.T) []call {
	t.Helper()
	resp, err := http.Get(f.url + "/_fake/calls")
	if err != nil {
		t.Fatalf("fake calls: %v", err)
	}
	defer resp.Body.Close()
	var out struct {
		Count int    `json:"count"`
		Calls []call `json:"calls"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatalf("fake calls: %v", err)
	}
	return out.Calls
}

// completionBody is a valid OpenAI chat completion, for scripted answers
// that must succeed after a delay.
const completionBody = `{"id":"chatcmpl-faults","object":"chat.completion","created":1767323045,"model":"gpt-4o-mini",` +
	`"choices":[{"index":0,"message":{"role":"assistant","content":"slow but fine"},"finish_reason":"stop"}],` +
	`"usage":{"prompt_tokens":9,"completion_tokens":4,"total_tokens":13}}`

// slowAnswers returns n successful answers, each delayed by a random time
// in [lo, hi) milliseconds, so that calls are in flight when faults strike.
func slowAnswers(n, lo, hi int) []scripted {
	out := make([]scripted, n)
	for i := range out {
		out[i] = scripted{Body: completionBody, DelayMS: lo + rand.IntN(hi-lo)}
	}
	return out
}

// cluster is a set of `tollgate serve` instances on one database.
type cluster struct {
	t         *testing.T
	logDir    string
	env       map[string]string
	instances []*instance // fixed at creation; each guards its own state
}

// instance is one `tollgate serve` process slot: killed, it can be
// started again on a fresh port.
type instance struct {
	name  string
	mu    sync.Mutex
	url   string
	p     *proc
	ready bool
}

// rescueAfterMS is TOLLGATE_RESCUE_AFTER_MS: short enough for a killed
// instance's jobs to be picked up again within the test. River refuses a
// rescue delay below its client-wide JobTimeout (default one minute), so it
// stays above that until the service sets River's JobTimeout to its own job
// timeout (REQUEST_TIMEOUT_MS plus a margin); then "15000" is enough and
// saves about 45 seconds in the SIGKILL scenario.
const rescueAfterMS = "15000"

// serveEnv is the environment of a scenario's instances: a short request
// timeout, a short rescue delay, few workers so that calls queue up, and
// the suite's data key, and no drain delay.
func serveEnv(dbURL, modelBaseURL string) map[string]string {
	return map[string]string{
		"DATABASE_URL":             dbURL,
		"TOLLGATE_MIGRATE":         "off", // testdb databases are migrated already
		"MODEL_BASE_URL":           modelBaseURL,
		"REQUEST_TIMEOUT_MS":       "2000",
		"TOLLGATE_RESCUE_AFTER_MS": rescueAfterMS,
		"TOLLGATE_MAX_ATTEMPTS":    "4",
		"TOLLGATE_WORKERS":         "4",
		"TOLLGATE_DATA_KEY":        dataKey,
		// No load balancer watches a scenario's /readyz: a stop closes
		// the listener at once.
		"TOLLGATE_DRAIN_DELAY_S": "0",
	}
}

func newCluster(t *testing.T, logDir string, n int, env map[string]string) *cluster {
	t.Helper()
	c := &cluster{t: t, logDir: logDir, env: env}
	for i := range n {
		in := &instance{name: fmt.Sprintf("tollgate-%d", i+1)}
		c.instances = append(c.instances, in)
		if err := c.start(in); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		var wg sync.WaitGroup
		for _, in := range c.instances {
			in.mu.Lock()
			p := in.p
			in.mu.Unlock()
			if p != nil {
				wg.Go(func() { p.stop(20 * time.Second) })
			}
		}
		wg.Wait()
	})
	return c
}

// start runs the instance's process and waits until it serves /healthz.
func (c *cluster) start(in *instance) error {
	var lastErr error
	for range 4 {
		addr := freeAddr(c.t)
		env := map[string]string{"TOLLGATE_ADDR": addr}
		for k, v := range c.env {
			env[k] = v
		}
		p, err := startProc(c.t, in.name, filepath.Join(c.logDir, in.name+".log"), env, "serve")
		if err != nil {
			return err
		}
		url := "http://" + addr
		if err := waitHTTP(url+"/healthz", 30*time.Second, func() bool { return !p.exited() }); err != nil {
			p.kill()
			lastErr = fmt.Errorf("%s: %w", in.name, err)
			continue
		}
		in.mu.Lock()
		in.url, in.p, in.ready = url, p, true
		in.mu.Unlock()
		return nil
	}
	return lastErr
}

// kill SIGKILLs the instance. It reports false when it was not running.
func (in *instance) kill() bool {
	in.mu.Lock()
	p, ready := in.p, in.ready
	in.ready = false
	in.mu.Unlock()
	if p == nil || !ready {
		return false
	}
	p.kill()
	return true
}

// pick returns the URL of a random instance that is up, or of any instance
// when none is (the request then fails and the client retries).
func (c *cluster) pick() string {
	var up, all []string
	for _, in := range c.instances {
		in.mu.Lock()
		if in.url != "" {
			all = append(all, in.url)
			if in.ready && !in.p.exited() {
				up = append(up, in.url)
			}
		}
		in.mu.Unlock()
	}
	if len(up) > 0 {
		return up[rand.IntN(len(up))]
	}
	return all[rand.IntN(len(all))]
}

// crashed lists the instances whose process exited on its own (not
// killed by the test).
func (c *cluster) crashed() []string {
	var out []string
	for _, in := range c.instances {
		in.mu.Lock()
		if in.ready && in.p.exited() {
			out = append(out, fmt.Sprintf("%s (%v)", in.name, in.p.err))
		}
		in.mu.Unlock()
	}
	return out
}

// cli runs an admin subcommand against the database and returns its
// standard output.
func cli(ctx context.Context, dbURL string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, tollgateBin, args...)
	cmd.Env = envList(map[string]string{"DATABASE_URL": dbURL, "TOLLGATE_MIGRATE": "off"})
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("tollgate %s: %v: %s%s", strings.Join(args, " "), err, out.String(), errb.String())
	}
	return out.String(), nil
}

// newOwner creates an owner with a period-less budget and returns a client
// key, through the admin commands an operator would use.
func newOwner(t *testing.T, dbURL, owner string, totalMicros int64) string {
	t.Helper()
	ctx := context.Background()
	if _, err := cli(ctx, dbURL, "budget", "set", "--owner", owner, "--total-micros", fmt.Sprint(totalMicros)); err != nil {
		t.Fatal(err)
	}
	key, err := cli(ctx, dbURL, "keys", "create", "--owner", owner, "--role", "client")
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(key)
}
