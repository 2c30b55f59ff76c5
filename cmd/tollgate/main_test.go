package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tollgate/tollgate/accounts"
	"github.com/tollgate/tollgate/internal/logbuf"
	"github.com/tollgate/tollgate/internal/testdb"
	"github.com/tollgate/tollgate/migrations"
)

// envFunc returns a getenv that reads only env, so that tests never see
// the developer's DATABASE_URL or MODEL_BASE_URL.
func envFunc(env map[string]string) func(string) string {
	return func(k string) string { return env[k] }
}

// syncBuffer collects logs written by concurrent goroutines.
type syncBuffer = logbuf.Buffer

// freeAddr returns a loopback address that was free a moment ago. serve
// takes its address from TOLLGATE_ADDR and does not report the port it got,
// so the test picks one.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		t.Fatalf("close listener: %v", err)
	}
	return addr
}

// TestServeEndToEnd runs the program as an operator would: create a key and
// a budget with the admin commands, start serve with the in-process fake
// provider, run one task through the HTTP API, and shut down on cancel.
func TestServeEndToEnd(t *testing.T) {
	t.Parallel()
	addr := freeAddr(t)
	env := map[string]string{
		"DATABASE_URL":  testdb.New(t),
		"TOLLGATE_ADDR": addr,
	}
	getenv := envFunc(env)
	ctx := context.Background()

	var out, errb bytes.Buffer
	if err := run(ctx, []string{"keys", "create", "--owner", "acme", "--role", "client"}, getenv, strings.NewReader(""), &out, &errb); err != nil {
		t.Fatalf("keys create: %v\nstderr: %s", err, errb.String())
	}
	key, ok := strings.CutSuffix(out.String(), "\n")
	if !ok || strings.ContainsAny(key, "\n \t") || !strings.HasPrefix(key, "tg_") {
		t.Fatalf("keys create stdout = %q; want one line holding only a tg_ key", out.String())
	}

	out.Reset()
	if err := run(ctx, []string{"budget", "set", "--owner", "acme", "--total-micros", "1000000"}, getenv, strings.NewReader(""), &out, &errb); err != nil {
		t.Fatalf("budget set: %v\nstderr: %s", err, errb.String())
	}
	if want := "owner=acme period=none total_micros=1000000 reserved_micros=0 spent_micros=0 available_micros=1000000\n"; out.String() != want {
		t.Errorf("budget set stdout mismatch (-want +got):\n%s", cmp.Diff(want, out.String()))
	}

	serveCtx, stop := context.WithCancel(ctx)
	logs := &syncBuffer{}
	done := make(chan error, 1)
	go func() { done <- run(serveCtx, []string{"serve"}, getenv, strings.NewReader(""), io.Discard, logs) }()
	stopped := false
	// Stop the server before testdb drops its database, also when the test
	// fails half-way.
	t.Cleanup(func() {
		if stopped {
			return
		}
		stop()
		select {
		case <-done:
		case <-time.After(time.Minute):
			t.Errorf("serve did not return within a minute of cancel")
		}
	})

	base := "http://" + addr
	client := &http.Client{Timeout: 30 * time.Second}
	waitHealthy(t, client, base, done, logs)

	body := `{"messages":[{"role":"user","content":"Say hello"}],"max_tokens":32}`
	req, err := http.NewRequest(http.MethodPost, base+"/v1/tasks", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", "e2e-1")
	req.Header.Set("Prefer", "wait=10")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("POST /v1/tasks: %v", err)
	}
	raw, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatalf("read POST /v1/tasks response: %v", err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST /v1/tasks status = %d; want 200\nbody: %s\nlogs:\n%s", resp.StatusCode, raw, logs)
	}
	var task struct {
		ID     string `json:"id"`
		Status string `json:"status"`
		Result *struct {
			Output string `json:"output"`
		} `json:"result"`
	}
	if err := json.Unmarshal(raw, &task); err != nil {
		t.Fatalf("decode task: %v\nbody: %s", err, raw)
	}
	if task.Status != "succeeded" || task.Result == nil || !strings.HasPrefix(task.Result.Output, "fake completion ") {
		t.Errorf("task = %s; want status succeeded with a fake completion", raw)
	}
	if got := resp.Header.Get("Location"); got != "/v1/tasks/"+task.ID {
		t.Errorf("Location = %q; want %q", got, "/v1/tasks/"+task.ID)
	}
	if got := resp.Header.Get("Idempotent-Replayed"); got != "false" {
		t.Errorf("Idempotent-Replayed = %q; want false", got)
	}

	resp, err = client.Get(base + "/readyz")
	if err != nil {
		t.Fatalf("GET /readyz: %v", err)
	}
	raw, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("GET /readyz status = %d; want 200\nbody: %s", resp.StatusCode, raw)
	}

	stopped = true
	stop()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("serve returned %v after cancel; want nil (graceful shutdown)\nlogs:\n%s", err, logs)
		}
	case <-time.After(time.Minute):
		t.Fatalf("serve did not return within a minute of cancel\nlogs:\n%s", logs)
	}
}

// waitHealthy polls /healthz until it answers 200, failing if serve exits
// first or if it takes longer than a generous bound.
func waitHealthy(t *testing.T, client *http.Client, base string, done <-chan error, logs fmt.Stringer) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		resp, err := client.Get(base + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		select {
		case err := <-done:
			t.Fatalf("serve exited before it was healthy: %v\nlogs:\n%s", err, logs)
		case <-deadline:
			t.Fatalf("GET /healthz did not answer 200 within 30s (last error: %v)\nlogs:\n%s", err, logs)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func TestRunCommands(t *testing.T) {
	t.Parallel()
	getenv := envFunc(map[string]string{"DATABASE_URL": testdb.New(t)})
	latest := migrations.Latest()

	tests := []struct {
		name       string
		args       []string
		wantStdout string // compared exactly
		wantErr    string // substring of the error; "" means success
	}{
		{name: "no command", args: nil, wantErr: "no command given"},
		{name: "unknown command", args: []string{"frobnicate"}, wantErr: `unknown command "frobnicate"`},
		{name: "help", args: []string{"help"}, wantStdout: usage},
		{
			name:       "migrate version",
			args:       []string{"migrate", "version"},
			wantStdout: fmt.Sprintf("version %d (latest %d)\n", latest, latest),
		},
		{name: "migrate without subcommand", args: []string{"migrate"}, wantErr: "usage: tollgate migrate"},
		{name: "migrate unknown subcommand", args: []string{"migrate", "sideways"}, wantErr: `unknown migrate command "sideways"`},
		{name: "keys without subcommand", args: []string{"keys"}, wantErr: "usage: tollgate keys create"},
		{name: "keys create bad role", args: []string{"keys", "create", "--owner", "acme", "--role", "root"}, wantErr: `--role must be client, support, finance or admin, not "root"`},
		{name: "keys create without owner", args: []string{"keys", "create"}, wantErr: "--owner is required"},
		{name: "keys create name too long", args: []string{"keys", "create", "--owner", "acme", "--name", strings.Repeat("n", 201)}, wantErr: "--name must be at most 200 characters"},
		{name: "keys create expiry not RFC 3339", args: []string{"keys", "create", "--owner", "acme", "--expires-at", "tomorrow"}, wantErr: `--expires-at must be an RFC 3339 time, such as 2027-01-02T15:04:05Z, not "tomorrow"`},
		{name: "keys create expiry past", args: []string{"keys", "create", "--owner", "acme", "--expires-at", "2001-01-01T00:00:00Z"}, wantErr: "--expires-at must be in the future"},
		{name: "keys create bad workload", args: []string{"keys", "create", "--owner", "acme", "--workload", "a b"}, wantErr: "--workload must be"},
		{name: "keys create bad owner", args: []string{"keys", "create", "--owner", "no spaces", "--role", "client"}, wantErr: "--owner"},
		{name: "budget set without total", args: []string{"budget", "set", "--owner", "acme"}, wantErr: "--total-micros is required"},
		{name: "budget set negative total", args: []string{"budget", "set", "--owner", "acme", "--total-micros", "-5"}, wantErr: "--total-micros is required"},
		// int64's maximum leaves no room for the arithmetic on it.
		{name: "budget set total beyond the maximum", args: []string{"budget", "set", "--owner", "acme", "--total-micros", "9223372036854775807"}, wantErr: "an integer from 0 to 1000000000000000000, or \"unlimited\""},
		{name: "budget without subcommand", args: []string{"budget"}, wantErr: "usage: tollgate budget set"},
		{
			name:       "budget set of a workload names it",
			args:       []string{"budget", "set", "--owner", "acme", "--workload", "nightly", "--total-micros", "5000"},
			wantStdout: "owner=acme workload=nightly period=none total_micros=5000 reserved_micros=0 spent_micros=0 available_micros=5000\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var stdout, stderr bytes.Buffer
			err := run(context.Background(), tt.args, getenv, strings.NewReader(""), &stdout, &stderr)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("run(%q) = %v; want nil\nstderr: %s", tt.args, err, stderr.String())
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("run(%q) = %v; want an error containing %q", tt.args, err, tt.wantErr)
			}
			if diff := cmp.Diff(tt.wantStdout, stdout.String()); diff != "" {
				t.Errorf("run(%q) stdout mismatch (-want +got):\n%s", tt.args, diff)
			}
		})
	}
}

// budget verify passes on consistent books and fails, naming the owner,
// when a balance was edited by hand.
func TestBudgetVerifyDetectsAHandCorruptedBalance(t *testing.T) {
	t.Parallel()
	dbURL := testdb.New(t)
	getenv := envFunc(map[string]string{"DATABASE_URL": dbURL})
	ctx := context.Background()
	var out, errb bytes.Buffer
	if err := run(ctx, []string{"budget", "set", "--owner", "acme", "--total-micros", "5000", "--period", "monthly"}, getenv, strings.NewReader(""), &out, &errb); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if err := run(ctx, []string{"budget", "verify"}, getenv, strings.NewReader(""), &out, &errb); err != nil {
		t.Fatalf("verify on clean books: %v\n%s", err, out.String())
	}
	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if _, err := pool.Exec(ctx, `UPDATE budget_periods SET total_micros = total_micros + 1`); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	err = run(ctx, []string{"budget", "verify"}, getenv, strings.NewReader(""), &out, &errb)
	if err == nil || !strings.Contains(out.String(), "owner acme") {
		t.Fatalf("verify on corrupted books: err=%v output=%q; want an error naming acme", err, out.String())
	}
}

// "unlimited" is the maximum total, which no spend reaches.
func TestBudgetSetUnlimited(t *testing.T) {
	t.Parallel()
	getenv := envFunc(map[string]string{"DATABASE_URL": testdb.New(t)})
	var out, errb bytes.Buffer
	if err := run(context.Background(), []string{"budget", "set", "--owner", "acme", "--total-micros", "unlimited"}, getenv, strings.NewReader(""), &out, &errb); err != nil {
		t.Fatalf("budget set unlimited: %v\nstderr: %s", err, errb.String())
	}
	want := "owner=acme period=none total_micros=1000000000000000000 reserved_micros=0 spent_micros=0 available_micros=1000000000000000000\n"
	if diff := cmp.Diff(want, out.String()); diff != "" {
		t.Errorf("budget set unlimited stdout mismatch (-want +got):\n%s", diff)
	}
}

// TestHelpDoesNothing runs every command with --help and -h with no
// database and no environment: each prints its own usage and returns nil,
// so nothing ran (a command that ran would fail without DATABASE_URL, and
// fakeprovider and serve would not return).
func TestHelpDoesNothing(t *testing.T) {
	t.Parallel()
	commands := [][]string{{"serve"}, {"migrate", "up"}, {"keys", "create"}, {"keys", "list"}, {"keys", "revoke"},
		{"budget", "set"}, {"budget", "verify"}, {"classify"}, {"status"}, {"fakeprovider"}, {"version"}}
	for _, cmd := range commands {
		for _, flag := range []string{"--help", "-h"} {
			args := append(append([]string(nil), cmd...), flag)
			t.Run(strings.Join(args, " "), func(t *testing.T) {
				t.Parallel()
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				var stdout, stderr strings.Builder
				noEnv := func(string) string { return "" }
				if err := run(ctx, args, noEnv, strings.NewReader(""), &stdout, &stderr); err != nil {
					t.Fatalf("run(%q) = %v, want nil", args, err)
				}
				if want := "  tollgate " + cmd[0]; !strings.Contains(stdout.String(), want) || !strings.HasPrefix(stdout.String(), "usage:\n") {
					t.Errorf("run(%q) printed %q, want the usage of %s", args, stdout.String(), cmd[0])
				}
				if strings.Contains(stdout.String(), "  tollgate serve") != (cmd[0] == "serve") {
					t.Errorf("run(%q) printed %q, want only %s's usage", args, stdout.String(), cmd[0])
				}
			})
		}
	}
}

func TestVersion(t *testing.T) {
	t.Parallel()
	for _, arg := range []string{"version", "--version"} {
		var stdout strings.Builder
		if err := run(context.Background(), []string{arg}, func(string) string { return "" }, strings.NewReader(""), &stdout, io.Discard); err != nil {
			t.Fatalf("run(%q) = %v", arg, err)
		}
		if out := stdout.String(); !strings.HasPrefix(out, "tollgate ") || !strings.Contains(out, runtime.Version()) {
			t.Errorf("run(%q) printed %q, want tollgate's version and the Go release", arg, out)
		}
	}
}

// The command list in docs/configuration.md is the one `tollgate help`
// prints, line for line.
func TestDocumentedUsage(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "\n## Command line\n")
	if !ok {
		t.Fatal("docs/configuration.md has no \"## Command line\" section")
	}
	_, block, _ := strings.Cut(section, "```text\n")
	block, _, _ = strings.Cut(block, "```")
	var want []string
	for _, l := range strings.Split(usage, "\n") {
		if cmd, ok := strings.CutPrefix(l, "  "); ok {
			want = append(want, cmd)
		}
	}
	got := strings.Split(strings.TrimSuffix(block, "\n"), "\n")
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("docs/configuration.md's command list differs from tollgate help (-help +doc):\n%s", diff)
	}
}

// keys create takes --name and --expires-at as POST /v1/keys takes name
// and expires_at: keys list shows the key with both.
func TestKeysCreateNameAndExpiry(t *testing.T) {
	t.Parallel()
	getenv := envFunc(map[string]string{"DATABASE_URL": testdb.New(t)})
	var out, errb strings.Builder
	args := []string{"keys", "create", "--owner", "acme", "--role", "finance", "--name", "billing export", "--expires-at", "2099-03-04T05:06:07Z"}
	if err := run(context.Background(), args, getenv, strings.NewReader(""), &out, &errb); err != nil {
		t.Fatalf("keys create: %v\nstderr: %s", err, errb.String())
	}
	if !strings.HasPrefix(out.String(), "tg_") || strings.Count(out.String(), "\n") != 1 {
		t.Fatalf("keys create printed %q; want the key alone", out.String())
	}
	pool, err := pgxpool.New(context.Background(), getenv("DATABASE_URL"))
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	keys, err := accounts.NewStore(pool).ListKeys(context.Background(), "acme")
	if err != nil || len(keys) != 1 {
		t.Fatalf("ListKeys = %v, %v; want the one key", keys, err)
	}
	k := keys[0]
	want := time.Date(2099, 3, 4, 5, 6, 7, 0, time.UTC)
	if k.Name != "billing export" || k.ExpiresAt == nil || !k.ExpiresAt.Equal(want) || k.Role != accounts.RoleFinance {
		t.Errorf("key = name %q, expires %v, role %s; want \"billing export\", %s, finance", k.Name, k.ExpiresAt, k.Role, want)
	}
}

// Help prints a command's synopsis and its flags on stdout; a bad flag
// prints the flags on stderr and leaves the error to main, which prints it
// once.
func TestFlagsHelpAndBadFlags(t *testing.T) {
	t.Parallel()
	noEnv := func(string) string { return "" }
	tests := []struct {
		args       []string
		wantStdout []string // substrings
		wantStderr []string
		wantErr    string
	}{
		{args: []string{"keys", "create", "--help"}, wantStdout: []string{"usage:\n  tollgate keys create --owner", "-owner", "-role", "-workload", "-name", "-expires-at", "RFC 3339"}},
		{args: []string{"keys", "list", "-h"}, wantStdout: []string{"  tollgate keys list", "-owner"}},
		{args: []string{"budget", "set", "--help"}, wantStdout: []string{"  tollgate budget set", "-total-micros", "-workload"}},
		{args: []string{"keys", "create", "--frob"}, wantStderr: []string{"flags:", "-owner", "-expires-at"}, wantErr: "flag provided but not defined: -frob"},
		{args: []string{"budget", "set", "--frob"}, wantStderr: []string{"flags:", "-total-micros"}, wantErr: "flag provided but not defined: -frob"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			t.Parallel()
			var stdout, stderr strings.Builder
			err := run(context.Background(), tt.args, noEnv, strings.NewReader(""), &stdout, &stderr)
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || err.Error() != tt.wantErr) {
				t.Fatalf("run(%q) = %v; want error %q", tt.args, err, tt.wantErr)
			}
			for _, w := range tt.wantStdout {
				if !strings.Contains(stdout.String(), w) {
					t.Errorf("run(%q) stdout = %q; want it to hold %q", tt.args, stdout.String(), w)
				}
			}
			for _, w := range tt.wantStderr {
				if !strings.Contains(stderr.String(), w) {
					t.Errorf("run(%q) stderr = %q; want it to hold %q", tt.args, stderr.String(), w)
				}
			}
			if tt.wantErr != "" && strings.Contains(stderr.String(), tt.wantErr) {
				t.Errorf("run(%q) stderr = %q already holds the error main prints", tt.args, stderr.String())
			}
		})
	}
}
