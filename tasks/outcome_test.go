package tasks

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tollgate/tollgate/gate"
	"github.com/tollgate/tollgate/provider"
)

// TestDecide is the failure-class table: what follows a call, for every
// class, on a queued, an arrival and a streamed run, with attempts left or
// not, and on a task that was canceled or finished meanwhile.
func TestDecide(t *testing.T) {
	t.Parallel()
	limits := outcomeLimits{ambiguousRetries: 1, retryBase: time.Second, retryMax: time.Minute, backoff: 3 * time.Second}
	// open: a task with attempts left; spent: one without.
	open := lockedTask{counted: 1, maxAttempts: 3}
	spent := lockedTask{counted: 3, maxAttempts: 3}
	on := func(k runKind, t lockedTask) lockedTask { t.run = k; return t }
	fail := func(c provider.Class) *provider.Error {
		return &provider.Error{Class: c, Code: "code_" + string(c), Status: 500}
	}
	throttled := &provider.Error{Class: provider.ClassThrottled, Code: "rate_limit", Status: 429, RetryAfter: 5 * time.Second}
	waiting := func(c provider.Class, code string) *Failure {
		f := failureFor(c, code, "")
		f.Message = "Waiting: " + f.Message
		return &f
	}
	failure := func(c provider.Class, code, why string) *Failure { f := failureFor(c, code, why); return &f }
	pause := func(d time.Duration) gateChange {
		return gateChange{move: gatePause, pause: d, class: "throttled", code: "rate_limit"}
	}
	breaker := gateChange{move: gateOpen, class: "exhausted", code: "code_exhausted"}
	closeGate := gateChange{move: gateClose}

	cases := []struct {
		name string
		task lockedTask
		err  *provider.Error
		want decision
	}{
		// success
		{"success settles", on(runQueued, open), nil,
			decision{next: stepSucceed, gate: closeGate, status: StatusSucceeded, money: moneySettle}},
		{"success after ambiguous attempts settles them as possibly charged", on(runQueued, lockedTask{ambiguous: 2, maxAttempts: 3}), nil,
			decision{next: stepSucceed, gate: closeGate, status: StatusSucceeded, money: moneySettle, possiblyCharged: 2}},
		{"success on a task canceled meanwhile: canceled, settled at cost", on(runStream, lockedTask{cancelRequested: true}), nil,
			decision{next: stepSucceed, gate: closeGate, status: StatusCanceled, money: moneySettle}},
		{"success on a task finished meanwhile: history only", on(runQueued, lockedTask{final: true}), nil,
			decision{next: stepRecordOnly, gate: closeGate}},

		// throttled
		{"throttled queued run waits on the paused key", on(runQueued, spent), throttled,
			decision{next: stepWait, gate: pause(5 * time.Second), failure: waiting(provider.ClassThrottled, "rate_limit")}},
		{"throttled arrival run waits too", on(runOnArrival, open), throttled,
			decision{next: stepWait, gate: pause(5 * time.Second), failure: waiting(provider.ClassThrottled, "rate_limit")}},
		{"throttled without Retry-After pauses for RetryBase", on(runQueued, open), &provider.Error{Class: provider.ClassThrottled, Code: "rate_limit"},
			decision{next: stepWait, gate: pause(time.Second), failure: waiting(provider.ClassThrottled, "rate_limit")}},
		{"throttled pause is bounded by RetryMax", on(runQueued, open), &provider.Error{Class: provider.ClassThrottled, Code: "rate_limit", RetryAfter: time.Hour},
			decision{next: stepWait, gate: pause(time.Minute), failure: waiting(provider.ClassThrottled, "rate_limit")}},
		{"throttled stream pauses the key and fails", on(runStream, open), throttled,
			decision{next: stepFail, gate: pause(5 * time.Second), failure: failure(provider.ClassThrottled, "rate_limit", ""), money: moneyRelease}},

		// exhausted
		{"exhausted queued run opens the breaker, falls back or waits", on(runQueued, spent), fail(provider.ClassExhausted),
			decision{next: stepWait, gate: breaker, failure: waiting(provider.ClassExhausted, "code_exhausted"), fallback: true}},
		{"exhausted arrival run does too", on(runOnArrival, open), fail(provider.ClassExhausted),
			decision{next: stepWait, gate: breaker, failure: waiting(provider.ClassExhausted, "code_exhausted"), fallback: true}},
		{"exhausted stream opens the breaker and fails", on(runStream, open), fail(provider.ClassExhausted),
			decision{next: stepFail, gate: breaker, failure: failure(provider.ClassExhausted, "code_exhausted", ""), money: moneyRelease}},

		// rejected
		{"rejected fails at once, attempts left or not", on(runQueued, open), fail(provider.ClassRejected),
			decision{next: stepFail, failure: failure(provider.ClassRejected, "code_rejected", ""), money: moneyRelease}},
		{"rejected stream fails", on(runStream, open), fail(provider.ClassRejected),
			decision{next: stepFail, failure: failure(provider.ClassRejected, "code_rejected", ""), money: moneyRelease}},
		{"rejected after an ambiguous attempt settles as possibly charged", on(runQueued, lockedTask{counted: 2, ambiguous: 1, maxAttempts: 3}), fail(provider.ClassRejected),
			decision{next: stepFail, failure: failure(provider.ClassRejected, "code_rejected", ""), money: moneyPossiblyCharged, possiblyCharged: 1}},

		// transient
		{"transient with attempts left retries", on(runQueued, open), fail(provider.ClassTransient),
			decision{next: stepRetry, retryAfter: 3 * time.Second, cause: fail(provider.ClassTransient)}},
		{"transient arrival run retries through its net", on(runOnArrival, open), fail(provider.ClassTransient),
			decision{next: stepRetry, retryAfter: 3 * time.Second, cause: fail(provider.ClassTransient)}},
		{"transient without attempts left falls back or fails", on(runQueued, spent), fail(provider.ClassTransient),
			decision{next: stepFail, failure: failure(provider.ClassTransient, "code_transient", "attempts"), fallback: true, money: moneyRelease}},
		{"transient stream fails without fallback", on(runStream, open), fail(provider.ClassTransient),
			decision{next: stepFail, failure: failure(provider.ClassTransient, "code_transient", ""), money: moneyRelease}},

		// ambiguous
		{"ambiguous within AmbiguousRetries retries", on(runQueued, lockedTask{counted: 1, ambiguous: 1, maxAttempts: 3}), fail(provider.ClassAmbiguous),
			decision{next: stepRetry, retryAfter: 3 * time.Second, cause: fail(provider.ClassAmbiguous)}},
		{"ambiguous past AmbiguousRetries fails, possibly charged", on(runQueued, lockedTask{counted: 2, ambiguous: 2, maxAttempts: 3}), fail(provider.ClassAmbiguous),
			decision{next: stepFail, failure: failure(provider.ClassAmbiguous, "code_ambiguous", ""), money: moneyPossiblyCharged, possiblyCharged: 2}},
		{"ambiguous without attempts left fails, possibly charged", on(runQueued, lockedTask{counted: 3, ambiguous: 1, maxAttempts: 3}), fail(provider.ClassAmbiguous),
			decision{next: stepFail, failure: failure(provider.ClassAmbiguous, "code_ambiguous", ""), money: moneyPossiblyCharged, possiblyCharged: 1}},
		{"ambiguous stream fails, possibly charged", on(runStream, lockedTask{counted: 1, ambiguous: 1, maxAttempts: 3}), fail(provider.ClassAmbiguous),
			decision{next: stepFail, failure: failure(provider.ClassAmbiguous, "code_ambiguous", ""), money: moneyPossiblyCharged, possiblyCharged: 1}},

		// the task, not the call, decides
		{"cancel asked wins over a throttle: no gate change", on(runQueued, lockedTask{cancelRequested: true, maxAttempts: 3}), throttled,
			decision{next: stepCancel, money: moneyRelease}},
		{"cancel asked after an ambiguous attempt: possibly charged", on(runQueued, lockedTask{cancelRequested: true, ambiguous: 1, maxAttempts: 3}), fail(provider.ClassAmbiguous),
			decision{next: stepCancel, money: moneyPossiblyCharged, possiblyCharged: 1}},
		{"finished meanwhile: a failure is history only", on(runQueued, lockedTask{final: true, cancelRequested: true}), fail(provider.ClassExhausted),
			decision{next: stepRecordOnly}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := decide(c.task, c.err, limits)
			if diff := cmp.Diff(c.want, got, cmp.AllowUnexported(decision{}, gateChange{}), sameError); diff != "" {
				t.Errorf("mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// sameError compares provider errors by what decide reads of them.
var sameError = cmp.Comparer(func(a, b *provider.Error) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Class == b.Class && a.Code == b.Code && a.Status == b.Status && a.RetryAfter == b.RetryAfter
})

// TestRunKind: who runs an attempt, from the run's flags.
func TestRunKind(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		r    run
		want runKind
	}{
		{run{}, runQueued},
		{run{inline: true}, runOnArrival},
		{run{inline: true, stream: true}, runStream},
	} {
		if got := c.r.kind(); got != c.want {
			t.Errorf("%+v: kind = %d, want %d", c.r, got, c.want)
		}
	}
}

// TestDecideStart: before a call, a cancel asked for, the deadline, the
// ambiguous attempts and the attempt limit end the task; otherwise the run
// goes on to its key's gate, which lets it call, makes the task wait, or
// fails a stream, whose client cannot wait.
func TestDecideStart(t *testing.T) {
	t.Parallel()
	ready := startFacts{run: runQueued, left: time.Minute, counted: 1, maxAttempts: 3, runsLeft: true,
		lastClass: provider.ClassTransient, lastCode: "overloaded"}
	with := func(f func(*startFacts)) startFacts { s := ready; f(&s); return s }
	failure := func(c provider.Class, code, why string) *Failure { f := failureFor(c, code, why); return &f }
	closed := gate.Decision{Call: true}
	paused := gate.Decision{ReasonClass: "throttled", ReasonCode: "rate_limit", Wait: 4 * time.Second}
	waiting := failureFor(provider.ClassThrottled, "rate_limit", "")
	waiting.Message = "Waiting: " + waiting.Message

	cases := []struct {
		name string
		task startFacts
		pass gate.Decision
		want decision
	}{
		{"ready, gate closed: call", ready, closed, decision{next: stepCall}},
		{"ready, the breaker's probe: call", ready, gate.Decision{Call: true, Probe: true}, decision{next: stepCall}},
		{"ready, key paused: wait", ready, paused, decision{next: stepWait, failure: &waiting, wait: 4 * time.Second}},
		{"stream, key paused: fail", with(func(s *startFacts) { s.run = runStream }), paused,
			decision{next: stepFail, failure: failure(provider.ClassThrottled, "rate_limit", ""), money: moneyRelease}},
		{"cancel asked", with(func(s *startFacts) { s.cancelRequested = true; s.left = 0 }), closed,
			decision{next: stepCancel, money: moneyRelease}},
		{"cancel asked after an ambiguous attempt", with(func(s *startFacts) { s.cancelRequested = true; s.ambiguous = 1 }), closed,
			decision{next: stepCancel, money: moneyPossiblyCharged, possiblyCharged: 1}},
		{"deadline passed", with(func(s *startFacts) { s.left = 0 }), closed,
			decision{next: stepFail, failure: failure(provider.ClassTransient, "overloaded", "deadline"), money: moneyRelease}},
		{"deadline passed before any failure", with(func(s *startFacts) { s.left, s.lastClass, s.lastCode = 0, "", "" }), closed,
			decision{next: stepFail, failure: failure(provider.ClassTransient, "", "deadline"), money: moneyRelease}},
		{"too many ambiguous attempts", with(func(s *startFacts) { s.ambiguous = 2 }), closed,
			decision{next: stepFail, failure: failure(provider.ClassAmbiguous, "", ""), money: moneyPossiblyCharged, possiblyCharged: 2}},
		{"attempt limit reached", with(func(s *startFacts) { s.counted = 3 }), closed,
			decision{next: stepFail, failure: failure(provider.ClassTransient, "overloaded", "attempts"), money: moneyRelease}},
		{"River's runs used up", with(func(s *startFacts) { s.runsLeft = false }), closed,
			decision{next: stepFail, failure: failure(provider.ClassTransient, "overloaded", "attempts"), money: moneyRelease}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := decideStart(c.task, 1)
			if got.next == stepCall {
				got = decideAdmitted(c.task, c.pass)
			}
			if diff := cmp.Diff(c.want, got, cmp.AllowUnexported(decision{}, gateChange{}), sameError); diff != "" {
				t.Errorf("mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// The exhausted class opens the key's breaker whatever its cause, but the
// task's public failure names the cause: a redirect is not a quota, on
// the failure itself, behind the gate it opened, and at a deadline.
func TestFailureForNamesTheExhaustedCause(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, code, why string
		want            string
		retryable       bool
	}{
		{"an empty account", provider.CodeInsufficientQuota, "", CodeModelQuotaExhausted, true},
		{"a refused key", provider.CodeUnauthorized, "", CodeModelQuotaExhausted, true},
		{"a redirect", provider.CodeRedirectRefused, "", CodeProviderRedirected, false},
		{"a redirect, at the deadline", provider.CodeRedirectRefused, "deadline", CodeProviderRedirected, false},
	}
	for _, c := range cases {
		f := failureFor(provider.ClassExhausted, c.code, c.why)
		if f.Code != c.want || f.Class != "exhausted" || f.Retryable != c.retryable {
			t.Errorf("%s: failure = %+v, want code %s, class exhausted, retryable %v", c.name, f, c.want, c.retryable)
		}
		if c.want == CodeProviderRedirected && (!strings.Contains(f.Message, "redirected the call, and it was refused") || strings.Contains(f.Message, "quota")) {
			t.Errorf("%s: message %q, want it to say the provider redirected, nothing of quota", c.name, f.Message)
		}
	}
	d := decide(lockedTask{run: runQueued, maxAttempts: 3}, &provider.Error{Class: provider.ClassExhausted, Code: provider.CodeRedirectRefused, Status: 302}, outcomeLimits{})
	if d.next != stepWait || d.gate.move != gateOpen || d.failure.Code != CodeProviderRedirected || !strings.HasPrefix(d.failure.Message, "Waiting: ") {
		t.Errorf("decide after a redirect = %+v, want a wait behind the opened breaker, saying provider_redirected", d)
	}
}
