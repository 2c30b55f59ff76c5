package redact

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
)

// canaries returns one planted value of every kind the package promises to
// remove, each with a distinctive core that must not survive either.
func canaries() map[string]string {
	jwt := "eyJhbGciOiJIUzI1NiJ9." + fake("eyJzdWIiOiJDQU5BUlki", 40, 60) + "." + fake("", 43, 61)
	return map[string]string{
		"email":            "canary.person+tag@canary-mail.example",
		"phone intl":       "+44 20 7946 0123",
		"phone us":         "(212) 555-0199",
		"phone national":   "0151 98765432",
		"card":             "5105 1051 0510 5100",
		"card compact":     "378282246310005",
		"iban":             "GB82 WEST 1234 5698 7654 32",
		"iban compact":     "NL91ABNA0417164300",
		"openai":           fake("sk-", 48, 62),
		"openai project":   fake("sk-proj-", 120, 63),
		"anthropic":        fake("sk-ant-api03-", 90, 64) + "AA",
		"github":           fake("ghp_", 36, 65),
		"github oauth":     fake("gho_", 36, 66),
		"github server":    fake("ghs_", 36, 67),
		"github pat":       fake("github_pat_", 22, 68) + "_" + fake("", 59, 69),
		"aws key id":       "AKIA" + strings.ToUpper(fake("", 16, 70)),
		"aws session id":   "ASIA" + strings.ToUpper(fake("", 16, 71)),
		"aws secret":       "aws_secret_access_key=" + fake("", 40, 72),
		"slack":            "xoxb-" + "1111222233-4444555566667-" + fake("", 24, 73),
		"slack app":        "xoxa-" + "2-" + fake("", 30, 74),
		"tollgate":         fake("tg_", 43, 75),
		"jwt":              jwt,
		"bearer":           "Authorization: Bearer " + fake("", 36, 76),
		"private key":      "-----BEGIN OPENSSH PRIVATE KEY-----\n" + fake("b3BlbnNzaC1rZXk", 70, 77) + "\n-----END OPENSSH PRIVATE KEY-----",
		"custom":           "EMP-424242",
		"key in a url":     "https://api.example/v1?key=" + fake("sk-", 40, 78) + "&x=1",
		"key after _":      "MY_TOKEN_" + fake("tg_", 43, 79),
		"card after a key": fake("sk-", 30, 80) + " 4111-1111-1111-1111",
	}
}

// secretCore returns the parts of a planted value that must not survive: the
// whole value, minus a label that is not secret.
func secretCore(v string) string {
	for _, label := range []string{"Authorization: Bearer ", "aws_secret_access_key=", "https://api.example/v1?key=", "MY_TOKEN_"} {
		v = strings.TrimPrefix(v, label)
	}
	return strings.TrimSuffix(v, "&x=1")
}

func TestCanaries(t *testing.T) {
	t.Parallel()
	r := newRedactor(t, Rule{Name: "employee_id", Pattern: regexp.MustCompile(`EMP-\d{6}`)})
	filler := benchmarkMessage(false)
	var b strings.Builder
	var names []string
	for name, v := range canaries() {
		names = append(names, name)
		// Plant each canary in the middle of ordinary text, once in a
		// sentence and once in JSON, as prompts and responses carry them.
		fmt.Fprintf(&b, "%s\nThe %s is %s, please keep it.\n{\"value\": %q}\n", filler[:len(filler)/3], name, v, v)
	}
	in := b.String()
	s := r.Record()
	// Split the text over a request and a response, as one record holds it.
	half := len(in) / 2
	for half < len(in) && in[half] != '\n' {
		half++
	}
	out := s.Text(in[:half]) + s.Text(in[half:])
	canary := canaries()
	for _, name := range names {
		core := secretCore(canary[name])
		for _, piece := range []string{core, core[len(core)/2:], core[:len(core)/2+1]} {
			if len(piece) >= 8 && strings.Contains(out, piece) {
				t.Errorf("canary %q survived: %q", name, piece)
			}
		}
	}
	if t.Failed() {
		t.Logf("counts: %v", s.Counts())
	}
}
