package server

import (
	"net/http"
	"sync"
	"time"
)

// authLimiter slows down clients that keep failing authentication: after
// burst failures from one address within window, further attempts from it
// are refused with 429 until the window ends. Per process: enough to make
// guessing keys pointless (keys are 256-bit), without a shared store.
type authLimiter struct {
	mu     sync.Mutex
	burst  int
	window time.Duration
	now    func() time.Time
	seen   map[string]*failures
}

type failures struct {
	n     int
	since time.Time
}

func newAuthLimiter(burst int, window time.Duration, now func() time.Time) *authLimiter {
	return &authLimiter{burst: burst, window: window, now: now, seen: map[string]*failures{}}
}

// blocked reports whether addr must wait, and for how long.
func (l *authLimiter) blocked(addr string) (bool, time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	f := l.seen[addr]
	if f == nil {
		return false, 0
	}
	left := f.since.Add(l.window).Sub(l.now())
	if left <= 0 {
		delete(l.seen, addr)
		return false, 0
	}
	return f.n >= l.burst, left
}

// failed records one failed authentication from addr.
func (l *authLimiter) failed(addr string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	f := l.seen[addr]
	if f == nil || now.Sub(f.since) > l.window {
		f = &failures{since: now}
		l.seen[addr] = f
	}
	f.n++
	if len(l.seen) > 100_000 { // bound memory under a spray of addresses
		for k, v := range l.seen {
			if now.Sub(v.since) > l.window {
				delete(l.seen, k)
			}
		}
	}
}

// Blocked and Failed make the limiter a console.FailureLimiter: failed
// console sign-ins and failed API authentications from one address count
// together.
func (l *authLimiter) Blocked(addr string) (bool, time.Duration) { return l.blocked(addr) }

// Failed records one failed console sign-in from addr.
func (l *authLimiter) Failed(addr string) { l.failed(addr) }

func tooManyAuthFailures(wait time.Duration) error {
	secs := int(wait.Round(time.Second) / time.Second)
	return &apiError{status: http.StatusTooManyRequests, code: "rate_limited", retryAfter: max(secs, 1),
		detail: "Too many failed authentications from this address; wait " + wait.Round(time.Second).String() + "."}
}
