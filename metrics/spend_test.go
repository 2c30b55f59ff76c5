package metrics

import (
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestSpendOwnersAreBounded: the first MaxSpendOwners owners keep series
// of their own, later ones count under "other", and an owner seen early
// keeps its series after the bound is reached.
func TestSpendOwnersAreBounded(t *testing.T) {
	m := New()
	for i := range MaxSpendOwners + 5 {
		m.Spent("owner-"+strconv.Itoa(i), "gpt-x", 10)
	}
	m.Spent("owner-0", "gpt-x", 1)
	m.Spent("owner-1", "gpt-x", 0) // nothing spent: no change
	got := map[string]float64{
		"owner-0": testutil.ToFloat64(m.spent.WithLabelValues("owner-0", "gpt-x")),
		"owner-1": testutil.ToFloat64(m.spent.WithLabelValues("owner-1", "gpt-x")),
		"last":    testutil.ToFloat64(m.spent.WithLabelValues("owner-"+strconv.Itoa(MaxSpendOwners-1), "gpt-x")),
		"other":   testutil.ToFloat64(m.spent.WithLabelValues("other", "gpt-x")),
	}
	want := map[string]float64{"owner-0": 11, "owner-1": 10, "last": 10, "other": 50}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("spend by owner mismatch (-want +got):\n%s", diff)
	}
	if n := testutil.CollectAndCount(m.spent); n != MaxSpendOwners+1 {
		t.Errorf("spend series = %d, want %d", n, MaxSpendOwners+1)
	}
}
