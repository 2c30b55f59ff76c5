package agents

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// TestAgents runs every client of Clients headless, against the scripted
// upstream directly and then through a real `tollgate serve`, and checks
// that through Tollgate the agent loop ends as it does without it: the
// upstream's final text, the client's tool run, what the client sent
// reaching the upstream unchanged, one upstream call per client call, a
// replay record with the tools, usage settled and the ledger whole. It
// needs the clients installed (make test-agents does it), so it runs only
// with TOLLGATE_AGENTS=1.
func TestAgents(t *testing.T) {
	if os.Getenv("TOLLGATE_AGENTS") == "" {
		t.Skip("the coding-agent suite needs its npm clients: run it with make test-agents")
	}
	nodeDir, err := filepath.Abs("node")
	if err != nil {
		t.Fatal(err)
	}
	nodeModules := filepath.Join(nodeDir, "node_modules")
	if _, err := os.Stat(nodeModules); err != nil {
		t.Fatalf("%s is missing: make test-agents installs the clients there", nodeModules)
	}
	up := &Upstream{}
	upSrv := httptest.NewServer(up)
	t.Cleanup(upSrv.Close)
	tg := startTollgate(t, upSrv.URL)
	rec := NewRecorder(tg.url)
	recSrv := httptest.NewServer(rec)
	t.Cleanup(recSrv.Close)

	only := os.Getenv("TOLLGATE_AGENTS_ONLY")
	for _, cl := range Clients(nodeDir) {
		if only != "" && !strings.Contains(","+only+",", ","+cl.Name+",") {
			continue
		}
		t.Run(cl.Name, func(t *testing.T) {
			up.Reset()
			control := runClient(t, cl, Run{BaseURL: upSrv.URL, Key: "sk-upstream", Dir: t.TempDir(), Node: nodeModules})
			checkLoop(t, cl, "control", control, up.Calls())
			controlCalls := len(up.Calls())

			up.Reset()
			rec.Reset()
			through := runClient(t, cl, Run{BaseURL: recSrv.URL, Key: tg.key, Dir: t.TempDir(), Node: nodeModules})
			calls, sent := up.Calls(), rec.ModelCalls()
			checkLoop(t, cl, "through Tollgate", through, calls)
			if len(calls) != len(sent) {
				t.Errorf("the client made %d model calls through Tollgate and the upstream received %d: want one each", len(sent), len(calls))
			}
			t.Logf("%d model calls directly, %d through Tollgate", controlCalls, len(calls))
			for i, p := range pairCalls(sent, calls) {
				checkFaithful(t, cl, i, sent[i], calls[p])
			}
			tg.checkTasks(t, sent)
		})
	}
	tg.verify(t)
}

// runClient runs cl to its end, at most three minutes.
func runClient(t *testing.T, cl Client, r Run) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := cl.Command(ctx, r)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s against %s: %v\n%s", cl.Name, r.BaseURL, err, output(out.Bytes()))
	}
	return out.Bytes()
}

// checkLoop: the client printed the upstream's final text quoting the
// tool's output, and a request carried that output (the tool ran).
func checkLoop(t *testing.T, cl Client, how string, out []byte, calls []Call) {
	t.Helper()
	for _, want := range cl.Expect {
		if !bytes.Contains(out, []byte(want)) {
			t.Errorf("%s: the client's output does not hold %q:\n%s", how, want, output(out))
		}
	}
	if cl.NoLoop {
		return
	}
	if !bytes.Contains(out, []byte(ToolOutput)) {
		t.Errorf("%s: the client's output does not quote the tool's output %q:\n%s", how, ToolOutput, output(out))
	}
	ran := false
	for _, c := range calls {
		ran = ran || bytes.Contains(c.Body, []byte(ToolOutput))
	}
	if !ran {
		t.Errorf("%s: no request carried the tool's output %q: the tool did not run (%d calls)", how, ToolOutput, len(calls))
	}
}

// checkFaithful compares what the client sent with what reached the
// upstream, field by field; only the fields the client's Allowed lists
// may differ.
func checkFaithful(t *testing.T, cl Client, i int, sent Exchange, got Call) {
	t.Helper()
	var a, b map[string]any
	if err := json.Unmarshal(sent.Body, &a); err != nil {
		t.Fatalf("call %d: the client sent no JSON object: %v", i, err)
	}
	if err := json.Unmarshal(got.Body, &b); err != nil {
		t.Fatalf("call %d: the upstream got no JSON object: %v", i, err)
	}
	for _, d := range diff("", a, b) {
		top := strings.SplitN(strings.TrimPrefix(d, "."), ".", 2)[0]
		top = strings.SplitN(top, "[", 2)[0]
		top = strings.SplitN(top, ":", 2)[0]
		_, allowed := cl.Allowed[top]
		switch {
		case allowed:
		case cl.Translated && strings.Contains(d, ": sent empty ("):
			t.Logf("call %d: %s (an empty value, as OpenAI reads an absent one)", i, d)
		default:
			t.Errorf("call %d: %s", i, d)
		}
	}
	if cl.Dialect == "anthropic" {
		for _, h := range []string{"Anthropic-Beta", "Anthropic-Version"} {
			if s, g := sent.Header.Get(h), got.Header.Get(h); s != g {
				t.Errorf("call %d: header %s: the client sent %q, the upstream got %q", i, h, s, g)
			}
		}
	}
}

// pairCalls pairs each call the client sent with the upstream call most
// like it (a client may make calls concurrently, so the order can
// differ): the index of its upstream call, or none when there is none
// left.
func pairCalls(sent []Exchange, calls []Call) map[int]int {
	pairs := map[int]int{}
	taken := map[int]bool{}
	for i, e := range sent {
		var a any
		_ = json.Unmarshal(e.Body, &a)
		best, bestN := -1, 0
		for j, c := range calls {
			if taken[j] {
				continue
			}
			var b any
			_ = json.Unmarshal(c.Body, &b)
			if n := len(diff("", a, b)); best < 0 || n < bestN {
				best, bestN = j, n
			}
		}
		if best >= 0 {
			pairs[i], taken[best] = best, true
		}
	}
	return pairs
}

// diff lists where b differs from a, as paths.
func diff(path string, a, b any) []string {
	switch x := a.(type) {
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok {
			return []string{fmt.Sprintf("%s: sent an object, got %s", path, kind(b))}
		}
		var out []string
		keys := map[string]bool{}
		for k := range x {
			keys[k] = true
		}
		for k := range y {
			keys[k] = true
		}
		sorted := make([]string, 0, len(keys))
		for k := range keys {
			sorted = append(sorted, k)
		}
		sort.Strings(sorted)
		for _, k := range sorted {
			av, aok := x[k]
			bv, bok := y[k]
			switch {
			case !bok && isEmpty(av):
				out = append(out, fmt.Sprintf("%s.%s: sent empty (%s), not carried", path, k, short(av)))
			case !bok:
				out = append(out, fmt.Sprintf("%s.%s: sent, not carried", path, k))
			case !aok:
				out = append(out, fmt.Sprintf("%s.%s: not sent, added as %s", path, k, short(bv)))
			default:
				out = append(out, diff(path+"."+k, av, bv)...)
			}
		}
		return out
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return []string{fmt.Sprintf("%s: sent %s, got %s", path, short(a), short(b))}
		}
		var out []string
		for i := range x {
			out = append(out, diff(fmt.Sprintf("%s[%d]", path, i), x[i], y[i])...)
		}
		return out
	}
	if !reflect.DeepEqual(a, b) {
		return []string{fmt.Sprintf("%s: sent %s, got %s", path, short(a), short(b))}
	}
	return nil
}

// isEmpty: "", false, null, [] or {}, which OpenAI reads as it reads an
// absent field.
func isEmpty(v any) bool {
	switch x := v.(type) {
	case nil:
		return true
	case string:
		return x == ""
	case bool:
		return !x
	case []any:
		return len(x) == 0
	case map[string]any:
		return len(x) == 0
	}
	return false
}

func kind(v any) string { return fmt.Sprintf("%T", v) }

func short(v any) string {
	b, _ := json.Marshal(v)
	if len(b) > 120 {
		return string(b[:120]) + "..."
	}
	return string(b)
}

// tollgate is a running `tollgate serve` on a database of its own.
type tollgate struct {
	url *url.URL
	key string
	bin string
	env []string
}

// catalogFile names the upstream as one OpenAI and one Anthropic
// provider, and the models the clients use. The OpenAI provider takes
// every Responses request natively (responses: native), as OpenAI does;
// by default only those chat completions cannot say go so.
const catalogFile = `providers:
  - key: upstream-openai
    kind: openai
    base_url: %[1]s/v1
    api_key_env: UPSTREAM_KEY
    responses: native
  - key: upstream-anthropic
    kind: anthropic
    base_url: %[1]s
    api_key_env: UPSTREAM_KEY
default_model: gpt-5
models:
  - {name: gpt-5, provider: upstream-openai, input_micros_per_mtok: 1250000, output_micros_per_mtok: 10000000, context_window: 400000, max_output_tokens: 128000, tools: true, json_schema: true, vision: true, reasoning: true}
  - {name: gpt-4o-mini, provider: upstream-openai, input_micros_per_mtok: 150000, output_micros_per_mtok: 600000, context_window: 128000, max_output_tokens: 16384, tools: true, json_schema: true, vision: true}
  - {name: claude-sonnet-4-5, provider: upstream-anthropic, input_micros_per_mtok: 3000000, output_micros_per_mtok: 15000000, context_window: 200000, max_output_tokens: 64000, tools: true, json_schema: true, vision: true, reasoning: true}
  - {name: claude-haiku-4-5, provider: upstream-anthropic, input_micros_per_mtok: 1000000, output_micros_per_mtok: 5000000, context_window: 200000, max_output_tokens: 64000, tools: true, json_schema: true, vision: true, reasoning: true}
`

func startTollgate(t *testing.T, upstream string) *tollgate {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "tollgate")
	build := exec.Command("go", "build", "-o", bin, "github.com/tollgate/tollgate/cmd/tollgate")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	cat := filepath.Join(dir, "catalog.yaml")
	if err := os.WriteFile(cat, fmt.Appendf(nil, catalogFile, upstream), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	tg := &tollgate{bin: bin, env: append(os.Environ(), "DATABASE_URL="+newDatabase(t), "TOLLGATE_CONFIG="+cat,
		"TOLLGATE_ADDR="+addr, "TOLLGATE_DRAIN_DELAY_S=0", "UPSTREAM_KEY=sk-upstream")}
	tg.url = &url.URL{Scheme: "http", Host: addr}
	tg.key = strings.TrimSpace(tg.run(t, "keys", "create", "--owner", "agents", "--role", "client"))
	tg.run(t, "budget", "set", "--owner", "agents", "--total-micros", "1000000000")

	ctx, cancel := context.WithCancel(context.Background())
	serve := exec.CommandContext(ctx, bin, "serve")
	serve.Env = tg.env
	var log bytes.Buffer
	serve.Stdout, serve.Stderr = &log, &log
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		_ = serve.Wait()
		if t.Failed() {
			t.Logf("tollgate serve's log:\n%s", output(log.Bytes()))
		}
	})
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get(tg.url.String() + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return tg
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("tollgate serve never became ready:\n%s", output(log.Bytes()))
		}
		time.Sleep(50 * time.Millisecond) // polling a readiness probe
	}
}

func (tg *tollgate) run(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command(tg.bin, args...)
	cmd.Env = tg.env
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("tollgate %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return string(out)
}

// checkTasks: each call the client made is a task that succeeded, was
// charged, and whose replay record holds the tools it offered.
func (tg *tollgate) checkTasks(t *testing.T, sent []Exchange) {
	t.Helper()
	for i, e := range sent {
		id := e.Answer.Get("X-Tollgate-Task-Id")
		if id == "" {
			t.Errorf("call %d (%s, status %d): no X-Tollgate-Task-Id", i, e.Path, e.Status)
			continue
		}
		var task struct {
			Status      string `json:"status"`
			CostMicros  *int64 `json:"cost_micros"`
			Attempts    int    `json:"attempts"`
			Result      any    `json:"result"`
			ReservedMic int64  `json:"reserved_micros"`
		}
		tg.get(t, "/v1/tasks/"+id, &task)
		if task.Status != "succeeded" || task.CostMicros == nil || *task.CostMicros <= 0 || task.Attempts != 1 {
			t.Errorf("call %d: task %s: status %q, cost %v, attempts %d: want succeeded, charged, one attempt", i, id, task.Status, task.CostMicros, task.Attempts)
		}
		var rec struct {
			Request struct {
				Tools []any `json:"tools"`
			} `json:"request"`
		}
		tg.get(t, "/v1/tasks/"+id+"/replay", &rec)
		var body struct {
			Tools []any `json:"tools"`
		}
		_ = json.Unmarshal(e.Body, &body)
		if len(body.Tools) > 0 && len(rec.Request.Tools) == 0 {
			t.Errorf("call %d: task %s: the replay record holds no tools; the client offered %d", i, id, len(body.Tools))
		}
	}
}

func (tg *tollgate) get(t *testing.T, path string, v any) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, tg.url.String()+path, nil)
	req.Header.Set("Authorization", "Bearer "+tg.key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("GET %s: %s", path, resp.Status)
		return
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Errorf("GET %s: %v", path, err)
	}
}

// verify: `tollgate budget verify` finds every balance whole.
func (tg *tollgate) verify(t *testing.T) {
	t.Helper()
	tg.run(t, "budget", "verify")
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// newDatabase creates an empty database on the test server and drops it
// at the end; tollgate serve migrates it.
func newDatabase(t *testing.T) string {
	t.Helper()
	base := os.Getenv("TOLLGATE_TEST_DATABASE_URL")
	if base == "" {
		base = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatalf("connect to %s: %v", base, err)
	}
	name := fmt.Sprintf("tollgate_agents_%d", time.Now().UnixNano())
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatal(err)
	}
	_ = conn.Close(ctx)
	t.Cleanup(func() {
		c, err := pgx.Connect(ctx, base)
		if err != nil {
			return
		}
		defer c.Close(ctx)
		_, _ = c.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
	})
	u, _ := url.Parse(base)
	u.Path = "/" + name
	return u.String()
}
