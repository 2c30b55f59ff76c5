package docs

import (
	"bufio"
	"bytes"
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
	banner, startup := startDemo(t, bash, dir, env)
	t.Run("start-up warnings", func(t *testing.T) { checkStartupWarnings(t, startup) })
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
// and returns the export lines its banner prints once the service answers,
// and all it printed until then.
func startDemo(t *testing.T, bash, dir string, env []string) (banner, startup string) {
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
	for _, want := range []string{"export TOLLGATE_KEY=tg_", "export TG=http://" + addr, "export FAKE=http://" + fakeAddr} {
		if !strings.Contains(got, want) {
			t.Fatalf("make run's banner has no %q line; it printed:\n%s", want, out)
		}
	}
	return got, out.String()
}

// readmeWarningsRE is the README's count of make run's start-up WARN
// lines, in words.
var readmeWarningsRE = regexp.MustCompile("(?i)\\b(one|two|three|four|five|six) `WARN` lines\\b")

// checkStartupWarnings holds the README's count of start-up WARN lines to
// what make run logged before it answered /healthz: every warning is
// logged before the listener opens.
func checkStartupWarnings(t *testing.T, startup string) {
	t.Helper()
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	m := readmeWarningsRE.FindStringSubmatch(string(readme))
	if m == nil {
		t.Fatalf("README.md does not say how many `WARN` lines make run logs at start-up (no match for %s)", readmeWarningsRE)
	}
	words := map[string]int{"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6}
	var warns []string
	for _, l := range strings.Split(startup, "\n") {
		if strings.Contains(l, `"level":"WARN"`) {
			warns = append(warns, l)
		}
	}
	if want := words[strings.ToLower(m[1])]; len(warns) != want {
		t.Errorf("README.md says %s `WARN` lines at start-up; make run logged %d:\n%s", m[1], len(warns), strings.Join(warns, "\n"))
	}
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
		go func() {
			for range sh.lines { // unread output must not block Wait
			}
		}()
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
