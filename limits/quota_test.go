package limits_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tollgate/tollgate/internal/testdb"
	"github.com/tollgate/tollgate/limits"
)

// Take counts a call on all of its windows or on none: a call refused by
// one window leaves the others as they were.
func TestTake(t *testing.T) {
	t.Parallel()
	pool, _ := testdb.NewPool(t)
	ctx := context.Background()
	s := limits.NewStore(pool)
	day := time.Date(2026, 12, 6, 0, 0, 0, 0, time.UTC)
	window := func(minute int) limits.Quota {
		return limits.Quota{Scope: limits.RouteScope("summarize", "window", "h:u1"), Start: day.Add(time.Duration(minute) * time.Minute), Span: time.Minute, Limit: 2}
	}
	daily := limits.Quota{Scope: limits.RouteScope("summarize", "day", "h:u1"), Start: day, Span: 24 * time.Hour, Limit: 3}
	tests := []struct {
		minute     int
		want       bool
		wantCounts [2]int64 // the minute's window, the day
	}{
		{0, true, [2]int64{1, 1}},
		{0, true, [2]int64{2, 2}},
		{0, false, [2]int64{2, 2}}, // the window is full: the day is not counted
		{1, true, [2]int64{1, 3}},
		{1, false, [2]int64{1, 3}}, // the day is full: the window is not counted
	}
	for i, tt := range tests {
		got, err := s.Take(ctx, "acme", []limits.Quota{window(tt.minute), daily})
		if err != nil {
			t.Fatal(err)
		}
		if got != tt.want {
			t.Errorf("take %d at minute %d = %v, want %v", i, tt.minute, got, tt.want)
		}
		counts := [2]int64{requests(t, pool, window(tt.minute)), requests(t, pool, daily)}
		if counts != tt.wantCounts {
			t.Errorf("after take %d: window and day count %v, want %v", i, counts, tt.wantCounts)
		}
	}
	for _, q := range []limits.Quota{
		{Scope: "batch", Start: day, Span: time.Minute, Limit: 1},                 // a workload's name
		{Scope: limits.RouteScope("r", "day", ""), Start: day, Span: time.Minute}, // no limit
		{Scope: limits.RouteScope("r", "day", ""), Start: day, Limit: 1},          // no span
	} {
		if _, err := s.Take(ctx, "acme", []limits.Quota{q}); !errors.Is(err, limits.ErrInvalid) {
			t.Errorf("Take(%+v) = %v, want ErrInvalid", q, err)
		}
	}
}

// Takes from many connections at once are counted one after the other:
// exactly the limit's worth succeed.
func TestTakeConcurrent(t *testing.T) {
	t.Parallel()
	pool, _ := testdb.NewPool(t)
	s := limits.NewStore(pool)
	q := limits.Quota{Scope: limits.RouteScope("r", "window", ""), Start: time.Date(2026, 12, 6, 0, 0, 0, 0, time.UTC), Span: time.Hour, Limit: 5}
	var wg sync.WaitGroup
	var mu sync.Mutex
	taken := 0
	for range 20 {
		wg.Go(func() {
			ok, err := s.Take(context.Background(), "acme", []limits.Quota{q})
			if err != nil {
				t.Error(err)
			}
			mu.Lock()
			defer mu.Unlock()
			if ok {
				taken++
			}
		})
	}
	wg.Wait()
	if taken != 5 || requests(t, pool, q) != 5 {
		t.Errorf("20 concurrent takes: %d succeeded, %d counted; want 5 and 5", taken, requests(t, pool, q))
	}
}

// Purge deletes a window once it has ended Retention ago, whatever its
// length: a day's window started long before keeps its count.
func TestPurgeKeepsOpenWindows(t *testing.T) {
	t.Parallel()
	pool, _ := testdb.NewPool(t)
	ctx := context.Background()
	now := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	today := time.Date(2026, 12, 6, 0, 0, 0, 0, time.UTC)
	open := limits.Quota{Scope: limits.RouteScope("r", "day", ""), Start: today, Span: 24 * time.Hour, Limit: 10}
	ended := limits.Quota{Scope: limits.RouteScope("r", "day", ""), Start: today.AddDate(0, 0, -1), Span: 24 * time.Hour, Limit: 10}
	for _, q := range []limits.Quota{open, ended} {
		if ok, err := limits.NewStore(pool).Take(ctx, "acme", []limits.Quota{q}); err != nil || !ok {
			t.Fatalf("Take: %v, %v", ok, err)
		}
	}
	n, err := limits.Purge(ctx, pool, now.Add(-limits.Retention))
	if err != nil || n != 1 {
		t.Errorf("Purge: %d, %v; want yesterday's window only", n, err)
	}
	if got := requests(t, pool, open); got != 1 {
		t.Errorf("today's window after Purge counts %d, want 1", got)
	}
}

// requests is the count of q's window, 0 when it has no row.
func requests(t *testing.T, pool *pgxpool.Pool, q limits.Quota) int64 {
	t.Helper()
	var n int64
	err := pool.QueryRow(context.Background(), `
		SELECT coalesce(sum(requests), 0) FROM rate_windows WHERE owner_id = 'acme' AND workload = $1 AND window_start = $2`, q.Scope, q.Start).Scan(&n)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
