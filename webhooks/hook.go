package webhooks

import (
	"context"
	"net/http"
	"time"
)

// Retry is how one message is retried: at most Attempts tries, the wait
// after the n-th failed one Base doubled n-1 times, at most Max.
type Retry struct {
	Attempts  int
	Base, Max time.Duration
}

// Wait is the wait after the attempt-th failed try.
func (r Retry) Wait(attempt int) time.Duration {
	d := r.Base
	for i := 1; i < attempt && d < r.Max; i++ {
		d *= 2
	}
	return min(d, r.Max)
}

// Hook is a URL the operator configured rather than an owner
// (TOLLGATE_ALERT_WEBHOOK). Its messages take the owners' webhooks' path:
// the same attempt (Config.Timeout, the Standard Webhooks headers, a 3xx
// a failure, never followed) from a client that dials what
// Config.Addresses allows a URL an admin key set (private addresses, never
// a cloud metadata one). What it carries is kept by its sender, not in the
// events outbox, so it is retried in this process, as its Retry says. It
// is not signed: the operator gave it no secret.
type Hook struct {
	svc    *Service
	url    string
	retry  Retry
	client *http.Client
}

// Hook returns the operator's hook at url, retried as r says. A client of
// its own keeps its connections apart from the owners' webhooks'.
func (s *Service) Hook(url string, r Retry) *Hook {
	h := &Hook{svc: s, url: url, retry: r, client: s.cfg.Client}
	if h.client == nil {
		h.client = newClient(s.cfg.Timeout, s.cfg.Addresses, true)
	}
	return h
}

// Send delivers body as message id (its webhook-id, the same for every
// try of one message), trying again after each failure as the hook's
// Retry says. After each try it calls attempted with the try's number and
// nil when it was delivered, else an error that names the failure's class
// or status, never the URL. It returns once delivered, out of tries, or
// when ctx ends.
func (h *Hook) Send(ctx context.Context, id string, body []byte, attempted func(attempt int, err error)) {
	for attempt := 1; attempt <= h.retry.Attempts; attempt++ {
		res := h.svc.post(ctx, h.client, signedDelivery{url: h.url, id: id, at: h.svc.cfg.Now(), body: body})
		if res.ok() {
			attempted(attempt, nil)
			return
		}
		attempted(attempt, &attemptError{res: res})
		if attempt == h.retry.Attempts {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(h.retry.Wait(attempt)):
		}
	}
}
