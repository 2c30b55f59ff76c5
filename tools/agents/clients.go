package agents

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Prompt is what every client is asked; the upstream's script does the
// rest.
const Prompt = "Run `echo $((6*7))-tollgate-tool` with your shell tool and tell me what it printed."

// Client is a coding agent or SDK run headless, once against the
// upstream directly (the control) and once through Tollgate.
type Client struct {
	Name string
	// Package is the npm package and pinned version (node/package.json).
	Package string
	// Dialect is the API it speaks: "anthropic" or "openai".
	Dialect string
	// Model is the model it is told to use.
	Model string
	// Command builds the command for a base URL (scheme and host, no
	// path) and key, run in dir.
	Command func(ctx context.Context, r Run) *exec.Cmd
	// Allowed lists the top-level request fields Tollgate may send
	// differently from the client, and why (docs/api.md's table).
	Allowed map[string]string
	// Translated: the client's dialect reaches the provider through
	// Tollgate's neutral request (OpenAI chat completions), which leaves
	// out empty values ("", false, null, [], {}): those are logged, not
	// failed.
	Translated bool
	// NoLoop: the client asks for one structured answer, no tool loop;
	// Expect says what its output holds instead.
	NoLoop bool
	// Expect are strings the client's output must hold.
	Expect []string
}

// defaultLimit is why Tollgate adds max_tokens to a request that sets no
// output limit.
const defaultLimit = "a request without an output limit gets TOLLGATE_DEFAULT_MAX_TOKENS: the reservation is bounded by it, so the provider must not write more"

// Run is where one run of a client happens.
type Run struct {
	BaseURL string
	Key     string
	Dir     string // an empty directory of its own: home, config, work
	Node    string // the node_modules directory holding the clients
}

func (r Run) bin(name string) string { return filepath.Join(r.Node, ".bin", name) }

// env is a minimal environment: no proxy, no user configuration, no
// telemetry.
func (r Run) env(extra ...string) []string {
	home := filepath.Join(r.Dir, "home")
	_ = os.MkdirAll(home, 0o755)
	return append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "LANG=C.UTF-8", "TERM=dumb", "NO_COLOR=1",
		"NODE_PATH=" + r.Node}, extra...)
}

func (r Run) work() string {
	w := filepath.Join(r.Dir, "work")
	_ = os.MkdirAll(w, 0o755)
	return w
}

// Clients are the clients the suite runs, by name.
func Clients(scripts string) []Client {
	return []Client{
		{
			Name: "claude-code", Package: "@anthropic-ai/claude-code", Dialect: "anthropic", Model: "claude-sonnet-4-5",
			Command: func(ctx context.Context, r Run) *exec.Cmd {
				cmd := exec.CommandContext(ctx, r.bin("claude"), "-p", Prompt, "--model", "claude-sonnet-4-5",
					"--output-format", "text", "--allowedTools", "Bash", "--max-turns", "4")
				cmd.Env = r.env("ANTHROPIC_BASE_URL="+r.BaseURL, "ANTHROPIC_API_KEY="+r.Key,
					"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "DISABLE_AUTOUPDATER=1", "DISABLE_TELEMETRY=1",
					"DISABLE_ERROR_REPORTING=1", "CLAUDE_CODE_DISABLE_TERMINAL_TITLE=1")
				cmd.Dir = r.work()
				return cmd
			},
		},
		{
			Name: "codex", Package: "@openai/codex", Dialect: "openai", Model: "gpt-5",
			Allowed: map[string]string{"max_output_tokens": defaultLimit},
			Command: func(ctx context.Context, r Run) *exec.Cmd {
				provider := fmt.Sprintf(`model_providers.tg={name="tg",base_url="%s/v1",env_key="TG_KEY",wire_api="responses"}`, r.BaseURL)
				cmd := exec.CommandContext(ctx, r.bin("codex"), "exec", "--skip-git-repo-check",
					"--dangerously-bypass-approvals-and-sandbox", "-m", "gpt-5", "-c", "model_provider=tg", "-c", provider, Prompt)
				codexHome := filepath.Join(r.Dir, "codex")
				_ = os.MkdirAll(codexHome, 0o755)
				cmd.Env = r.env("CODEX_HOME="+codexHome, "TG_KEY="+r.Key)
				cmd.Dir = r.work()
				return cmd
			},
		},
		{
			Name: "opencode", Package: "opencode-ai", Dialect: "openai", Model: "gpt-4o-mini", Translated: true,
			Command: func(ctx context.Context, r Run) *exec.Cmd {
				work := r.work()
				config := fmt.Sprintf(`{"$schema":"https://opencode.ai/config.json","autoupdate":false,"share":"disabled",`+
					`"provider":{"tg":{"npm":"@ai-sdk/openai-compatible","name":"Tollgate","options":{"baseURL":"%s/v1","apiKey":"%s"},`+
					`"models":{"gpt-4o-mini":{"name":"gpt-4o-mini","tool_call":true,"limit":{"context":128000,"output":16384}}}}},"model":"tg/gpt-4o-mini",`+
					`"permission":{"bash":"allow","edit":"allow"}}`, r.BaseURL, r.Key)
				_ = os.WriteFile(filepath.Join(work, "opencode.json"), []byte(config), 0o644)
				cmd := exec.CommandContext(ctx, r.bin("opencode"), "run", Prompt)
				cmd.Env = r.env("OPENCODE_DISABLE_AUTOUPDATE=1", "OPENCODE_DISABLE_LSP_DOWNLOAD=1", "OPENCODE_DISABLE_MODELS_FETCH=1")
				cmd.Dir = work
				return cmd
			},
		},
		{
			Name: "langchain-anthropic", Package: "@langchain/anthropic", Dialect: "anthropic", Model: "claude-sonnet-4-5",
			Expect: []string{"stop_reason=stop_sequence stop_sequence=END-OF-ANSWER"},
			Command: func(ctx context.Context, r Run) *exec.Cmd {
				cmd := exec.CommandContext(ctx, "node", filepath.Join(scripts, "langchain-anthropic.mjs"))
				cmd.Env = r.env("ANTHROPIC_BASE_URL="+r.BaseURL, "ANTHROPIC_API_KEY="+r.Key, "PROMPT="+Prompt)
				cmd.Dir = r.work()
				return cmd
			},
		},
		{
			Name: "instructor", Package: "@instructor-ai/instructor", Dialect: "openai", Model: "gpt-4o-mini",
			Translated: true, Allowed: map[string]string{"max_tokens": defaultLimit},
			NoLoop: true, Expect: []string{`"command":"` + jsonString(ToolCommand) + `"`},
			Command: func(ctx context.Context, r Run) *exec.Cmd {
				cmd := exec.CommandContext(ctx, "node", filepath.Join(scripts, "instructor", "instructor.mjs"))
				cmd.Env = r.env("OPENAI_BASE_URL="+r.BaseURL+"/v1", "OPENAI_API_KEY="+r.Key, "PROMPT="+Prompt)
				cmd.Dir = r.work()
				return cmd
			},
		},
		{
			Name: "openai-agents", Package: "@openai/agents", Dialect: "openai", Model: "gpt-5",
			Allowed: map[string]string{"max_output_tokens": defaultLimit},
			Command: func(ctx context.Context, r Run) *exec.Cmd {
				cmd := exec.CommandContext(ctx, "node", filepath.Join(scripts, "agents-sdk.mjs"))
				cmd.Env = r.env("OPENAI_BASE_URL="+r.BaseURL+"/v1", "OPENAI_API_KEY="+r.Key, "TOOL_COMMAND="+ToolCommand,
					"PROMPT="+Prompt, "OPENAI_AGENTS_DISABLE_TRACING=1")
				cmd.Dir = r.work()
				return cmd
			},
		},
	}
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b[1 : len(b)-1])
}

// output is the client's stdout and stderr, trimmed for a failure
// message.
func output(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 4000 {
		s = s[:2000] + "\n...\n" + s[len(s)-2000:]
	}
	return s
}
