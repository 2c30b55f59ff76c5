// Package eventually waits in tests for a condition to hold: the way to
// wait for asynchronous work without a sleep standing in for it.
package eventually

import (
	"testing"
	"time"
)

// Bound is how long Wait waits before failing the test: generous, since
// only a broken system takes it.
const Bound = 30 * time.Second

// Wait polls cond until it holds and fails the test if it never does
// within Bound. The poll interval decides nothing the test asserts.
func Wait(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(Bound)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out after %s waiting for: %s", Bound, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
