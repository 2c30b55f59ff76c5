package budget_test

import (
	"testing"
	"time"

	"github.com/tollgate/tollgate/budget"
	"github.com/tollgate/tollgate/internal/testdb"
)

// Room reads the tightest of an owner's own budget and a workload's, in
// the current period (a period not yet opened at its full total), and
// says when the owner has no budget.
func TestRoomIsTheTightestBudget(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool, _ := testdb.NewPool(t)
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	store := budget.NewStore(pool, func() time.Time { return now })
	for _, l := range []budget.Limit{
		{OwnerID: "acme", Period: budget.PeriodNone, TotalMicros: 1000},
		{OwnerID: "acme", Workload: "batch", Period: budget.PeriodDaily, TotalMicros: 300},
	} {
		if _, err := store.SetLimit(ctx, l); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := store.Topup(ctx, "acme", "", 500, "test", ""); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		owner, workload string
		wantFound       bool
		wantWorkload    string
		wantAvailable   int64
	}{
		{"acme", "", true, "", 1500},
		{"acme", "batch", true, "batch", 300},
		{"acme", "other", true, "", 1500},
		{"nobody", "", false, "", 0},
	}
	for _, c := range cases {
		b, found, err := store.Room(ctx, c.owner, c.workload)
		if err != nil {
			t.Fatal(err)
		}
		if found != c.wantFound || b.Workload != c.wantWorkload || b.Available() != c.wantAvailable {
			t.Errorf("Room(%q, %q) = %+v (available %d), found %v; want workload %q, available %d, found %v",
				c.owner, c.workload, b, b.Available(), found, c.wantWorkload, c.wantAvailable, c.wantFound)
		}
	}
}
