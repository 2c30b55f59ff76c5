// Package agents is the coding-agent suite (make test-agents): it runs
// Claude Code, the Codex CLI, the OpenAI Agents SDK and other clients,
// pinned in node/package.json, headless through a real `tollgate serve`
// in front of a scripted upstream that speaks OpenAI and Anthropic
// (Upstream), each also directly against the upstream as a control, and
// checks that Tollgate changes nothing the client sees or sends.
package agents
