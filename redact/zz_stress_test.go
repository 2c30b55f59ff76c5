package redact

import (
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
)

func TestZZStress(t *testing.T) {
	r, _ := New(Rule{Name: "employee_id", Pattern: regexp.MustCompile(`EMP-\d{6}`)})
	rules := builtinRules()
	pieces := []string{
		"sk-", "sk-proj-", "ghp_", "github_pat_", "AKIA", "ASIA", "xoxb-", "tg_", "eyJ", "Bearer ", "bearer\t", "-----BEGIN PRIVATE KEY-----", "-----END PRIVATE KEY-----",
		"aws_secret_access_key=", "SecretAccessKey\": \"", "@", "a@b.co", ".", "-", "_", " ", "\n", "+", "(", ")", "/", ",", "0", "1", "4", "41", "4111", "1111", "5", "9",
		"DE89", "3704", "0044", "0532", "0130", "00", "GB82", "WEST", "EUR", "[EMAIL_1]", "[SECRET_", "]", "[", "x", "Y", "Ab3", "Z9", "aaaaaaaaaa", "AAAAAAAA", "0123456789",
		"EMP-", "123456", "+44 20 7946 0958", "415-555-2671", "(415) ", "020 ", "4111 1111 1111 1111", "DE89 3704 0044 0532 0130 00", "é", "\xff", ".com", "example",
		fake("", 20, 1), fake("", 40, 2), fake("", 43, 3), fake("", 16, 4),
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for iter := range 300000 {
		var b strings.Builder
		n := 1 + rng.IntN(30)
		for range n {
			b.WriteString(pieces[rng.IntN(len(pieces))])
		}
		in := b.String()
		s := r.Record()
		out := s.Text(in)
		if again := r.Record().Text(out); again != out {
			t.Fatalf("iter %d: second pass changed\n in: %q\nout: %q\nout2: %q", iter, in, out, again)
		}
		for _, rule := range rules {
			if found := rule.find(out); len(found) > 0 {
				t.Fatalf("iter %d: rule %s matches %q\n in: %q\nout: %q", iter, rule.name, out[found[0].start:found[0].end], in, out)
			}
		}
		for v := range s.known {
			if strings.Contains(out, v) {
				t.Fatalf("iter %d: known %q survives\n in: %q\nout: %q", iter, v, in, out)
			}
		}
	}
}
