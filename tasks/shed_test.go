package tasks

import (
	"errors"
	"testing"
	"time"

	"github.com/tollgate/tollgate/catalog"
)

// Past the bound, admissions are refused only once the oldest in progress
// has waited the patience: a burst is let through, a backlog is not; and
// an admission that ends frees its place.
func TestShedderAdmissions(t *testing.T) {
	cat := &catalog.Catalog{Providers: []catalog.Provider{{Key: "p"}}}
	cases := []struct {
		name     string
		max      int
		patience time.Duration
		wantShed bool
	}{
		{"under the bound", 3, 0, false},
		{"past the bound, a backlog", 2, 0, true},
		{"past the bound, a burst", 2, time.Hour, false},
		{"no bound", -1, 0, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := newShedder(cat, Config{MaxAdmitting: c.max, ShedAdmittingAfter: c.patience})
			first, err := s.begin()
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.begin(); err != nil {
				t.Fatal(err)
			}
			_, err = s.begin()
			var oe *OverloadError
			if got := errors.As(err, &oe); got != c.wantShed {
				t.Fatalf("third admission: err = %v, want shed %v", err, c.wantShed)
			}
			if c.wantShed {
				if !errors.Is(err, ErrOverloaded) || oe.Reason != ShedAdmissions || oe.RetryAfter != time.Second {
					t.Errorf("err = %#v, want ErrOverloaded, admissions, 1s", err)
				}
				first()
				if _, err := s.begin(); err != nil {
					t.Errorf("after one ended: %v, want admitted", err)
				}
			}
		})
	}
}

// Once a backlog is found, the bound holds however young the oldest
// admission in progress, until the admissions fall to half the bound.
func TestShedderStaysStrictUntilTheBacklogClears(t *testing.T) {
	cat := &catalog.Catalog{Providers: []catalog.Provider{{Key: "p"}}}
	s := newShedder(cat, Config{MaxAdmitting: 4})
	var done []func()
	admit := func() error {
		d, err := s.begin()
		if err == nil {
			done = append(done, d)
		}
		return err
	}
	for range 4 {
		if err := admit(); err != nil {
			t.Fatal(err)
		}
	}
	if err := admit(); err == nil {
		t.Fatal("fifth admission with no patience: admitted, want refused")
	}
	// A patient shedder now, as if the oldest were young: still strict.
	s.patience = time.Hour
	done[0]()
	done = done[1:]
	if err := admit(); err != nil {
		t.Fatalf("under the bound: %v, want admitted", err)
	}
	if err := admit(); err == nil {
		t.Fatal("at the bound while behind: admitted, want refused")
	}
	// Down to half the bound: the backlog has cleared, and the patience
	// applies again.
	for _, d := range done[:2] {
		d()
	}
	done = done[2:]
	for range 3 {
		if err := admit(); err != nil {
			t.Fatalf("after the backlog cleared: %v, want admitted (a burst)", err)
		}
	}
}

// The queue's bound: Retry-After is the excess over the bound, from one
// second to thirty; an unknown key or no bound never refuses.
func TestShedderQueue(t *testing.T) {
	cat := &catalog.Catalog{Providers: []catalog.Provider{{Key: "p"}}}
	cases := []struct {
		name      string
		key       string
		bound     time.Duration
		wait      time.Duration
		wantRetry time.Duration // 0: not refused
	}{
		{"under", "p", time.Minute, 59 * time.Second, 0},
		{"at", "p", time.Minute, time.Minute, 0},
		{"just over", "p", time.Minute, time.Minute + time.Millisecond, time.Second},
		{"ten over", "p", time.Minute, 70 * time.Second, 10 * time.Second},
		{"far over", "p", time.Minute, time.Hour, 30 * time.Second},
		{"no bound", "p", -1, time.Hour, 0},
		{"unknown key", "q", time.Minute, time.Hour, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := newShedder(cat, Config{ShedQueueWait: c.bound})
			s.waits["p"].Store(int64(c.wait))
			err := s.queue(c.key)
			var oe *OverloadError
			switch {
			case c.wantRetry == 0 && err != nil:
				t.Errorf("err = %v, want none", err)
			case c.wantRetry != 0 && (!errors.As(err, &oe) || oe.Reason != ShedQueue || oe.RetryAfter != c.wantRetry):
				t.Errorf("err = %v, want queue, retry after %s", err, c.wantRetry)
			}
		})
	}
}
