package tasks

import (
	"time"

	"github.com/tollgate/tollgate/gate"
	"github.com/tollgate/tollgate/provider"
)

// What follows a provider call is decided apart from the transaction that
// applies it, as River's executor builds a job's state change as a value
// and hands it to its completer: decide is a pure function of the task as
// read under its lock, the call's result and the limits; apply
// (record.go) carries the decision out and never looks at a failure's
// class. The reaction to each class:
//
//	success    settle; close the key's gate if it was paused or open
//	throttled  pause the whole key until Retry-After; no attempt used
//	exhausted  open the key's breaker; the task waits queued (or moves to
//	           a fallback model); no attempt used
//	rejected   fail now: the identical payload is never repeated
//	transient  retry with bounded backoff up to MaxAttempts, then fall
//	           back or fail
//	ambiguous  retry only as often as AmbiguousRetries allows
//
// A streamed task makes one attempt (its client is waiting), so any
// failure ends it; a task that ended meanwhile (a rescued duplicate
// finished it) keeps the attempt as history only; a cancel asked for wins
// over any failure.

// runKind is who runs an attempt.
type runKind int

const (
	runQueued    runKind = iota // a River run of the task's job
	runOnArrival                // inline, right after admission; its safety net runs what follows
	runStream                   // inline, with its client waiting on this one attempt
)

// kind is r's runKind.
func (r *run) kind() runKind {
	switch {
	case r.stream:
		return runStream
	case r.inline:
		return runOnArrival
	}
	return runQueued
}

// lockedTask is what decide needs of the attempt's task, read under its
// lock once the attempt's journal entry is written.
type lockedTask struct {
	run             runKind
	final           bool // the task ended meanwhile
	cancelRequested bool
	counted         int // attempts that count against maxAttempts, on the task's model
	ambiguous       int // attempts that may have been charged, over the whole task
	maxAttempts     int // the task's own bound (a route's), else the service's
}

// outcomeLimits are the service's limits decide applies.
type outcomeLimits struct {
	ambiguousRetries int           // ambiguous attempts retried at most
	retryBase        time.Duration // a throttle's pause when the provider names none
	retryMax         time.Duration // the longest pause a throttle sets
	backoff          time.Duration // this attempt's wait before a retry (drawn by the caller: it is random)
}

// step is what happens to the task after the call.
type step int

const (
	stepRecordOnly step = iota // the task ended meanwhile: the attempt is history, the job completes
	stepSucceed                // the task ends with the answer (canceled, if a cancel was asked), settled at cost
	stepCancel                 // the task ends canceled
	stepFail                   // the task ends failed (after a fallback is tried, when asked)
	stepWait                   // the task waits queued for its key's gate (after a fallback is tried, when asked)
	stepRetry                  // the task is queued again for another attempt after a backoff
	stepCall                   // before a call: the attempt calls the provider
)

// gateMove is a change to the provider key's gate.
type gateMove int

const (
	gateKeep  gateMove = iota
	gateClose          // calls flow again
	gatePause          // a throttle: no calls for a while
	gateOpen           // the breaker opens: no calls until a probe succeeds
)

// gateChange is what a decision does to the key's gate.
type gateChange struct {
	move  gateMove
	pause time.Duration // gatePause: how long
	class string        // gatePause, gateOpen: the reason, as the gate reports it
	code  string
}

// money is how a decision closes the task's reservation.
type money int

const (
	moneyKeep            money = iota // the reservation stays held: the task goes on
	moneySettle                       // settled at the answer's cost (plus the possibly charged calls' worst case)
	moneyRelease                      // released: nothing was spent
	moneyPossiblyCharged              // settled as possibly charged: an earlier call may have been billed
)

// moneyAfter is how a task that produced no answer closes its reservation
// after possiblyCharged calls that may have been billed.
func moneyAfter(possiblyCharged int) money {
	if possiblyCharged > 0 {
		return moneyPossiblyCharged
	}
	return moneyRelease
}

// decision is what follows an attempt's call, as a value.
type decision struct {
	next step
	gate gateChange
	// failure is why the task waits (stepWait; its message starts
	// "Waiting: ") or why it failed (stepFail).
	failure *Failure
	// fallback: before waiting or failing, move the task to the next model
	// of its chain that can take it, if any; the decision then ends there.
	fallback bool
	// status is how stepSucceed ends the task: succeeded, or canceled
	// when a cancel was asked (the call's cost is settled all the same).
	status Status
	money  money
	// possiblyCharged is how many earlier calls may have been billed
	// (moneySettle adds their worst case).
	possiblyCharged int
	// retryAfter is when stepRetry's next run comes, for an inline run's
	// safety net (River's runs wait River's own backoff).
	retryAfter time.Duration
	// cause is the error stepRetry hands River for its retry.
	cause *provider.Error
	// wait is how long the gate stops calls, for a stepWait decided on
	// the gate as read (before a call); after a call, the gate's change
	// tells.
	wait time.Duration
}

// decide is what follows a call that ended with callErr (nil: an answer)
// on task t, under limits l.
func decide(t lockedTask, callErr *provider.Error, l outcomeLimits) decision {
	if callErr == nil {
		return decideSuccess(t)
	}
	switch {
	case t.final:
		return decision{next: stepRecordOnly}
	case t.cancelRequested:
		return decision{next: stepCancel, money: moneyAfter(t.ambiguous), possiblyCharged: t.ambiguous}
	}
	gate := gateFor(callErr, l)
	switch {
	case gate.move != gateKeep && t.run != runStream:
		// The key, not the request, is at fault: no attempt is used, and
		// the task waits for the key (or, exhausted, another provider
		// serves it if a fallback fits).
		why := failureFor(callErr.Class, callErr.Code, "")
		why.Message = "Waiting: " + why.Message
		return decision{next: stepWait, gate: gate, failure: &why, fallback: gate.move == gateOpen}
	case t.run != runStream && retryable(t, callErr, l):
		return decision{next: stepRetry, retryAfter: l.backoff, cause: callErr}
	}
	why, fallback := "", false
	if callErr.Class == provider.ClassTransient && t.run != runStream {
		why, fallback = "attempts", true
	}
	f := failureFor(callErr.Class, callErr.Code, why)
	return decision{next: stepFail, gate: gate, failure: &f, fallback: fallback,
		money: moneyAfter(t.ambiguous), possiblyCharged: t.ambiguous}
}

// decideSuccess is what follows an answer.
func decideSuccess(t lockedTask) decision {
	closeGate := gateChange{move: gateClose}
	if t.final {
		return decision{next: stepRecordOnly, gate: closeGate}
	}
	status := StatusSucceeded
	if t.cancelRequested {
		status = StatusCanceled // settled for the call's cost, its answer not delivered
	}
	return decision{next: stepSucceed, gate: closeGate, status: status, money: moneySettle, possiblyCharged: t.ambiguous}
}

// gateFor is the gate change a failure calls for: a throttle pauses the
// key for the provider's Retry-After (RetryBase when it names none, at
// most RetryMax), an exhausted quota opens its breaker.
func gateFor(callErr *provider.Error, l outcomeLimits) gateChange {
	switch callErr.Class {
	case provider.ClassThrottled:
		pause := callErr.RetryAfter
		if pause <= 0 {
			pause = l.retryBase
		}
		return gateChange{move: gatePause, pause: min(pause, l.retryMax), class: string(callErr.Class), code: callErr.Code}
	case provider.ClassExhausted:
		return gateChange{move: gateOpen, class: string(callErr.Class), code: callErr.Code}
	}
	return gateChange{}
}

// retryable reports whether a failed attempt of t is tried again: a
// transient failure while attempts are left, an ambiguous one while
// AmbiguousRetries allows too.
func retryable(t lockedTask, callErr *provider.Error, l outcomeLimits) bool {
	left := t.counted < t.maxAttempts
	switch callErr.Class {
	case provider.ClassTransient:
		return left
	case provider.ClassAmbiguous:
		return left && t.ambiguous <= max(l.ambiguousRetries, 0)
	}
	return false
}

// Before a call, the same decision says whether the attempt may call: a
// cancel asked for, the deadline, the ambiguous attempts and the attempt
// limit are checked first (decideStart), then the key's gate
// (decideAdmitted).

// startFacts is what decides whether a run may call, read with the task
// locked and its interrupted runs journalled.
type startFacts struct {
	run             runKind
	cancelRequested bool
	left            time.Duration // until the task's deadline
	counted         int           // attempts that count against maxAttempts, on the task's model
	ambiguous       int           // attempts that may have been charged
	maxAttempts     int
	runsLeft        bool // River has runs left for the job (inline runs have no such bound)
	lastClass       provider.Class
	lastCode        string // the last failed attempt's class and code, for the failure's words
}

// decideStart is whether a run of t may go on to the gate (stepCall), or
// the task ends: canceled, or failed past its deadline, its ambiguous
// attempts or its attempt limit.
func decideStart(t startFacts, ambiguousRetries int) decision {
	last := t.lastClass
	if last == "" {
		last = provider.ClassTransient
	}
	switch {
	case t.cancelRequested:
		return decision{next: stepCancel, money: moneyAfter(t.ambiguous), possiblyCharged: t.ambiguous}
	case t.left <= 0:
		return failBefore(t, failureFor(last, t.lastCode, "deadline"))
	case t.ambiguous > max(ambiguousRetries, 0):
		return failBefore(t, failureFor(provider.ClassAmbiguous, "", ""))
	case t.counted >= t.maxAttempts || !t.runsLeft:
		return failBefore(t, failureFor(last, t.lastCode, "attempts"))
	}
	return decision{next: stepCall}
}

// decideAdmitted is whether a run of t calls once its key's gate answered
// pass: a closed gate lets it; a paused key or an open breaker makes the
// task wait queued (a stream's client cannot wait: it fails).
func decideAdmitted(t startFacts, pass gate.Decision) decision {
	if pass.Call {
		return decision{next: stepCall}
	}
	why := failureFor(provider.Class(pass.ReasonClass), pass.ReasonCode, "")
	if t.run == runStream {
		return failBefore(t, why)
	}
	why.Message = "Waiting: " + why.Message
	return decision{next: stepWait, failure: &why, wait: pass.Wait}
}

// failBefore fails t, before a call, for f.
func failBefore(t startFacts, f Failure) decision {
	return decision{next: stepFail, failure: &f, money: moneyAfter(t.ambiguous), possiblyCharged: t.ambiguous}
}

// internalFailure fails a task Tollgate cannot run (its model gone from
// the catalog, its request unreadable) after possiblyCharged calls that
// may have been billed.
func internalFailure(possiblyCharged int) decision {
	f := failureFor("internal", "", "")
	return decision{next: stepFail, failure: &f, money: moneyAfter(possiblyCharged), possiblyCharged: possiblyCharged}
}
