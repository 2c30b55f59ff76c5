package budget_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tollgate/tollgate/budget"
	"github.com/tollgate/tollgate/internal/testdb"
)

// TestUsageGroupsByUTCPeriodsWhateverTheSessionZone settles rows either
// side of UTC day and month boundaries, reads them through a session whose
// time zone is not UTC, and checks that groups fall in UTC periods and
// that the totals of a grouped report (the groups' sums) equal those of an
// ungrouped one.
func TestUsageGroupsByUTCPeriodsWhateverTheSessionZone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	u := testdb.New(t)
	cfg, err := pgxpool.ParseConfig(u)
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.RuntimeParams["timezone"] = "America/New_York" // midnight UTC is 19:00 or 20:00 the day before
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)

	at := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	rows := []struct {
		owner, model, source string
		cost                 int64
		settled              time.Time
	}{
		{"acme", "m1", "reported", 10, at("2026-10-31T23:59:59.999999Z")},
		{"acme", "m1", "reported", 20, at("2026-11-01T00:00:00Z")},
		{"acme", "m2", "estimated", 40, at("2026-11-01T03:00:00Z")},
		{"globex", "m1", "possibly_charged", 80, at("2026-11-30T23:59:59Z")},
		{"globex", "m1", "reported", 160, at("2026-12-01T00:00:00.5Z")},
	}
	for _, r := range rows {
		_, err := pool.Exec(ctx, `
			WITH o AS (INSERT INTO owners (id) VALUES ($1) ON CONFLICT DO NOTHING)
			INSERT INTO usage_records (task_id, owner_id, model, input_tokens, output_tokens, source,
			                           cost_micros, charged_micros, shortfall_micros, settled_at)
			VALUES ($2, $1, $3, 1, 2, $4, $5, $5, 0, $6)`, r.owner, uuid.NewString(), r.model, r.source, r.cost, r.settled)
		if err != nil {
			t.Fatal(err)
		}
	}
	store := budget.NewStore(pool, nil)
	window := budget.UsageFilter{From: at("2026-10-01T00:00:00Z"), To: at("2027-01-01T00:00:00Z")}
	plain, err := store.Usage(ctx, window)
	if err != nil {
		t.Fatal(err)
	}
	wantTotals := budget.UsageTotals{Tasks: 5, InputTokens: 5, OutputTokens: 10, CostMicros: 310, ChargedMicros: 310,
		ReportedMicros: 190, EstimatedMicros: 40, PossiblyChargedMicros: 80}
	if diff := cmp.Diff(wantTotals, plain.Totals); diff != "" {
		t.Errorf("ungrouped totals mismatch (-want +got):\n%s", diff)
	}

	str := func(s string) *string { return &s }
	tm := func(s string) *time.Time { v := at(s); return &v }
	type group struct {
		Owner, Model *string
		Period       *time.Time
		Cost         int64
	}
	cases := []struct {
		by   []string
		want []group
	}{
		{[]string{budget.GroupDay}, []group{
			{Period: tm("2026-10-31T00:00:00Z"), Cost: 10},
			{Period: tm("2026-11-01T00:00:00Z"), Cost: 60},
			{Period: tm("2026-11-30T00:00:00Z"), Cost: 80},
			{Period: tm("2026-12-01T00:00:00Z"), Cost: 160},
		}},
		{[]string{budget.GroupMonth, budget.GroupOwner}, []group{
			{Owner: str("acme"), Period: tm("2026-10-01T00:00:00Z"), Cost: 10},
			{Owner: str("acme"), Period: tm("2026-11-01T00:00:00Z"), Cost: 60},
			{Owner: str("globex"), Period: tm("2026-11-01T00:00:00Z"), Cost: 80},
			{Owner: str("globex"), Period: tm("2026-12-01T00:00:00Z"), Cost: 160},
		}},
		{[]string{budget.GroupModel}, []group{
			{Model: str("m1"), Cost: 270},
			{Model: str("m2"), Cost: 40},
		}},
	}
	for _, c := range cases {
		f := window
		f.GroupBy = c.by
		rep, err := store.Usage(ctx, f)
		if err != nil {
			t.Fatalf("Usage %v: %v", c.by, err)
		}
		var got []group
		for _, g := range rep.Groups {
			v := group{Owner: g.OwnerID, Model: g.Model, Period: g.PeriodStart, Cost: g.CostMicros}
			if v.Period != nil {
				p := v.Period.UTC()
				v.Period = &p
			}
			got = append(got, v)
		}
		if diff := cmp.Diff(c.want, got); diff != "" {
			t.Errorf("groups by %v mismatch (-want +got):\n%s", c.by, diff)
		}
		if diff := cmp.Diff(plain.Totals, rep.Totals); diff != "" {
			t.Errorf("totals grouped by %v differ from the ungrouped ones (-want +got):\n%s", c.by, diff)
		}
		if diff := cmp.Diff(plain.Rows, rep.Rows); diff != "" {
			t.Errorf("rows grouped by %v differ from the ungrouped ones (-want +got):\n%s", c.by, diff)
		}
	}
}
