package redact

import "testing"

func TestURLWithoutSecrets(t *testing.T) {
	t.Parallel()
	cases := []struct {
		in, want string
		ok       bool
	}{
		{"https://cdn.example.com/a/b.png", "https://cdn.example.com/a/b.png", true},
		{"https://bucket.s3.amazonaws.com/x.png?X-Amz-Signature=deadbeef&X-Amz-Credential=AKIA", "https://bucket.s3.amazonaws.com/x.png?[QUERY]", true},
		{"https://user:pass@example.com/p.jpg#frag", "https://example.com/p.jpg?[QUERY]", true},
		{"https://example.com/p.jpg?", "https://example.com/p.jpg?[QUERY]", true},
		{"not a url", "", false},
		{"mailto:someone@example.com", "", false},
	}
	for _, c := range cases {
		got, ok := URLWithoutSecrets(c.in)
		if got != c.want || ok != c.ok {
			t.Errorf("URLWithoutSecrets(%q) = %q, %v; want %q, %v", c.in, got, ok, c.want, c.ok)
		}
	}
}
