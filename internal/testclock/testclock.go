// Package testclock is the settable clock tests inject into tasks, budgets
// and routes: real time until a test sets it, so that periods and days can
// be crossed on purpose instead of waited for.
package testclock

import (
	"sync"
	"time"
)

// Clock is safe for concurrent use. The zero value reads the real time.
type Clock struct {
	mu  sync.Mutex
	set time.Time
}

// Now returns the set time, or the real time when none is set.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.set.IsZero() {
		return time.Now()
	}
	return c.set
}

// Set fixes the time; the zero time returns to the real clock.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.set = t
}
