package redact

import (
	"os"
	"strings"
	"testing"
)

// TestREADMEPrintsTheFieldsTable holds docs/operations.md's privacy table and
// Fields together: every field has a row naming its treatment.
func TestREADMEPrintsTheFieldsTable(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	section := string(b)
	start := strings.Index(section, "## Privacy: redaction and sealing")
	if start < 0 {
		t.Fatal(`docs/operations.md has no "## Privacy: redaction and sealing"`)
	}
	section = section[start:]
	if end := strings.Index(section[3:], "\n## "); end >= 0 {
		section = section[:end+3]
	}
	for f, tr := range Fields {
		if !strings.Contains(section, "| "+string(f)+" | "+string(tr)) {
			t.Errorf("docs/operations.md's privacy table lacks the row %q | %q", f, tr)
		}
	}
}

func TestStoredApply(t *testing.T) {
	t.Parallel()
	s := NewStored(newRedactor(t), []byte("k"))
	addr := "refund to jane@example.com"
	for _, c := range []struct {
		f        Field
		in, want string
	}{
		{FieldTopupNote, addr, "refund to [EMAIL_1]"},
		{FieldReason, addr, "refund to [EMAIL_1]"},
		{FieldIdempotencyKey, "key-1", "h:" + Digest([]byte("k"), "key-1")},
		{FieldRouteUser, "", ""},
		{FieldModel, "gpt-x", "gpt-x"},
	} {
		if got := s.Apply(c.f, c.in); got != c.want {
			t.Errorf("Apply(%s, %q) = %q, want %q", c.f, c.in, got, c.want)
		}
	}
	if !s.Changes("model-"+fake("sk-proj-", 40, 1)) || s.Changes("gpt-4o-mini") {
		t.Error("Changes: want true for a key, false for a model name")
	}
}
