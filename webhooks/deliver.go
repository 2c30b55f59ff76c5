package webhooks

import (
	"bytes"
	"context"
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
// in River's time (the wall clock).
func (w *worker) NextRetry(job *river.Job[DeliveryArgs]) time.Time {
	return time.Now().Add(w.svc.backoff(job.Attempt))
}

// Timeout bounds a job beyond its HTTP attempt: rendering and recording.
func (w *worker) Timeout(*river.Job[DeliveryArgs]) time.Duration {
	return w.svc.cfg.Timeout + 30*time.Second
}

// backoff is the wait after the attempt-th failed attempt.
func (s *Service) backoff(attempt int) time.Duration {
	d := s.cfg.RetryBase
	for i := 1; i < attempt && d < s.cfg.RetryMax; i++ {
		d *= 2
	}
	return min(d, s.cfg.RetryMax)
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
	sealed, previous       []byte
	previousUntil          *time.Time
}

func (s *Service) loadEvent(ctx context.Context, id string) (pendingEvent, error) {
	var ev pendingEvent
	err := s.pool.QueryRow(ctx, `
		SELECT ev.id::text, ev.owner_id, ev.task_id::text, ev.type, ev.created_at, e.url, e.secret_sealed, e.previous_sealed, e.previous_until
		FROM webhook_events ev LEFT JOIN webhook_endpoints e ON e.owner_id = ev.owner_id
		WHERE ev.id = $1 AND ev.state = 'pending'`, id).
		Scan(&ev.id, &ev.owner, &ev.taskID, &ev.typ, &ev.created, &ev.url, &ev.sealed, &ev.previous, &ev.previousUntil)
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
	res := s.post(ctx, *ev.url, webhookID(ev.id), now, sig, body)
	last := attempt >= maxAttempts
	if err := s.record(ctx, ev.id, attempt, res, last); err != nil {
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
	class  string // "" when the receiver answered; timeout, network, blocked_address
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

// post makes one attempt. The receiver's answer is never read beyond
// maxAnswerBytes nor logged.
func (s *Service) post(ctx context.Context, url, id string, at time.Time, sig string, body []byte) attemptResult {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return attemptResult{class: "network"}
	}
	req.Header.Set("content-type", "application/json")
	req.Header.Set("user-agent", "Tollgate-Webhooks/1")
	req.Header.Set("webhook-id", id)
	req.Header.Set("webhook-timestamp", strconv.FormatInt(at.Unix(), 10))
	req.Header.Set("webhook-signature", sig)
	resp, err := s.client.Do(req)
	if err != nil {
		var ne net.Error
		switch {
		case errors.Is(err, errBlockedAddress):
			return attemptResult{class: "blocked_address"}
		case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
			return attemptResult{class: "timeout"}
		}
		return attemptResult{class: "network"}
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxAnswerBytes))
	_ = resp.Body.Close()
	return attemptResult{status: resp.StatusCode}
}

// record notes the attempt-th attempt's result on its event; last: no
// attempt follows a failure.
func (s *Service) record(ctx context.Context, id string, attempt int, r attemptResult, last bool) error {
	state, class := "pending", &r.class
	var next *time.Time
	switch {
	case r.ok():
		state, class = "delivered", nil
	case last:
		state = "failed"
	default:
		n := s.cfg.Now().Add(s.backoff(attempt))
		next = &n
	}
	if r.class == "" && !r.ok() {
		c := "http_status"
		class = &c
	}
	var status *int
	if r.status != 0 {
		status = &r.status
	}
	_, err := s.pool.Exec(context.WithoutCancel(ctx), `
		UPDATE webhook_events SET state = $2, tries = GREATEST(tries, $3), last_status = $4, last_error = $5, last_try_at = $6, next_try_at = $7
		WHERE id = $1 AND state = 'pending'`, id, state, attempt, status, class, s.cfg.Now(), next)
	if err != nil {
		return fmt.Errorf("webhooks: record attempt: %w", err)
	}
	return nil
}

// errBlockedAddress refuses a dial to a link-local address (cloud
// metadata services live there) unless AllowPrivate.
var errBlockedAddress = errors.New("webhooks: address not allowed")

// newClient is the HTTP client of deliveries: bounded by timeout per
// attempt, never following a redirect (a 3xx is the receiver's answer,
// and a failure), and refusing link-local and unspecified addresses at
// dial time, after name resolution, unless allowPrivate.
func newClient(timeout time.Duration, allowPrivate bool) *http.Client {
	dialer := &net.Dialer{Timeout: timeout}
	if !allowPrivate {
		dialer.Control = func(_, address string, _ syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(address)
			if err != nil {
				return errBlockedAddress
			}
			a := ap.Addr().Unmap()
			if a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast() || a.IsUnspecified() || a.IsMulticast() ||
				a == netip.MustParseAddr("fd00:ec2::254") {
				return errBlockedAddress
			}
			return nil
		}
	}
	tr := &http.Transport{DialContext: dialer.DialContext, TLSHandshakeTimeout: timeout, MaxIdleConnsPerHost: 4,
		IdleConnTimeout: 90 * time.Second, ResponseHeaderTimeout: timeout}
	return &http.Client{Transport: tr, Timeout: timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}
