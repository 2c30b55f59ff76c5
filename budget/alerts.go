package budget

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tollgate/tollgate/internal/logsafe"
)

// DefaultThresholds are the alert thresholds, in percent of a period's
// total spent.
var DefaultThresholds = []int{70, 90}

// The alert webhook's schedule (docs/operations.md): AlertAttempts tries,
// waiting AlertBackoff after the first failure, doubled after each, at
// most AlertBackoffMax.
const (
	AlertAttempts   = 6
	AlertBackoff    = time.Second
	AlertBackoffMax = time.Minute
)

// Sender delivers one alert to the operator's webhook (webhooks.Hook,
// retried as AlertAttempts, AlertBackoff and AlertBackoffMax say): body
// as message id, calling attempted after each try with nil (delivered)
// or the failure, which never quotes the URL. It returns once delivered,
// out of tries, or when ctx ends.
type Sender interface {
	Send(ctx context.Context, id string, body []byte, attempted func(attempt int, err error))
}

// Alerter delivers budget alerts: a log line and a metric at once, and a
// POST of the alert as JSON to a webhook, retried in the background so
// that no request ever waits for it. Alerts not yet delivered when a
// process stops are picked up again by the next Run.
type Alerter struct {
	pool   *pgxpool.Pool
	send   Sender
	log    *slog.Logger
	onFire func(Alert)
	queue  chan Alert
}

// NewAlerter returns an alerter whose webhook send delivers; nil
// disables the webhook. onFire, if set, is called once per alert (for
// metrics).
func NewAlerter(pool *pgxpool.Pool, send Sender, log *slog.Logger, onFire func(Alert)) *Alerter {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Alerter{pool: pool, send: send, log: log, onFire: onFire, queue: make(chan Alert, 1024)}
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
		if a.send == nil {
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
	if a == nil || a.send == nil {
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
	a.send.Send(ctx, alertID(al), body, func(attempt int, err error) {
		_, _ = a.pool.Exec(ctx, `
			UPDATE budget_alerts SET attempts = attempts + 1, delivered_at = CASE WHEN $4 THEN now() END
			WHERE threshold_pct = $5 AND budget_period_id = (SELECT id FROM `+balanceRowByKey+`)`,
			al.OwnerID, al.Workload, al.PeriodStart, err == nil, al.ThresholdPct)
		if err != nil {
			a.log.Warn("budget alert webhook failed", slog.Int("attempt", attempt), slog.Bool("gave_up", attempt >= AlertAttempts),
				logsafe.ErrorAttr(err))
		}
	})
}

// alertID is the alert's webhook-id: the same for every try of it, in
// every process, so that a receiver can drop a repeat.
func alertID(al Alert) string {
	h := sha256.Sum256([]byte(fmt.Sprintf("%s\x00%s\x00%s\x00%d", al.OwnerID, al.Workload, al.PeriodStart.UTC().Format(time.RFC3339Nano), al.ThresholdPct)))
	return "msg_alert_" + hex.EncodeToString(h[:16])
}

func (a *Alerter) requeueUndelivered(ctx context.Context) {
	rows, err := a.pool.Query(ctx, `
		SELECT p.owner_id, p.workload, p.period_start, al.threshold_pct, p.spent_micros, p.total_micros
		FROM budget_alerts al JOIN budget_periods p ON p.id = al.budget_period_id
		WHERE al.delivered_at IS NULL AND al.attempts < $1 AND al.fired_at > now() - interval '7 days'`, AlertAttempts)
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
