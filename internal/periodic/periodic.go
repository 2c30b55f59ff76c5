// Package periodic runs the background rounds every instance repeats
// (sweeps, reapers, the first ANALYZE of new tables) on one ticker shape.
package periodic

import (
	"context"
	"time"
)

// Every calls fn every interval until ctx ends; the first call comes one
// interval after the start. A round that outlasts the interval delays the
// next one rather than overlapping it.
func Every(ctx context.Context, interval time.Duration, fn func(context.Context)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			fn(ctx)
		}
	}
}
