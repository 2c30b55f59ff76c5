package tasks

import (
	"errors"

	"github.com/tollgate/tollgate/limits"
)

// ErrRateLimited: the owner's or its workload's rate limit has no room for
// the task in the current minute. Nothing was written; the idempotency key
// is still free.
var ErrRateLimited = errors.New("tasks: rate limited")

// RateLimitedError is a refusal by a rate limit, with the decision that
// refused (which limit, the wait, the headers' figures). It matches
// ErrRateLimited.
type RateLimitedError struct {
	Decision limits.Decision
}

func (e *RateLimitedError) Error() string {
	return "tasks: rate limited: " + string(e.Decision.Exceeded) + " per minute"
}

// Is reports ErrRateLimited.
func (e *RateLimitedError) Is(target error) bool { return target == ErrRateLimited }

// rateCharge is a's charge on its owner's rate windows: one request and
// the reservation's token estimate.
func (a *admission) rateCharge() limits.Charge {
	return limits.Charge{TaskID: a.id, Workload: a.sub.Workload, Tokens: a.tokens}
}

// rateDecided records the decision on a's admission from the counts its
// statement returned, and returns a *RateLimitedError when it does not fit.
func (a *admission) rateDecided(w *limits.Windows) error {
	if len(w.List) == 0 {
		return nil
	}
	d := limits.Decide(w.List, a.tokens, a.rateAt)
	a.rate = &d
	if !d.Allowed {
		return &RateLimitedError{Decision: d}
	}
	return nil
}
