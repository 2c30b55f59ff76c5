package webhooks

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
)

// DeliveryArgs is the River job that delivers one event.
type DeliveryArgs struct {
	EventID string `json:"event_id"`
}

// Kind names the job kind in river_job.
func (DeliveryArgs) Kind() string { return "webhook_delivery" }

// Register adds the delivery worker to workers, for the River client that
// works Queue with QueueConfig.
func (s *Service) Register(workers *river.Workers) error {
	return river.AddWorkerSafely(workers, &worker{svc: s})
}

// QueueConfig is how River works Queue in this process.
func (s *Service) QueueConfig() river.QueueConfig {
	return river.QueueConfig{MaxWorkers: s.cfg.Workers, FetchPollInterval: s.cfg.FetchPoll, FetchCooldown: min(s.cfg.FetchPoll, 100*time.Millisecond)}
}

type worker struct {
	river.WorkerDefaults[DeliveryArgs]
	svc *Service
}

// NextRetry is the exponential backoff of Config.RetryBase and RetryMax,
// in River's time (the wall clock), counted from the failed attempt's
// start: when the next attempt comes must not tell how long this one
// took (a timeout from a refused connection, say). A time already past
// is now: River would replace it with its own policy.
func (w *worker) NextRetry(job *river.Job[DeliveryArgs]) time.Time {
	now := time.Now()
	if job.AttemptedAt == nil {
		return now.Add(w.svc.backoff(job.Attempt))
	}
	if next := job.AttemptedAt.Add(w.svc.backoff(job.Attempt)); next.After(now) {
		return next
	}
	return now
}

// Timeout bounds a job beyond its HTTP attempt: rendering and recording.
func (w *worker) Timeout(*river.Job[DeliveryArgs]) time.Duration {
	return w.svc.cfg.Timeout + 30*time.Second
}

// backoff is the wait after an event's attempt-th failed attempt.
func (s *Service) backoff(attempt int) time.Duration {
	return Retry{Attempts: MaxAttempts, Base: s.cfg.RetryBase, Max: s.cfg.RetryMax}.Wait(attempt)
}

// Work makes one attempt at the event's delivery and records it; an
// attempt that failed returns an error, for River to try again after the
// backoff.
func (w *worker) Work(ctx context.Context, job *river.Job[DeliveryArgs]) error {
	return w.svc.deliver(ctx, job.Args.EventID, job.Attempt, job.MaxAttempts)
}

// pendingEvent is an event with what delivering it needs.
type pendingEvent struct {
	id, owner, taskID, typ string
	created                time.Time
	url                    *string // nil: the webhook was removed
	privateAllowed         bool    // an admin key set the URL
	accepted               bool    // the URL has answered a delivery with a 2xx
	sealed, previous       []byte
	previousUntil          *time.Time
}

func (s *Service) loadEvent(ctx context.Context, id string) (pendingEvent, error) {
	var ev pendingEvent
	err := s.pool.QueryRow(ctx, `
		SELECT ev.id::text, ev.owner_id, ev.task_id::text, ev.type, ev.created_at, e.url, e.secret_sealed, e.previous_sealed, e.previous_until,
		       coalesce(e.allow_private, false), e.accepted_at IS NOT NULL
		FROM webhook_events ev LEFT JOIN webhook_endpoints e ON e.owner_id = ev.owner_id
		WHERE ev.id = $1 AND ev.state = 'pending'`, id).
		Scan(&ev.id, &ev.owner, &ev.taskID, &ev.typ, &ev.created, &ev.url, &ev.sealed, &ev.previous, &ev.previousUntil, &ev.privateAllowed, &ev.accepted)
	return ev, err
}

// webhookID is the event's webhook-id: the same for every attempt.
func webhookID(eventID string) string { return "msg_" + strings.ReplaceAll(eventID, "-", "") }

// deliver makes the attempt-th attempt (of at most maxAttempts) at event id.
func (s *Service) deliver(ctx context.Context, id string, attempt, maxAttempts int) error {
	ev, err := s.loadEvent(ctx, id)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil // delivered, dropped or gone already
	}
	if err != nil {
		return fmt.Errorf("webhooks: load event: %w", err)
	}
	if ev.url == nil {
		_, err := s.pool.Exec(ctx, `UPDATE webhook_events SET state = 'dropped', next_try_at = NULL WHERE id = $1`, id)
		s.cfg.Metrics.WebhookDelivery("dropped")
		return err
	}
	body, err := s.body(ctx, ev)
	if err != nil {
		return err
	}
	now := s.cfg.Now()
	secrets, err := s.secrets(ev, now)
	if err != nil {
		return err
	}
	sig, err := signature(secrets, webhookID(ev.id), now, body)
	if err != nil {
		return err
	}
	res := s.post(ctx, s.clientFor(ev), signedDelivery{url: *ev.url, id: webhookID(ev.id), at: now, sig: sig, body: body})
	last := attempt >= maxAttempts
	if err := s.record(ctx, ev, attemptRecord{attempt: attempt, at: now, last: last, res: res}); err != nil {
		return err
	}
	s.cfg.Metrics.WebhookDelivery(res.outcome())
	if res.ok() {
		return nil
	}
	s.cfg.Logger.Info("webhook delivery failed", slog.String("owner_id", ev.owner), slog.String("webhook_id", webhookID(ev.id)),
		slog.Int("attempt", attempt), slog.String("failure", res.outcome()), slog.Int("status_code", res.status), slog.Bool("gave_up", last))
	return &attemptError{res: res}
}

// attemptError is a failed attempt, returned to River for a retry. It
// names the failure's class only: never the URL or the answer.
type attemptError struct{ res attemptResult }

func (e *attemptError) Error() string {
	if e.res.status != 0 {
		return "webhook delivery: status " + strconv.Itoa(e.res.status)
	}
	return "webhook delivery: " + e.res.class
}

// body is the event's JSON: its type, when the task ended, and the task as
// its owner's GET shows it.
func (s *Service) body(ctx context.Context, ev pendingEvent) ([]byte, error) {
	data, err := s.cfg.Render(ctx, ev.owner, ev.taskID)
	if err != nil {
		if s.cfg.NotFound == nil || !errors.Is(err, s.cfg.NotFound) {
			return nil, fmt.Errorf("webhooks: render task: %w", err)
		}
		// Erased or purged since: the event still says which task ended.
		status := strings.TrimPrefix(ev.typ, "task.")
		data, _ = json.Marshal(map[string]string{"id": ev.taskID, "status": status})
	}
	return json.Marshal(struct {
		Type      string          `json:"type"`
		Timestamp string          `json:"timestamp"`
		Data      json.RawMessage `json:"data"`
	}{ev.typ, ev.created.UTC().Format(time.RFC3339Nano), data})
}

// secrets are the secrets that sign now: the current one and, within
// RotationOverlap of a rotation, the previous one.
func (s *Service) secrets(ev pendingEvent, now time.Time) ([]string, error) {
	cur, err := s.cfg.Sealer.Open(ev.sealed, secretAD(ev.owner))
	if err != nil {
		return nil, fmt.Errorf("webhooks: open secret: %w", err)
	}
	out := []string{string(cur)}
	if ev.previous != nil && ev.previousUntil != nil && now.Before(*ev.previousUntil) {
		prev, err := s.cfg.Sealer.Open(ev.previous, secretAD(ev.owner))
		if err != nil {
			return nil, fmt.Errorf("webhooks: open previous secret: %w", err)
		}
		out = append(out, string(prev))
	}
	return out, nil
}

// attemptResult is what one attempt came to: the receiver's status code,
// or the class of failure that left none.
type attemptResult struct {
	status int
	class  string // "" when the receiver answered; timeout, dns, tls, network, blocked_address
}

func (r attemptResult) ok() bool { return r.status >= 200 && r.status < 300 }

// outcome is the result's metric label and recorded error class.
func (r attemptResult) outcome() string {
	switch {
	case r.ok():
		return "delivered"
	case r.class != "":
		return r.class
	}
	return "http_status"
}

// maxAnswerBytes is how much of a receiver's answer is read (and
// discarded) so that the connection can be reused.
const maxAnswerBytes = 64 << 10

// clientFor is the client that may deliver ev: the one that dials private
// addresses only for a URL an admin key set.
func (s *Service) clientFor(ev pendingEvent) *http.Client {
	if ev.privateAllowed {
		return s.privateClient
	}
	return s.client
}

// signedDelivery is one attempt's request: the body to url, signed (sig)
// as webhook-id id at time at; sig "" sends no webhook-signature (Hook).
type signedDelivery struct {
	url, id string
	at      time.Time
	sig     string
	body    []byte
}

// post makes one attempt with client. The receiver's answer is never read
// beyond maxAnswerBytes nor logged.
func (s *Service) post(ctx context.Context, client *http.Client, d signedDelivery) attemptResult {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.url, bytes.NewReader(d.body))
	if err != nil {
		return attemptResult{class: "network"}
	}
	req.Header.Set("content-type", "application/json")
	req.Header.Set("user-agent", "Tollgate-Webhooks/1")
	req.Header.Set("webhook-id", d.id)
	req.Header.Set("webhook-timestamp", strconv.FormatInt(d.at.Unix(), 10))
	if d.sig != "" {
		req.Header.Set("webhook-signature", d.sig)
	}
	resp, err := client.Do(req)
	if err != nil {
		return attemptResult{class: failureClass(err)}
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxAnswerBytes))
	_ = resp.Body.Close()
	return attemptResult{status: resp.StatusCode}
}

// failureClass is the class of an attempt that got no answer, for the
// operator's metrics and logs (owners see only "unreachable": shown).
func failureClass(err error) string {
	var ne net.Error
	var dns *net.DNSError
	var cert *tls.CertificateVerificationError
	var alert tls.AlertError
	var header tls.RecordHeaderError
	switch {
	case errors.Is(err, errBlockedAddress):
		return "blocked_address"
	case errors.Is(err, errUnresolved), errors.As(err, &dns):
		return "dns"
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	case errors.As(err, &cert), errors.As(err, &alert), errors.As(err, &header):
		return "tls"
	}
	return "network"
}

// The classes an owner sees for a failed attempt (Delivery.Error).
const (
	// ClassUnreachable: the attempt got no HTTP answer (refused address,
	// DNS, connection, timeout, TLS), or got a non-2xx one from a URL that
	// has never accepted a delivery.
	ClassUnreachable = "unreachable"
	// ClassHTTPStatus: a URL that has accepted a delivery before answered
	// with a status outside 2xx (Delivery.StatusCode).
	ClassHTTPStatus = "http_status"
)

// shown is what the deliveries list may say of r, for a URL that has
// (accepted) or has not answered a delivery with a 2xx before: the
// status code and ClassHTTPStatus for a receiver that proved it is one;
// for any other failure only ClassUnreachable, so that the list cannot
// tell a closed port from a filtered one, a refused address, a service
// that is not HTTP or one that answers 404 — a port scan through
// Tollgate's network learns nothing.
func (r attemptResult) shown(accepted bool) (status *int, class *string) {
	switch {
	case r.ok():
		return &r.status, nil
	case r.class == "" && accepted:
		c := ClassHTTPStatus
		return &r.status, &c
	}
	c := ClassUnreachable
	return nil, &c
}

// attemptRecord is one attempt to record: its number, its start, whether
// no attempt follows a failure, and what it came to.
type attemptRecord struct {
	attempt int
	at      time.Time
	last    bool
	res     attemptResult
}

// record notes attempt a on ev, as the deliveries list shows it (shown);
// its times are the attempt's start and the next attempt's due time from
// that start, never its end, which would tell how long it took. A 2xx
// marks the URL as accepting, if it is still the endpoint's.
func (s *Service) record(ctx context.Context, ev pendingEvent, a attemptRecord) error {
	state := "pending"
	var next *time.Time
	switch {
	case a.res.ok():
		state = "delivered"
	case a.last:
		state = "failed"
	default:
		n := a.at.Add(s.backoff(a.attempt))
		next = &n
	}
	status, class := a.res.shown(ev.accepted)
	b := &pgx.Batch{}
	b.Queue(`
		UPDATE webhook_events SET state = $2, tries = GREATEST(tries, $3), last_status = $4, last_error = $5, last_try_at = $6, next_try_at = $7
		WHERE id = $1 AND state = 'pending'`, ev.id, state, a.attempt, status, class, a.at, next)
	if a.res.ok() && !ev.accepted {
		b.Queue(`UPDATE webhook_endpoints SET accepted_at = $3 WHERE owner_id = $1 AND url = $2 AND accepted_at IS NULL`, ev.owner, *ev.url, a.at)
	}
	if err := s.pool.SendBatch(context.WithoutCancel(ctx), b).Close(); err != nil {
		return fmt.Errorf("webhooks: record attempt: %w", err)
	}
	return nil
}

// newClient is the HTTP client of deliveries: bounded by timeout per
// attempt, never following a redirect (a 3xx is the receiver's answer,
// and a failure), dialling only addresses policy allows (private ones
// only when privateAllowed). A client never serves both kinds of
// webhook: a connection kept idle after an admin's private delivery must
// not carry a client's.
func newClient(timeout time.Duration, policy AddressPolicy, privateAllowed bool) *http.Client {
	d := &dialer{policy: policy, privateAllowed: privateAllowed, net: &net.Dialer{Timeout: timeout}}
	d.net.ControlContext = d.control
	tr := &http.Transport{DialContext: d.dial, TLSHandshakeTimeout: timeout, MaxIdleConnsPerHost: 4,
		IdleConnTimeout: 90 * time.Second, ResponseHeaderTimeout: timeout}
	return &http.Client{Transport: tr, Timeout: timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// dialer resolves a delivery's host with the policy's resolver and dials
// its addresses in turn, each checked by the policy as the socket is
// about to connect (control): what is checked is what is dialled, after
// any resolution, so a name that resolved elsewhere at PUT gains nothing.
type dialer struct {
	policy         AddressPolicy
	privateAllowed bool
	net            *net.Dialer
}

// errUnresolved is a host that resolved to no address.
var errUnresolved = errors.New("webhooks: host did not resolve")

func (d *dialer) dial(ctx context.Context, network, address string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(address)
	if err != nil {
		return nil, err
	}
	var addrs []netip.Addr
	if a, err := netip.ParseAddr(host); err == nil {
		addrs = []netip.Addr{a}
	} else if addrs, err = d.policy.resolver().LookupNetIP(ctx, "ip", host); err != nil {
		return nil, fmt.Errorf("%w: %w", errUnresolved, err)
	}
	if len(addrs) == 0 {
		return nil, errUnresolved
	}
	var first error
	for _, a := range addrs {
		conn, err := d.net.DialContext(ctx, network, net.JoinHostPort(a.String(), port))
		if err == nil {
			return conn, nil
		}
		if first == nil || errors.Is(first, errBlockedAddress) && !errors.Is(err, errBlockedAddress) {
			first = err // a refusal tells less than the failure of an allowed address
		}
		if ctx.Err() != nil {
			break
		}
	}
	return nil, first
}

// control refuses the dial of an address the policy does not allow.
func (d *dialer) control(_ context.Context, _, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return &AddressError{Range: "unreadable"}
	}
	return d.policy.Check(ap.Addr(), d.privateAllowed)
}
