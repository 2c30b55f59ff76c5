package stats

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestTableAlignsNamesLeftAndFiguresRight(t *testing.T) {
	t.Parallel()
	tb := NewTable("scenario", "n", "p50")
	tb.Rule = true
	tb.Rowf("%s\t%d\t%.2f", "lookup", 1000, 1.5)
	tb.Row("a longer name", "7", "12.25")
	var b strings.Builder
	if err := tb.Write(&b, "  "); err != nil {
		t.Fatal(err)
	}
	want := "" +
		"  scenario          n    p50\n" +
		"  --------------------------\n" +
		"  lookup         1000   1.50\n" +
		"  a longer name     7  12.25\n"
	if diff := cmp.Diff(want, b.String()); diff != "" {
		t.Errorf("table mismatch (-want +got):\n%s", diff)
	}
}

func TestTableAlignsLeadingNameColumnsLeft(t *testing.T) {
	t.Parallel()
	tb := NewTable("load", "target", "p50")
	tb.Names = 2
	tb.Row("sequential", "fake", "0.25")
	tb.Row("open loop", "Tollgate", "3.10")
	var b strings.Builder
	if err := tb.Write(&b, ""); err != nil {
		t.Fatal(err)
	}
	want := "" +
		"load        target     p50\n" +
		"sequential  fake      0.25\n" +
		"open loop   Tollgate  3.10\n"
	if diff := cmp.Diff(want, b.String()); diff != "" {
		t.Errorf("table mismatch (-want +got):\n%s", diff)
	}
}
