package redact

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// fake returns prefix followed by n deterministic characters from alphabet
// that look like a random key. Tests build keys this way, so no key-shaped
// literal sits in the source for a secret scanner to report.
func fake(prefix string, n int, seed uint32) string {
	const alphabet = "aB3dE5fG7hJ9kL2mN4pQ6rS8tU0vW1xYzCi"
	var b strings.Builder
	b.WriteString(prefix)
	x := seed*2654435761 + 1
	for range n {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b.WriteByte(alphabet[x%uint32(len(alphabet))])
	}
	return b.String()
}

func newRedactor(t testing.TB, custom ...Rule) *Redactor {
	t.Helper()
	r, err := New(custom...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return r
}

// textCase is one input and its redaction by a fresh Session.
type textCase struct {
	name, in, want string
}

// keep is a textCase whose input must survive unchanged.
func keep(name, in string) textCase { return textCase{name, in, in} }

func runTextCases(t *testing.T, cases []textCase) {
	t.Helper()
	r := newRedactor(t)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := r.Record().Text(tc.in)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Text(%q) mismatch (-want +got):\n%s", tc.in, diff)
			}
		})
	}
}
