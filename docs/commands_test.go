package docs

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/testdb"
)

// pastedDocuments are the documents whose shell blocks are pasted into
// bash against a fresh service, in this order.
var pastedDocuments = []string{"../README.md", "walkthrough.md"}

// A ```sh block is marked by the HTML comment on the line before it:
//
//	<!-- check -->            run it; the block after it, if it is an
//	                          ```http, ```json or ```text block, is what
//	                          it must print
//	<!-- check: poll -->      the same, run again until it prints that
//	                          (a read of a state that takes a moment)
//	<!-- not checked: why --> not run (placeholders the reader fills in)
var markerRE = regexp.MustCompile(`^<!-- (check|check: poll|not checked: [^>]+) -->$`)

// block is one ```sh block of a document and what it must print.
type block struct {
	doc, marker string
	line        int    // of the opening fence
	script      string // the commands
	wantKind    string // http, json, text, or "" for nothing checked but the exit status
	want        string
}

// fence is one fenced block of a Markdown file.
type fence struct {
	info, body string
	line       int    // of the opening fence
	before     string // the last non-blank line before the fence
	gap        bool   // prose lies between this fence and the one before
}

func fences(t *testing.T, doc string) []fence {
	t.Helper()
	b, err := os.ReadFile(doc)
	if err != nil {
		t.Fatal(err)
	}
	var out []fence
	lines := strings.Split(string(b), "\n")
	last, prose := "", true
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		if !strings.HasPrefix(l, "```") {
			if s := strings.TrimSpace(l); s != "" {
				if !markerRE.MatchString(s) {
					prose = true
				}
				last = s
			}
			continue
		}
		f := fence{info: strings.TrimSpace(strings.TrimPrefix(l, "```")), line: i + 1, before: last, gap: prose}
		var body []string
		for i++; i < len(lines) && !strings.HasPrefix(lines[i], "```"); i++ {
			body = append(body, lines[i])
		}
		f.body = strings.Join(body, "\n")
		out = append(out, f)
		last, prose = "", false
	}
	return out
}

// shellBlocks returns doc's ```sh blocks; a block without a marker fails
// the test, so that no new block escapes the check unnoticed.
func shellBlocks(t *testing.T, doc string) []block {
	t.Helper()
	fs := fences(t, doc)
	var out []block
	for i, f := range fs {
		if f.info != "sh" {
			continue
		}
		m := markerRE.FindStringSubmatch(f.before)
		if m == nil {
			t.Errorf("%s:%d: a ```sh block without a marker (<!-- check -->, <!-- check: poll --> or <!-- not checked: why -->)", doc, f.line)
			continue
		}
		b := block{doc: doc, marker: m[1], line: f.line, script: f.body}
		if i+1 < len(fs) && !fs[i+1].gap {
			switch next := fs[i+1]; next.info {
			case "http", "json", "text":
				b.wantKind, b.want = next.info, next.body
			}
		}
		out = append(out, b)
	}
	return out
}

// needTool returns the path of a command the documents use. Without it a
// developer's run skips; CI must have it (.ci/run installs curl and jq).
func needTool(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err == nil {
		return p
	}
	if ci, _ := strconv.ParseBool(os.Getenv("CI")); ci {
		t.Fatalf("CI is set but %s is not installed (.ci/run installs it: apt-get install %s); the documented commands cannot be checked", name, name)
	}
	t.Skipf("%s not found: install it (apt-get install %s) to check the documented commands", name, name)
	return ""
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// lockedBuffer collects a process's output while it runs.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestDocumentedCommands does what a reader does: `make run` (its script,
// on a fresh database and free ports), then pastes every marked shell
// block of the README and the walkthrough into bash, in order, with the
// variables make run's banner prints, and holds each block's output to the
// documented one: statuses, headers shown, and the shape of JSON bodies
// (keys, types, array lengths and strings, with ids, digests and times
// masked; numbers by type only).
func TestDocumentedCommands(t *testing.T) {
	t.Parallel()
	bash := needTool(t, "bash")
	needTool(t, "curl")
	needTool(t, "jq")
	gobin := needTool(t, "go")

	var blocks [][]block
	for _, doc := range pastedDocuments {
		blocks = append(blocks, shellBlocks(t, doc))
	}
	if t.Failed() {
		return
	}

	dir := t.TempDir() // the reader's repository root: bin/tollgate
	build := exec.Command(gobin, "build", "-o", filepath.Join(dir, "bin", "tollgate"), "./cmd/tollgate")
	build.Dir = ".."
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}

	env := []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + dir,
		"LC_ALL=C",
		"DATABASE_URL=" + testdb.New(t),
	}
	banner := startDemo(t, bash, dir, env)
	for i, doc := range pastedDocuments {
		t.Run(filepath.Base(doc), func(t *testing.T) {
			sh := startShell(t, bash, dir, env)
			if _, status := sh.run(t, banner, time.Minute); status != 0 {
				t.Fatalf("the banner's export lines exited %d", status)
			}
			for _, b := range blocks[i] {
				if !strings.HasPrefix(b.marker, "check") {
					continue
				}
				if !checkBlock(t, sh, b) {
					return // later blocks use what this one set
				}
			}
		})
	}
}

// startDemo runs scripts/run-demo.sh, as `make run` does, on free ports,
// and returns the export lines its banner prints once the service answers.
func startDemo(t *testing.T, bash, dir string, env []string) string {
	t.Helper()
	addr, fakeAddr := freeAddr(t), freeAddr(t)
	script, err := filepath.Abs("../scripts/run-demo.sh")
	if err != nil {
		t.Fatal(err)
	}
	out := &lockedBuffer{}
	cmd := exec.Command(bash, script, "bin/tollgate")
	cmd.Dir = dir
	cmd.Env = append(env, "TOLLGATE_ADDR="+addr, "TOLLGATE_FAKE_ADDR="+fakeAddr)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	// The script execs tollgate serve: an interrupt stops it gracefully,
	// before testdb drops its database.
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-done:
		case <-time.After(time.Minute):
			_ = cmd.Process.Kill()
			t.Errorf("tollgate serve did not stop within a minute of SIGINT")
		}
	})

	client := &http.Client{Timeout: 5 * time.Second}
	deadline := time.Now().Add(time.Minute)
	for {
		if resp, err := client.Get("http://" + addr + "/healthz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		select {
		case err := <-done:
			t.Fatalf("make run's script exited before the service answered: %v\n%s", err, out)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET /healthz did not answer 200 within a minute\n%s", out)
		}
	}

	var exports []string
	for _, l := range strings.Split(out.String(), "\n") {
		if strings.HasPrefix(l, "export ") {
			exports = append(exports, l)
		}
	}
	got := strings.Join(exports, "\n")
	for _, want := range []string{"export KEY=tg_", "export TG=http://" + addr, "export FAKE=http://" + fakeAddr} {
		if !strings.Contains(got, want) {
			t.Fatalf("make run's banner has no %q line; it printed:\n%s", want, out)
		}
	}
	return got
}

// shell is one bash session: blocks pasted into it share its variables,
// as in a reader's terminal.
type shell struct {
	in    io.Writer
	lines chan string
	dir   string
	n     int
}

const sentinel = "@@tollgate-docs-block-done@@"

func startShell(t *testing.T, bash, dir string, env []string) *shell {
	t.Helper()
	cmd := exec.Command(bash, "--noprofile", "--norc")
	cmd.Dir = dir
	cmd.Env = env
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw // one pipe: output in the order written
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sh := &shell{in: in, lines: make(chan string, 1024), dir: dir}
	go func() {
		r := bufio.NewReader(pr)
		for {
			l, err := r.ReadString('\n')
			if l != "" {
				sh.lines <- l
			}
			if err != nil {
				close(sh.lines)
				return
			}
		}
	}()
	t.Cleanup(func() {
		in.Close()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		pw.Close()
	})
	return sh
}

// run sources script in the session (from a file, so that its commands
// cannot read the rest of the input) and returns what it printed and the
// exit status of its last command.
func (sh *shell) run(t *testing.T, script string, timeout time.Duration) (string, int) {
	t.Helper()
	sh.n++
	file := filepath.Join(sh.dir, fmt.Sprintf("block-%d.sh", sh.n))
	if err := os.WriteFile(file, []byte(script+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := fmt.Fprintf(sh.in, "source %q </dev/null\nprintf '\\n%s %%d\\n' $?\n", file, sentinel); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	deadline := time.After(timeout)
	for {
		select {
		case l, ok := <-sh.lines:
			if !ok {
				t.Fatalf("bash exited; it printed:\n%s", out.String())
			}
			if rest, found := strings.CutPrefix(l, sentinel+" "); found {
				status, _ := strconv.Atoi(strings.TrimSpace(rest))
				return strings.TrimSuffix(out.String(), "\n"), status
			}
			out.WriteString(l)
		case <-deadline:
			t.Fatalf("the block did not finish within %s; it printed:\n%s", timeout, out.String())
		}
	}
}

// checkBlock runs b and compares its output; false when it failed.
func checkBlock(t *testing.T, sh *shell, b block) bool {
	t.Helper()
	where := fmt.Sprintf("%s:%d", b.doc, b.line)
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, status := sh.run(t, b.script, 2*time.Minute)
		var problems []string
		if status != 0 {
			problems = append(problems, fmt.Sprintf("exit status %d", status))
		} else {
			problems = compareOutput(b.wantKind, b.want, out)
		}
		if len(problems) == 0 {
			return true
		}
		if b.marker == "check: poll" && status == 0 && time.Now().Before(deadline) {
			continue // the state it shows takes a moment
		}
		t.Errorf("%s: the block's output differs from the document:\n  %s\ncommands:\n%s\nprinted:\n%s",
			where, strings.Join(problems, "\n  "), b.script, out)
		return false
	}
}

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

// Every shell block of the pasted documents carries a marker; the parser
// finds the documented output after each checked one.
func TestShellBlocksAreMarked(t *testing.T) {
	t.Parallel()
	for _, doc := range pastedDocuments {
		checked := 0
		for _, b := range shellBlocks(t, doc) {
			if strings.HasPrefix(b.marker, "check") {
				checked++
			}
		}
		if checked == 0 {
			t.Errorf("%s: no checked shell block", doc)
		}
	}
}
