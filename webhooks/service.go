package webhooks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// RotationOverlap is how long deliveries stay signed with the previous
// secret too after a rotation.
const RotationOverlap = 24 * time.Hour

// Sealer seals the stored secrets (seal.Sealer).
type Sealer interface {
	Seal(plain, ad []byte) []byte
	Open(sealed, ad []byte) ([]byte, error)
}

// Metrics counts deliveries by outcome (metrics.Metrics).
type Metrics interface {
	WebhookDelivery(outcome string)
}

// Config are a Service's collaborators and settings. Sealer and Render
// are required.
type Config struct {
	Sealer Sealer
	// Render returns the task's JSON as an event may carry it: as GET
	// /v1/tasks/{id} shows it to its owner, its model output under the
	// owner's privacy policy (tasks.Service.EventView); an error wrapping
	// NotFound when the task is gone.
	Render func(ctx context.Context, owner, taskID string) (json.RawMessage, error)
	// NotFound is the error Render wraps for a task that no longer exists.
	NotFound error
	// Now is the clock of signatures and rotations; default time.Now.
	Now func() time.Time
	// Timeout bounds one delivery attempt; default 10s.
	Timeout time.Duration
	// RetryBase and RetryMax shape the backoff between attempts: RetryBase
	// doubled after each failure, at most RetryMax; defaults 30s and 1h,
	// which with MaxAttempts retry for more than 24 hours.
	RetryBase, RetryMax time.Duration
	// Addresses decides which addresses a webhook may point at, at Put
	// and at every dial of a delivery (TOLLGATE_WEBHOOK_ALLOW).
	Addresses AddressPolicy
	// Workers is how many deliveries this process makes at once; default 10.
	Workers int
	// FetchPoll is how often an idle process looks for deliveries due;
	// default 1s. A delivery may wait that long; the task queues poll far
	// more often, and a 50 ms poll here would cost 20 queries a second on
	// an idle server.
	FetchPoll time.Duration
	// Client replaces the HTTP clients of deliveries (tests), Addresses
	// unchecked at dial time; it must not follow redirects.
	Client  *http.Client
	Metrics Metrics
	Logger  *slog.Logger
}

// Service keeps owners' webhooks and delivers their events.
type Service struct {
	pool *pgxpool.Pool
	cfg  Config
	// client delivers to URLs set without private addresses allowed,
	// privateClient to those an admin key set.
	client, privateClient *http.Client
}

// New returns a Service on pool, or an error when cfg lacks a Sealer or a
// Render.
func New(pool *pgxpool.Pool, cfg Config) (*Service, error) {
	if cfg.Sealer == nil || cfg.Render == nil {
		return nil, errors.New("webhooks: Sealer and Render are required")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Second
	}
	if cfg.RetryBase <= 0 {
		cfg.RetryBase = 30 * time.Second
	}
	if cfg.RetryMax <= 0 {
		cfg.RetryMax = time.Hour
	}
	if cfg.Workers <= 0 {
		cfg.Workers = 10
	}
	if cfg.FetchPoll <= 0 {
		cfg.FetchPoll = time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Metrics == nil {
		cfg.Metrics = noMetrics{}
	}
	s := &Service{pool: pool, cfg: cfg, client: cfg.Client, privateClient: cfg.Client}
	if cfg.Client == nil {
		s.client = newClient(cfg.Timeout, cfg.Addresses, false)
		s.privateClient = newClient(cfg.Timeout, cfg.Addresses, true)
	}
	return s, nil
}

type noMetrics struct{}

func (noMetrics) WebhookDelivery(string) {}

// Endpoint is an owner's webhook. Secret is set only in the answers that
// create or rotate it.
type Endpoint struct {
	OwnerID string   `json:"owner_id"`
	URL     string   `json:"url"`
	Events  []string `json:"events"`
	Secret  string   `json:"secret,omitempty"`
	// PrivateAllowed: an admin key set the URL, so deliveries may reach
	// private addresses (never a cloud metadata one).
	PrivateAllowed bool `json:"private_allowed"`
	// PreviousSecretUntil is when the secret replaced by the last
	// rotation stops signing deliveries; nil when none does.
	PreviousSecretUntil *time.Time `json:"previous_secret_until"`
	CreatedAt           time.Time  `json:"created_at"`
	UpdatedAt           time.Time  `json:"updated_at"`
}

// secretAD binds a sealed secret to its owner's row.
func secretAD(owner string) []byte { return []byte("webhook-secret:" + owner) }

const endpointColumns = `owner_id, url, events, allow_private, previous_until, created_at, updated_at`

func scanEndpoint(row pgx.Row, now time.Time) (Endpoint, error) {
	var e Endpoint
	err := row.Scan(&e.OwnerID, &e.URL, &e.Events, &e.PrivateAllowed, &e.PreviousSecretUntil, &e.CreatedAt, &e.UpdatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return Endpoint{}, ErrNotFound
	}
	if e.PreviousSecretUntil != nil && !e.PreviousSecretUntil.After(now) {
		e.PreviousSecretUntil = nil
	}
	return e, err
}

// PutParams are a webhook to set.
type PutParams struct {
	Owner  string
	URL    string
	Events []string
	// PrivateAllowed: the caller may point the webhook at private
	// addresses (an admin key). It is recorded with the URL, for
	// deliveries to honour.
	PrivateAllowed bool
}

// Put sets the owner's webhook to p's URL and events. A new webhook gets
// a secret, returned in Secret (created true); an existing one keeps its
// secret, which is not returned. It returns a *FieldError for a URL or an
// event it refuses: a URL whose host is, or resolves to, an address
// Config.Addresses refuses for p.PrivateAllowed among them.
func (s *Service) Put(ctx context.Context, p PutParams) (e Endpoint, created bool, err error) {
	if err := checkURL(p.URL); err != nil {
		return Endpoint{}, false, err
	}
	if err := s.checkTarget(ctx, p.URL, p.PrivateAllowed); err != nil {
		return Endpoint{}, false, err
	}
	events, err := checkEvents(p.Events)
	if err != nil {
		return Endpoint{}, false, err
	}
	secret := newSecret()
	// xmax is 0 for a row this statement inserted, not for one it updated.
	// A changed URL has accepted no delivery yet.
	row := s.pool.QueryRow(ctx, `
		INSERT INTO webhook_endpoints (owner_id, url, events, secret_sealed, allow_private, created_at, updated_at)
		VALUES ($1, $2, $3, $4, $5, $6, $6)
		ON CONFLICT (owner_id) DO UPDATE SET url = EXCLUDED.url, events = EXCLUDED.events, allow_private = EXCLUDED.allow_private,
			updated_at = EXCLUDED.updated_at,
			accepted_at = CASE WHEN webhook_endpoints.url = EXCLUDED.url THEN webhook_endpoints.accepted_at END
		RETURNING `+endpointColumns+`, (xmax = 0)`, p.Owner, p.URL, events, s.cfg.Sealer.Seal([]byte(secret), secretAD(p.Owner)), p.PrivateAllowed, s.cfg.Now())
	err = row.Scan(&e.OwnerID, &e.URL, &e.Events, &e.PrivateAllowed, &e.PreviousSecretUntil, &e.CreatedAt, &e.UpdatedAt, &created)
	if err != nil {
		return Endpoint{}, false, fmt.Errorf("webhooks: put: %w", err)
	}
	if e.PreviousSecretUntil != nil && !e.PreviousSecretUntil.After(s.cfg.Now()) {
		e.PreviousSecretUntil = nil
	}
	if created {
		e.Secret = secret
	}
	return e, created, nil
}

// checkTarget returns a FieldError for a URL (checked by checkURL) whose
// host the address policy refuses.
func (s *Service) checkTarget(ctx context.Context, raw string, privateAllowed bool) error {
	u, err := url.Parse(raw)
	if err != nil {
		return &FieldError{Field: "url", Message: "url must be an absolute http or https URL"}
	}
	err = s.cfg.Addresses.CheckHost(ctx, u.Hostname(), privateAllowed)
	var ae *AddressError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ae) && ae.Private:
		return &FieldError{Field: "url", Message: "url's host is or resolves to a " + ae.Range +
			" address: only an admin key may set it, unless the operator allows it (TOLLGATE_WEBHOOK_ALLOW)"}
	case errors.As(err, &ae):
		return &FieldError{Field: "url", Message: "url's host is or resolves to a " + ae.Range + " address, which webhooks may not reach"}
	}
	return err
}

// Get returns the owner's webhook without its secret, or ErrNotFound.
func (s *Service) Get(ctx context.Context, owner string) (Endpoint, error) {
	e, err := scanEndpoint(s.pool.QueryRow(ctx, `SELECT `+endpointColumns+` FROM webhook_endpoints WHERE owner_id = $1`, owner), s.cfg.Now())
	if err != nil && !errors.Is(err, ErrNotFound) {
		return Endpoint{}, fmt.Errorf("webhooks: get: %w", err)
	}
	return e, err
}

// Delete removes the owner's webhook; events not yet delivered are
// dropped. It returns ErrNotFound when there is none.
func (s *Service) Delete(ctx context.Context, owner string) error {
	tag, err := s.pool.Exec(ctx, `DELETE FROM webhook_endpoints WHERE owner_id = $1`, owner)
	if err != nil {
		return fmt.Errorf("webhooks: delete: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return ErrNotFound
	}
	return nil
}

// Rotate gives the owner's webhook a new secret, returned in Secret; the
// replaced one keeps signing deliveries, beside the new one, for
// RotationOverlap. It returns ErrNotFound when there is no webhook.
func (s *Service) Rotate(ctx context.Context, owner string) (Endpoint, error) {
	secret, now := newSecret(), s.cfg.Now()
	e, err := scanEndpoint(s.pool.QueryRow(ctx, `
		UPDATE webhook_endpoints SET previous_sealed = secret_sealed, previous_until = $3, secret_sealed = $2, updated_at = $4
		WHERE owner_id = $1
		RETURNING `+endpointColumns, owner, s.cfg.Sealer.Seal([]byte(secret), secretAD(owner)), now.Add(RotationOverlap), now), now)
	if err != nil {
		if errors.Is(err, ErrNotFound) {
			return Endpoint{}, err
		}
		return Endpoint{}, fmt.Errorf("webhooks: rotate: %w", err)
	}
	e.Secret = secret
	return e, nil
}

// Delivery is one event's delivery as it stands: its attempts so far and
// the next one.
type Delivery struct {
	WebhookID  string     `json:"webhook_id"`
	EventType  string     `json:"event_type"`
	TaskID     string     `json:"task_id"`
	State      string     `json:"state"` // pending, delivered, failed (gave up) or dropped (webhook removed)
	StatusCode *int       `json:"status_code"`
	Error      *string    `json:"error"` // the last failure's class: ClassUnreachable or ClassHTTPStatus (see attemptResult.shown)
	Tries      int        `json:"tries"`
	LastTryAt  *time.Time `json:"last_try_at"`
	NextTryAt  *time.Time `json:"next_try_at"`
	CreatedAt  time.Time  `json:"created_at"`
}

// Deliveries returns the owner's limit most recent events' deliveries,
// newest first.
func (s *Service) Deliveries(ctx context.Context, owner string, limit int) ([]Delivery, error) {
	rows, err := s.pool.Query(ctx, `
		SELECT 'msg_' || replace(id::text, '-', ''), type, task_id::text, state, last_status, last_error, tries, last_try_at, next_try_at, created_at
		FROM webhook_events WHERE owner_id = $1 ORDER BY created_at DESC, id DESC LIMIT $2`, owner, limit)
	if err != nil {
		return nil, fmt.Errorf("webhooks: deliveries: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Delivery, error) {
		var d Delivery
		err := r.Scan(&d.WebhookID, &d.EventType, &d.TaskID, &d.State, &d.StatusCode, &d.Error, &d.Tries, &d.LastTryAt, &d.NextTryAt, &d.CreatedAt)
		return d, err
	})
	if err != nil {
		return nil, fmt.Errorf("webhooks: deliveries: %w", err)
	}
	return out, nil
}

// EventRetention is how long events are kept once no attempt is due
// (delivered, failed or dropped): GET …/webhook/deliveries shows them.
const EventRetention = 30 * 24 * time.Hour

// PurgeEvents deletes the events created before before whose delivery has
// ended, in batches of at most 1000, and returns how many it deleted.
// Pending events stay whatever their age.
func PurgeEvents(ctx context.Context, pool *pgxpool.Pool, before time.Time) (int64, error) {
	var total int64
	for {
		tag, err := pool.Exec(ctx, `
			DELETE FROM webhook_events WHERE id IN (
				SELECT id FROM webhook_events WHERE created_at < $1 AND state <> 'pending' LIMIT 1000)`, before)
		if err != nil {
			return total, fmt.Errorf("webhooks: purge events: %w", err)
		}
		total += tag.RowsAffected()
		if tag.RowsAffected() < 1000 {
			return total, nil
		}
	}
}
