package limits_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/testdb"
	"github.com/tollgate/tollgate/limits"
)

// Put replaces all of an owner's limits; Get and List read them back;
// Purge keeps the windows still in their retention.
func TestStore(t *testing.T) {
	t.Parallel()
	pool, _ := testdb.NewPool(t)
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `INSERT INTO owners (id) VALUES ('acme'), ('beta')`); err != nil {
		t.Fatal(err)
	}
	s := limits.NewStore(pool)
	if err := s.Put(ctx, limits.Limits{OwnerID: "nobody"}); !errors.Is(err, limits.ErrOwnerNotFound) {
		t.Errorf("Put for an unknown owner: %v, want ErrOwnerNotFound", err)
	}
	if _, err := s.Get(ctx, "nobody"); !errors.Is(err, limits.ErrOwnerNotFound) {
		t.Errorf("Get for an unknown owner: %v, want ErrOwnerNotFound", err)
	}
	first := limits.Limits{OwnerID: "acme", Limit: limits.Limit{RequestsPerMinute: ptr(10)},
		Workloads: map[string]limits.Limit{"a": {TokensPerMinute: ptr(5)}, "b": {RequestsPerMinute: ptr(1)}}}
	if err := s.Put(ctx, first); err != nil {
		t.Fatal(err)
	}
	second := limits.Limits{OwnerID: "acme", Limit: limits.Limit{TokensPerMinute: ptr(7)}, Workloads: map[string]limits.Limit{"b": {}}}
	if err := s.Put(ctx, second); err != nil {
		t.Fatal(err)
	}
	got, err := s.Get(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	if got.RequestsPerMinute != nil || *got.TokensPerMinute != 7 || len(got.Workloads) != 1 || got.Workloads["b"].RequestsPerMinute != nil {
		t.Errorf("after the second Put: %+v, want it alone", got)
	}
	if err := s.Put(ctx, limits.Limits{OwnerID: "beta", Limit: limits.Limit{RequestsPerMinute: ptr(-1)}}); !errors.Is(err, limits.ErrInvalid) {
		t.Errorf("Put negative: %v, want ErrInvalid", err)
	}
	list, err := s.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].OwnerID != "acme" {
		t.Errorf("List: %+v, want acme only", list)
	}

	now := time.Date(2026, 12, 6, 1, 0, 0, 0, time.UTC)
	for _, at := range []time.Time{now.Add(-2 * time.Hour), now.Add(-time.Minute)} {
		if _, err := pool.Exec(ctx, `INSERT INTO rate_windows (owner_id, workload, window_start, requests) VALUES ('acme', '', $1, 1)`, at); err != nil {
			t.Fatal(err)
		}
	}
	n, err := limits.Purge(ctx, pool, now.Add(-limits.Retention))
	if err != nil || n != 1 {
		t.Errorf("Purge: %d, %v; want the one old window", n, err)
	}
}
