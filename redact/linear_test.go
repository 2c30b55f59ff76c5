package redact

import (
	"fmt"
	"strings"
	"testing"
)

// scaleInput returns size bytes of one kind of text, built by repeating a
// unit with distinct numbers in it: prose, numbers, values every rule
// replaces, and near-misses that make a rule look hard at every unit.
func scaleInput(kind string, size int) string {
	var b strings.Builder
	prose := benchmarkMessage(false)
	for i := 0; b.Len() < size; i++ {
		switch kind {
		case "prose":
			b.WriteString(prose)
		case "numbers":
			fmt.Fprintf(&b, "%d, %d.%02d; ", 1000000+i*7919, i, i%100)
		case "cards":
			fmt.Fprintf(&b, "4%015d ", i*104729) // one in ten passes Luhn
		case "phones":
			fmt.Fprintf(&b, "+44 20 %04d %04d, ", i%10000, (i*31)%10000)
		case "mixed":
			fmt.Fprintf(&b, "order %d on 2026-11-%02d, ref 4%015d, call +44 20 %04d %04d or (415) 555-%04d. ", i, i%28+1, i*104729, i%10000, (i*31)%10000, i%10000)
		case "known-glued":
			// A card, then the same number where the card rule is blind.
			if i == 0 {
				b.WriteString("4111111111111111 ")
			}
			b.WriteString("4111111111111111x ")
		case "bearer-run":
			b.WriteString("bearer")
		case "near-misses":
			fmt.Fprintf(&b, "-sk-%d eyJaaaa%d. Bearer x%d. [SECRET_%d (415) %d 4111 %d@x DE%02d ", i, i, i, i, i, i, i%100)
		}
	}
	return b.String()[:size]
}

var scaleKinds = []string{"prose", "numbers", "cards", "phones", "mixed", "known-glued", "bearer-run", "near-misses"}

// TestLinearWork counts the bytes the rules and searches read (not time) on
// 16 KiB and 64 KiB of each kind of text: 4 times the input may cost at
// most 5 times the work.
func TestLinearWork(t *testing.T) {
	t.Parallel()
	r := newRedactor(t)
	for _, kind := range scaleKinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			work := func(size int) int {
				s := r.Record()
				s.Text(scaleInput(kind, size))
				return s.steps
			}
			small, large := work(16<<10), work(64<<10)
			if ratio := float64(large) / float64(small); ratio > 5 {
				t.Errorf("work grows %.1f times for 4 times the input (%d steps at 16 KiB, %d at 64 KiB)", ratio, small, large)
			}
			if per := float64(large) / (64 << 10); per > 400 {
				t.Errorf("%.0f steps per byte at 64 KiB, want at most 400", per)
			}
		})
	}
}
