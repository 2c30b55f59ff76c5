package redact_test

import (
	"strings"
	"testing"

	"github.com/tollgate/tollgate/redact"
)

func TestPlainIdentifier(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"gpt-4o-2024-08-06", "claude-sonnet-4-5-20250929", "@cf/meta/llama-3.1-8b-instruct",
		"accounts/fireworks/models/x", "claude-3-5-sonnet@20240620", "ft:gpt-4o-mini:org:custom:abc123", "fp_44709d6fcb",
		"stop", "end_turn", "tool_calls", "content_filter", "meta-llama/Llama-3.3-70B-Instruct+fp8"} {
		if !redact.PlainIdentifier(s) {
			t.Errorf("PlainIdentifier(%q) = false, want true", s)
		}
	}
	for _, s := range []string{"", "stop because", "jane@example.com", "models/x@example.com", "a@b", "stop\n", "fin\u00e9",
		"<script>", `"quoted"`, "a,b", strings.Repeat("a", 65), "x\x00y"} {
		if redact.PlainIdentifier(s) {
			t.Errorf("PlainIdentifier(%q) = true, want false", s)
		}
	}
}
