package redact

import (
	"errors"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestSessionConsistency(t *testing.T) {
	t.Parallel()
	key := fake("sk-proj-", 60, 30)
	tests := []struct {
		name   string
		texts  []string // one record: request messages, then the response
		want   []string
		counts map[string]int
	}{
		{
			name:   "same e-mail twice",
			texts:  []string{"from ann@example.com to ann@example.com"},
			want:   []string{"from [EMAIL_1] to [EMAIL_1]"},
			counts: map[string]int{KindEmail: 1},
		},
		{
			name:   "two e-mails",
			texts:  []string{"from ann@example.com to bob@example.com"},
			want:   []string{"from [EMAIL_1] to [EMAIL_2]"},
			counts: map[string]int{KindEmail: 2},
		},
		{
			name: "request and response share numbering",
			texts: []string{
				"Summarise the mail from ann@example.com (+44 20 7946 0958).",
				"Ann (ann@example.com) asks bob@example.com to call +44 20 7946 0958.",
			},
			want: []string{
				"Summarise the mail from [EMAIL_1] ([PHONE_1]).",
				"Ann ([EMAIL_1]) asks [EMAIL_2] to call [PHONE_1].",
			},
			counts: map[string]int{KindEmail: 2, KindPhone: 1},
		},
		{
			name: "every type",
			texts: []string{
				"key " + key + ", card 4111 1111 1111 1111, iban DE89370400440532013000",
				"mail ann@example.com, phone 415-555-2671, card 5500-0000-0000-0004, key " + key,
			},
			want: []string{
				"key [SECRET_1], card [CARD_1], iban [IBAN_1]",
				"mail [EMAIL_1], phone [PHONE_1], card [CARD_2], key [SECRET_1]",
			},
			counts: map[string]int{KindSecret: 1, KindCard: 2, KindIBAN: 1, KindEmail: 1, KindPhone: 1},
		},
		{
			name: "a value found once is replaced where its rule is blind",
			texts: []string{
				"card 4111111111111111, key=" + key,
				"ref4111111111111111 and token" + key,
			},
			want: []string{
				"card [CARD_1], key=[SECRET_1]",
				"ref[CARD_1] and token[SECRET_1]",
			},
			counts: map[string]int{KindCard: 1, KindSecret: 1},
		},
		{
			name:   "nothing to redact",
			texts:  []string{"hello", ""},
			want:   []string{"hello", ""},
			counts: map[string]int{},
		},
	}
	r := newRedactor(t)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := r.Record()
			var got []string
			for _, in := range tc.texts {
				got = append(got, s.Text(in))
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("texts mismatch (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.counts, s.Counts()); diff != "" {
				t.Errorf("Counts mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSessionsAreIndependent(t *testing.T) {
	t.Parallel()
	r := newRedactor(t)
	a, b := r.Record(), r.Record()
	a.Text("ann@example.com")
	if got, want := b.Text("bob@example.com"), "[EMAIL_1]"; got != want {
		t.Errorf("second session: got %q, want %q", got, want)
	}
	counts := a.Counts()
	counts[KindEmail] = 99
	if diff := cmp.Diff(map[string]int{KindEmail: 1}, a.Counts()); diff != "" {
		t.Errorf("Counts is not a copy (-want +got):\n%s", diff)
	}
}

func TestIdempotent(t *testing.T) {
	t.Parallel()
	r := newRedactor(t, Rule{Name: "ticket", Pattern: regexp.MustCompile(`[A-Z]+_[0-9]+`)})
	for _, in := range []string{
		"mail ann@example.com about FOO_12",
		"already [EMAIL_1] and [SECRET_3] and [TICKET_2]",
		"ab@cd.ef4111111111111111",
	} {
		once := r.Record().Text(in)
		if twice := r.Record().Text(once); twice != once {
			t.Errorf("Text(Text(%q)):\n got %q\nwant %q", in, twice, once)
		}
	}
}

func TestPolicyFull(t *testing.T) {
	t.Parallel()
	r := newRedactor(t, Rule{Name: "employee_id", Pattern: regexp.MustCompile(`EMP-\d{6}`)})
	in := "ann@example.com +44 20 7946 0958 " + fake("ghp_", 36, 40) + " 4111 1111 1111 1111 GB82WEST12345698765432 EMP-123456"
	want := "ann@example.com +44 20 7946 0958 [SECRET_1] [CARD_1] [IBAN_1] [EMPLOYEE_ID_1]"
	for _, p := range []Policy{PolicyFull} {
		if got := r.RecordPolicy(p).Text(in); got != want {
			t.Errorf("%s:\n got %q\nwant %q", p, got, want)
		}
	}
	for _, p := range []Policy{PolicyRedact, PolicyHashOnly, Policy("bogus")} {
		if got := r.RecordPolicy(p).Text(in); strings.Contains(got, "@") || strings.Contains(got, "+44") {
			t.Errorf("%s kept contact data: %q", p, got)
		}
	}
}

func TestCustomRule(t *testing.T) {
	t.Parallel()
	r := newRedactor(t,
		Rule{Name: "employee_id", Pattern: regexp.MustCompile(`EMP-\d{6}`)},
		Rule{Name: "Ticket", Pattern: regexp.MustCompile(`\bT-\d+\b`), Validate: func(m string) bool { return m != "T-0" }},
		Rule{Name: "secret", Pattern: regexp.MustCompile(`\bint_[a-f0-9]{16}\b`)},
	)
	s := r.Record()
	got := s.Text("EMP-123456 filed T-42 and T-0 for EMP-654321, EMP-123456 again; key int_0123456789abcdef and " + fake("sk-", 30, 41))
	want := "[EMPLOYEE_ID_1] filed [TICKET_1] and T-0 for [EMPLOYEE_ID_2], [EMPLOYEE_ID_1] again; key [SECRET_1] and [SECRET_2]"
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Text mismatch (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]int{"EMPLOYEE_ID": 2, "TICKET": 1, KindSecret: 2}, s.Counts()); diff != "" {
		t.Errorf("Counts mismatch (-want +got):\n%s", diff)
	}
}

func TestNewRejectsBadRules(t *testing.T) {
	t.Parallel()
	re := regexp.MustCompile(`X-\d+`)
	for _, tc := range []struct {
		name string
		rule Rule
	}{
		{"empty name", Rule{Name: "", Pattern: re}},
		{"leading digit", Rule{Name: "1abc", Pattern: re}},
		{"leading underscore", Rule{Name: "_abc", Pattern: re}},
		{"hyphen", Rule{Name: "employee-id", Pattern: re}},
		{"space", Rule{Name: "employee id", Pattern: re}},
		{"bracket", Rule{Name: "a]", Pattern: re}},
		{"non-ascii", Rule{Name: "émployé", Pattern: re}},
		{"dotless i", Rule{Name: "ıd", Pattern: re}},
		{"too long", Rule{Name: strings.Repeat("a", 33), Pattern: re}},
		{"no pattern", Rule{Name: "x"}},
		{"matches empty", Rule{Name: "x", Pattern: regexp.MustCompile(`\d*`)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r, err := New(Rule{Name: "fine", Pattern: re}, tc.rule)
			if !errors.Is(err, ErrInvalidRule) || r != nil {
				t.Errorf("New(%+v) = %v, %v; want nil, ErrInvalidRule", tc.rule, r, err)
			}
		})
	}
}

func TestParsePolicy(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]Policy{
		"":          PolicyRedact,
		"redact":    PolicyRedact,
		"hash-only": PolicyHashOnly,
		" Full ":    PolicyFull,
	} {
		got, err := ParsePolicy(in)
		if err != nil || got != want {
			t.Errorf("ParsePolicy(%q) = %q, %v; want %q, nil", in, got, err, want)
		}
	}
	for _, in := range []string{"none", "hash_only", "off"} {
		if got, err := ParsePolicy(in); !errors.Is(err, ErrInvalidPolicy) {
			t.Errorf("ParsePolicy(%q) = %q, %v; want ErrInvalidPolicy", in, got, err)
		}
	}
}

func TestDigest(t *testing.T) {
	t.Parallel()
	// RFC 4231 test case 2, truncated to 16 bytes.
	if got, want := Digest([]byte("Jefe"), "what do ya want for nothing?"), "5bdcc146bf60754e6a042426089575c7"; got != want {
		t.Errorf("Digest = %q, want %q", got, want)
	}
	if Digest([]byte("k1"), "v") == Digest([]byte("k2"), "v") {
		t.Error("Digest ignores the key")
	}
}

// TestConcurrentSessions shares one Redactor between goroutines, for the race
// detector.
func TestConcurrentSessions(t *testing.T) {
	t.Parallel()
	r := newRedactor(t, Rule{Name: "employee_id", Pattern: regexp.MustCompile(`EMP-\d{6}`)})
	in := benchmarkMessage(true)
	want := r.Record().Text(in)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 10 {
				if got := r.Record().Text(in); got != want {
					t.Errorf("concurrent Text differs")
					return
				}
			}
		})
	}
	wg.Wait()
}
