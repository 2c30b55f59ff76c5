package redact

import (
	"regexp"
	"slices"
	"strings"
	"testing"
)

// FuzzRedact checks, for any input, that redaction does not panic, that a
// second pass changes nothing, that no built-in rule finds anything in the
// output, and that no value the first pass replaced is left in it.
func FuzzRedact(f *testing.F) {
	for _, seed := range []string{
		"",
		"mail ann@example.com or call +44 20 7946 0958",
		"card 4111 1111 1111 1111 123, iban DE89 3704 0044 0532 0130 00",
		"Authorization: Bearer " + fake("", 32, 90) + "\n" + fake("sk-proj-", 60, 91),
		"eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJl",
		"-----BEGIN PRIVATE KEY-----\nMIIE\n",
		"ab@cd.ef4111111111111111 [EMAIL_1] [CARD_4111111111111111]",
		"2026-11-30T12:00:00Z 01.12.2026 10:30 v1.2.3 550e8400-e29b-41d4-a716-446655440000",
		"EMP-123456 " + fake("tg_", 43, 92) + " MY_" + fake("ghp_", 36, 93),
	} {
		f.Add(seed)
	}
	r, err := New(Rule{Name: "employee_id", Pattern: regexp.MustCompile(`EMP-\d{6}`)})
	if err != nil {
		f.Fatal(err)
	}
	rules := builtinRules()
	// Secrets planted between spaces must go whatever surrounds them.
	var planted []string
	for name, v := range canaries() {
		if strings.Contains(name, "key") || strings.Contains(name, "git") || strings.Contains(name, "open") ||
			strings.Contains(name, "anthropic") || strings.Contains(name, "aws") || strings.Contains(name, "slack") ||
			name == "tollgate" || name == "jwt" || name == "bearer" {
			planted = append(planted, v)
		}
	}
	slices.Sort(planted)
	f.Fuzz(func(t *testing.T, in string) {
		checkRedaction(t, r, rules, in)
		v := planted[len(in)%len(planted)]
		out := checkRedaction(t, r, rules, in+" "+v+" "+in)
		if core := secretCore(v); strings.Contains(out, core) {
			t.Fatalf("planted secret %q survives\n in: %q\nout: %q", core, in, out)
		}
	})
}

// checkRedaction redacts in and checks the output: a second pass changes
// nothing, no built-in rule matches in it, no replaced value is left in it.
func checkRedaction(t *testing.T, r *Redactor, rules []rule, in string) string {
	t.Helper()
	s := r.Record()
	out := s.Text(in)
	if again := r.Record().Text(out); again != out {
		t.Fatalf("second pass changed the output\n  in: %q\n out: %q\nout2: %q", in, out, again)
	}
	for _, rule := range rules {
		if found := rule.find(out, new(int)); len(found) > 0 {
			sp := found[0]
			t.Fatalf("rule %s matches %q in the output\n in: %q\nout: %q", rule.name, out[sp.start:sp.end], in, out)
		}
	}
	for v := range s.known {
		if strings.Contains(out, v) {
			t.Fatalf("replaced value %q survives\n in: %q\nout: %q", v, in, out)
		}
	}
	return out
}
