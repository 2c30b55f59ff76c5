package budget

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tollgate/tollgate/internal/logsafe"
)

// DefaultThresholds are the alert thresholds, in percent of a period's
// total spent.
var DefaultThresholds = []int{70, 90}

// Alerter delivers budget alerts: a log line and a metric at once, and a
// POST of the alert as JSON to a webhook, retried with backoff in the
// background so that no request ever waits for it. Alerts not yet
// delivered when a process stops are picked up again by the next Run.
type Alerter struct {
	pool    *pgxpool.Pool
	webhook string
	hc      *http.Client
	log     *slog.Logger
	onFire  func(Alert)
	queue   chan Alert
	retries int
	backoff time.Duration
}

// NewAlerter returns an alerter; webhook "" disables the webhook. onFire,
// if set, is called once per alert (for metrics). The webhook's client
// never follows a redirect (a 3xx is a failed delivery): the webhook URL is
// a secret, and so is where it is allowed to post.
func NewAlerter(pool *pgxpool.Pool, webhook string, hc *http.Client, log *slog.Logger, onFire func(Alert)) *Alerter {
	if hc == nil {
		hc = &http.Client{Timeout: 10 * time.Second}
	}
	noRedirect := *hc
	noRedirect.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	hc = &noRedirect
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Alerter{pool: pool, webhook: webhook, hc: hc, log: log, onFire: onFire,
		queue: make(chan Alert, 1024), retries: 6, backoff: time.Second}
}

// Fire announces alerts that a committed transaction crossed. It never
// blocks: a full delivery queue drops the webhook (the alert stays
// undelivered in the database and the next Run retries it).
func (a *Alerter) Fire(alerts []Alert) {
	if a == nil {
		return
	}
	for _, al := range alerts {
		a.log.Warn("ALERT budget threshold crossed",
			slog.String("owner_id", al.OwnerID), slog.String("workload", al.Workload),
			slog.Time("period_start", al.PeriodStart), slog.Int("threshold_pct", al.ThresholdPct),
			slog.Int64("spent_micros", al.SpentMicros), slog.Int64("total_micros", al.TotalMicros))
		if a.onFire != nil {
			a.onFire(al)
		}
		if a.webhook == "" {
			continue
		}
		select {
		case a.queue <- al:
		default:
			a.log.Warn("budget alert webhook queue full; delivery deferred to the next start")
		}
	}
}

// Run delivers webhooks until ctx ends, starting with alerts left
// undelivered by earlier processes.
func (a *Alerter) Run(ctx context.Context) {
	if a == nil || a.webhook == "" {
		return
	}
	a.requeueUndelivered(ctx)
	for {
		select {
		case <-ctx.Done():
			return
		case al := <-a.queue:
			a.deliver(ctx, al)
		}
	}
}

func (a *Alerter) deliver(ctx context.Context, al Alert) {
	body, _ := json.Marshal(al)
	wait := a.backoff
	for attempt := 1; attempt <= a.retries; attempt++ {
		err := a.post(ctx, body)
		_, _ = a.pool.Exec(ctx, `
			UPDATE budget_alerts SET attempts = attempts + 1, delivered_at = CASE WHEN $4 THEN now() END
			WHERE threshold_pct = $5 AND budget_period_id = (SELECT id FROM `+balanceRowByKey+`)`,
			al.OwnerID, al.Workload, al.PeriodStart, err == nil, al.ThresholdPct)
		if err == nil {
			return
		}
		// The error quotes the webhook URL, a secret: logsafe keeps its host.
		a.log.Warn("budget alert webhook failed; retrying", slog.Int("attempt", attempt), logsafe.ErrorAttr(err))
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = min(wait*2, time.Minute)
	}
}

func (a *Alerter) post(ctx context.Context, body []byte) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.webhook, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := a.hc.Do(req)
	if err != nil {
		return err
	}
	res.Body.Close()
	if res.StatusCode >= 300 {
		return fmt.Errorf("webhook answered %d", res.StatusCode)
	}
	return nil
}

func (a *Alerter) requeueUndelivered(ctx context.Context) {
	rows, err := a.pool.Query(ctx, `
		SELECT p.owner_id, p.workload, p.period_start, al.threshold_pct, p.spent_micros, p.total_micros
		FROM budget_alerts al JOIN budget_periods p ON p.id = al.budget_period_id
		WHERE al.delivered_at IS NULL AND al.attempts < $1 AND al.fired_at > now() - interval '7 days'`, a.retries)
	if err != nil {
		a.log.Warn("budget alerts: cannot read undelivered alerts", slog.String("error", err.Error()))
		return
	}
	defer rows.Close()
	for rows.Next() {
		var al Alert
		if rows.Scan(&al.OwnerID, &al.Workload, &al.PeriodStart, &al.ThresholdPct, &al.SpentMicros, &al.TotalMicros) == nil {
			select {
			case a.queue <- al:
			default:
			}
		}
	}
}
