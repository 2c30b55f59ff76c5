package csvsafe_test

import (
	"bytes"
	"encoding/csv"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/internal/csvsafe"
)

func TestCell(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"":                           "",
		"batch":                      "batch",
		"gpt-4o-mini":                "gpt-4o-mini",
		`=HYPERLINK("http://x","y")`: `'=HYPERLINK("http://x","y")`,
		"+1+cmd|' /C calc'!A0":       "'+1+cmd|' /C calc'!A0",
		"-2+3":                       "'-2+3",
		"@SUM(A1)":                   "'@SUM(A1)",
		"\t=1":                       "'\t=1",
		"\r=1":                       "'\r=1",
		"-12":                        "-12",
		"+7":                         "+7",
		"0.000150":                   "0.000150",
		"-0.5":                       "-0.5",
		"-":                          "'-",
		"-1.":                        "'-1.",
		"-1e3":                       "'-1e3",
		"a=b":                        "a=b",
	} {
		if got := csvsafe.Cell(in); got != want {
			t.Errorf("Cell(%q) = %q, want %q", in, got, want)
		}
	}
}

func FuzzCell(f *testing.F) {
	for _, s := range []string{"=1+1", "-12", "@x", "\t", "plain", "-0.5", "+"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var buf bytes.Buffer
		w := csvsafe.NewWriter(&buf)
		if err := w.Write([]string{s, "x"}); err != nil {
			t.Skip() // invalid field for encoding/csv: nothing written
		}
		w.Flush()
		recs, err := csv.NewReader(&buf).ReadAll()
		if err != nil || len(recs) != 1 || len(recs[0]) != 2 {
			t.Fatalf("Cell(%q) does not read back as one record of two: %q, %v", s, recs, err)
		}
		got := recs[0][0]
		// encoding/csv reads a quoted \r\n back as \n: its own round trip.
		norm := strings.ReplaceAll(s, "\r\n", "\n")
		if got != "" && (got[0] == '=' || got[0] == '@' || got[0] == '\t' || got[0] == '\r') {
			t.Errorf("Cell(%q) is read back as %q, a formula", s, got)
		}
		if got != "" && (got[0] == '+' || got[0] == '-') && got != norm {
			t.Errorf("a sign-led cell %q changed to %q though it is a number", s, got)
		}
		if got != norm && got != "'"+norm {
			t.Errorf("Cell(%q) read back as %q: more than a quote prefix", s, got)
		}
	})
}
