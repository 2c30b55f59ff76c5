// Package metrics owns Tollgate's Prometheus metrics: what operators watch
// and alert on.
//
// Every label value comes from a closed set (routes, statuses, provider
// keys and models from the configuration, failure classes), never from
// client input, so cardinality stays bounded and nothing a client sends,
// let alone a prompt or a key, can reach a label. All methods are safe on a
// nil *Metrics, so code paths can record unconditionally.
package metrics

import (
	"context"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/tollgate/tollgate/status"
)

// Metrics holds the collectors.
type Metrics struct {
	Registry *prometheus.Registry

	httpRequests     *prometheus.CounterVec
	httpLatency      *prometheus.HistogramVec
	providerCalls    *prometheus.CounterVec
	unclassified     *prometheus.CounterVec
	upstreamLatency  *prometheus.HistogramVec
	tasksFinished    *prometheus.CounterVec
	taskLatency      *prometheus.HistogramVec
	breakerOpened    *prometheus.CounterVec
	tasksCreated     *prometheus.CounterVec
	orphans          prometheus.Counter
	implausible      *prometheus.CounterVec
	fallbacks        *prometheus.CounterVec
	budgetAlerts     *prometheus.CounterVec
	recordedTogether prometheus.Histogram
	admittedTogether prometheus.Histogram
	ranOnArrival     prometheus.Counter
	shed             *prometheus.CounterVec
	admitting        prometheus.Gauge
	queueWait        *prometheus.GaugeVec
	rateLimited      *prometheus.CounterVec
	webhookDelivered *prometheus.CounterVec
	spent            *prometheus.CounterVec

	spendOwnersMu sync.Mutex
	spendOwners   map[string]bool // the owners with a spend series of their own, at most MaxSpendOwners
}

// MaxSpendOwners bounds the owner label of tollgate_spend_micros_total:
// the first MaxSpendOwners owners a process sees settle get a series of
// their own, any later one counts under "other". Owners are an admin's ids,
// never a client's input, but an installation may hold thousands; the
// bound keeps a scrape small whatever it holds, and /v1/usage answers
// for every owner.
const MaxSpendOwners = 100

// New registers every collector on a fresh registry, with Go runtime and
// process metrics.
func New() *Metrics {
	r := prometheus.NewRegistry()
	m := &Metrics{
		Registry: r,
		httpRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tollgate_http_requests_total", Help: "HTTP requests by route, method and status code.",
		}, []string{"route", "method", "status"}),
		providerCalls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tollgate_provider_calls_total", Help: "Provider calls by provider key, model and outcome class (success or a failure class).",
		}, []string{"provider_key", "model", "class"}),
		unclassified: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tollgate_provider_unclassified_errors_total", Help: "Provider errors no code or message rule recognised (classified by status alone). Anything above zero deserves a look.",
		}, []string{"provider_key", "status"}),
		// Fine below 50 ms, where admission's objectives are (a POST's
		// p99 under 25 ms): a quantile is interpolated within a bucket.
		httpLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "tollgate_http_request_seconds", Help: "Time from a request's routing to its answer written, by route pattern and method. Long polls (Prefer: wait) count their wait.",
			Buckets: []float64{.001, .002, .005, .01, .015, .02, .025, .035, .05, .075, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
		}, []string{"route", "method"}),
		upstreamLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "tollgate_provider_call_seconds", Help: "Latency of provider calls.",
			Buckets: []float64{.05, .1, .25, .5, 1, 2, 5, 10, 20, 30, 60, 120},
		}, []string{"provider_key"}),
		tasksFinished: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tollgate_tasks_finished_total", Help: "Finished tasks by final status and failure code.",
		}, []string{"status", "code"}),
		taskLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "tollgate_task_seconds", Help: "End-to-end task latency, creation to finish.",
			Buckets: []float64{.1, .25, .5, 1, 2, 5, 10, 30, 60, 300, 900, 3600},
		}, []string{"status"}),
		breakerOpened: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tollgate_breaker_opened_total", Help: "Times a provider key's circuit breaker opened (account exhausted).",
		}, []string{"provider_key"}),
		tasksCreated: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tollgate_tasks_created_total", Help: "Task submissions by outcome: created, replayed, conflict, budget_exceeded, rate_limited, overloaded, failure_replayed.",
		}, []string{"outcome"}),
		fallbacks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tollgate_fallbacks_total", Help: "Route answers a guard substituted with the fallback, by route, guard and reason. Kept apart from 5xx: a fallback is an answer.",
		}, []string{"route", "guard", "reason"}),
		orphans: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tollgate_budget_orphans_reaped_total", Help: "Reservations the reaper had to close: held by finished tasks or tasks long past their deadline. Any is a bug to look at.",
		}),
		implausible: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tollgate_usage_implausible_total", Help: "Provider answers whose usage report the request rules out (output beyond the output limit sent times n, input far beyond what the request holds) or beyond any sane bound (budget.MaxUsageTokens a figure), by provider key: charged at most the reservation, the rest recorded as shortfall, the attempt flagged in its journal. Any is a provider to look at.",
		}, []string{"provider_key"}),
		budgetAlerts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tollgate_budget_alerts_total", Help: "Budget threshold alerts fired, by threshold percent.",
		}, []string{"threshold_pct"}),
		recordedTogether: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "tollgate_success_batch_tasks", Help: "Succeeded tasks of one owner recorded and settled in one transaction. Batches grow with load: they are how one owner's budget row keeps up.",
			Buckets: []float64{1, 2, 4, 8, 16, 32, 64},
		}),
		admittedTogether: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "tollgate_admission_batch_tasks", Help: "New tasks of one owner admitted (row, job, reservation) in one transaction. Batches grow with load.",
			Buckets: []float64{1, 2, 4, 8, 16, 32, 64},
		}),
		ranOnArrival: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tollgate_runs_on_arrival_total", Help: "First attempts run by the admitting process right after admission, without waiting for the queue. The rest of tollgate_tasks_created_total took the queue (slots full, gate not closed, API-only instance).",
		}),
		shed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tollgate_tasks_shed_total", Help: "New tasks refused with 503 overloaded, by the bound that refused them: admissions (TOLLGATE_MAX_ADMITTING in progress in this process) or queue (the provider queue's wait past TOLLGATE_SHED_QUEUE_WAIT_S).",
		}, []string{"reason"}),
		admitting: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "tollgate_admissions_in_progress", Help: "Task admissions this process has in progress, the figure TOLLGATE_MAX_ADMITTING bounds.",
		}),
		queueWait: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "tollgate_queue_wait_seconds", Help: "How long the next task each provider key's queue hands out has been due, as this process last read it (every second): the figure TOLLGATE_SHED_QUEUE_WAIT_S bounds.",
		}, []string{"provider_key"}),
		rateLimited: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tollgate_rate_limited_total", Help: "New tasks refused with 429 rate_limited by a requests- or tokens-per-minute limit, by owner and the key's workload (\"\" for none). Only owners and workloads an admin created appear.",
		}, []string{"owner_id", "workload"}),
		webhookDelivered: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tollgate_webhook_deliveries_total", Help: "Webhook delivery attempts by outcome: delivered, http_status (a non-2xx answer, redirects included), timeout, dns, tls, network, blocked_address (an address the webhook policy refuses), dropped (the webhook was removed).",
		}, []string{"outcome"}),
		spent: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tollgate_spend_micros_total", Help: "Settled cost in micros (charged and shortfall, as usage_records.cost_micros), counted once per settlement after it commits, by owner and model. model is a priced catalog model or \"other\"; owner_id is one of the first 100 owners this process saw settle, or \"other\".",
		}, []string{"owner_id", "model"}),
		spendOwners: map[string]bool{},
	}
	// Alert series exist from the start, so increase() sees the first one.
	for _, pct := range []string{"70", "90"} {
		m.budgetAlerts.WithLabelValues(pct)
	}
	for _, reason := range []string{"admissions", "queue"} {
		m.shed.WithLabelValues(reason)
	}
	r.MustRegister(m.httpRequests, m.httpLatency, m.providerCalls, m.unclassified, m.upstreamLatency, m.tasksFinished,
		m.taskLatency, m.breakerOpened, m.tasksCreated, m.orphans, m.implausible, m.budgetAlerts, m.fallbacks,
		m.recordedTogether, m.admittedTogether, m.ranOnArrival, m.shed, m.admitting, m.queueWait, m.rateLimited, m.webhookDelivered,
		m.spent, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// HTTPRequest counts one request that took d. route is the route pattern,
// never the raw path.
func (m *Metrics) HTTPRequest(route, method string, status int, d time.Duration) {
	if m == nil {
		return
	}
	m.httpRequests.WithLabelValues(route, method, strconv.Itoa(status)).Inc()
	m.httpLatency.WithLabelValues(route, method).Observe(d.Seconds())
}

// ProviderCall records one provider call. class is "success" or a failure
// class; model must be a configured model name or "other".
func (m *Metrics) ProviderCall(providerKey, model, class string, unclassified bool, status int, latency time.Duration) {
	if m == nil {
		return
	}
	m.providerCalls.WithLabelValues(providerKey, model, class).Inc()
	m.upstreamLatency.WithLabelValues(providerKey).Observe(latency.Seconds())
	if unclassified {
		m.unclassified.WithLabelValues(providerKey, strconv.Itoa(status)).Inc()
	}
}

// TaskFinished records a task's end.
func (m *Metrics) TaskFinished(status, code string, age time.Duration) {
	if m == nil {
		return
	}
	m.tasksFinished.WithLabelValues(status, code).Inc()
	m.taskLatency.WithLabelValues(status).Observe(age.Seconds())
}

// TaskSubmitted records a POST's outcome.
func (m *Metrics) TaskSubmitted(outcome string) {
	if m == nil {
		return
	}
	m.tasksCreated.WithLabelValues(outcome).Inc()
}

// RateLimited counts one admission a rate limit refused. owner and
// workload come from the API key (an admin's ids), never from the request.
func (m *Metrics) RateLimited(owner, workload string) {
	if m == nil {
		return
	}
	m.rateLimited.WithLabelValues(owner, workload).Inc()
}

// Spent counts a committed settlement's cost, micros, for owner (an
// admin's id) on model (a priced catalog model or "other"). Past
// MaxSpendOwners distinct owners, a new owner counts as "other".
func (m *Metrics) Spent(owner, model string, micros int64) {
	if m == nil || micros <= 0 {
		return
	}
	m.spent.WithLabelValues(m.spendOwner(owner), model).Add(float64(micros))
}

// spendOwner is owner's label: its own while it is one of the first
// MaxSpendOwners owners seen, "other" after.
func (m *Metrics) spendOwner(owner string) string {
	m.spendOwnersMu.Lock()
	defer m.spendOwnersMu.Unlock()
	if m.spendOwners[owner] {
		return owner
	}
	if len(m.spendOwners) >= MaxSpendOwners {
		return "other"
	}
	m.spendOwners[owner] = true
	return owner
}

// Shed counts a new task refused as overloaded; reason is the bound
// (admissions or queue).
func (m *Metrics) Shed(reason string) {
	if m == nil {
		return
	}
	m.shed.WithLabelValues(reason).Inc()
}

// Admitting adds delta to the admissions in progress.
func (m *Metrics) Admitting(delta int) {
	if m == nil {
		return
	}
	m.admitting.Add(float64(delta))
}

// QueueWait records the wait last read of a provider key's queue.
func (m *Metrics) QueueWait(providerKey string, d time.Duration) {
	if m == nil {
		return
	}
	m.queueWait.WithLabelValues(providerKey).Set(d.Seconds())
}

// BreakerOpened records a breaker opening.
func (m *Metrics) BreakerOpened(providerKey string) {
	if m == nil {
		return
	}
	m.breakerOpened.WithLabelValues(providerKey).Inc()
}

// Fallback counts a route answer a guard substituted. route comes from the
// configuration; guard and reason from closed sets.
func (m *Metrics) Fallback(route, guard, reason string) {
	if m == nil {
		return
	}
	m.fallbacks.WithLabelValues(route, guard, reason).Inc()
}

// RecordedTogether observes a transaction that recorded n succeeded tasks.
func (m *Metrics) RecordedTogether(n int) {
	if m == nil {
		return
	}
	m.recordedTogether.Observe(float64(n))
}

// AdmittedTogether observes a transaction that admitted n new tasks.
func (m *Metrics) AdmittedTogether(n int) {
	if m == nil {
		return
	}
	m.admittedTogether.Observe(float64(n))
}

// RanOnArrival counts a first attempt run on arrival.
func (m *Metrics) RanOnArrival() {
	if m == nil {
		return
	}
	m.ranOnArrival.Inc()
}

// OrphanReaped counts a reservation the reaper closed.
func (m *Metrics) OrphanReaped() {
	if m == nil {
		return
	}
	m.orphans.Inc()
}

// ImplausibleUsage counts an answer of providerKey whose usage report was
// beyond any sane bound.
func (m *Metrics) ImplausibleUsage(providerKey string) {
	if m == nil {
		return
	}
	m.implausible.WithLabelValues(providerKey).Inc()
}

// BudgetAlert counts a fired budget alert.
func (m *Metrics) BudgetAlert(thresholdPct int) {
	if m == nil {
		return
	}
	m.budgetAlerts.WithLabelValues(strconv.Itoa(thresholdPct)).Inc()
}

// WebhookDelivery counts one webhook delivery attempt by outcome; the
// owner and URL are never labels.
func (m *Metrics) WebhookDelivery(outcome string) {
	if m == nil {
		return
	}
	m.webhookDelivered.WithLabelValues(outcome).Inc()
}

// WatchDatabase adds gauges read from the database at scrape time: queue
// depth and oldest unfinished task per provider key, and each key's gate
// state. Reading at scrape time keeps them right across every instance
// sharing the database. providerKeys are the catalog's: each has its
// series, 0 when idle, and a key no longer in the catalog has none.
func (m *Metrics) WatchDatabase(pool *pgxpool.Pool, log *slog.Logger, providerKeys []string) {
	if providerKeys == nil {
		providerKeys = []string{}
	}
	m.Registry.MustRegister(&dbCollector{pool: pool, log: log, keys: providerKeys}, &poolCollector{pool: pool})
}

var (
	poolConnsDesc = prometheus.NewDesc("tollgate_db_pool_connections",
		"This process's PostgreSQL connections by state: in_use, idle, constructing.", []string{"state"}, nil)
	poolMaxDesc = prometheus.NewDesc("tollgate_db_pool_max_connections",
		"The most connections this process's pool opens (pool_max_conns in DATABASE_URL).", nil, nil)
	poolAcquiresDesc = prometheus.NewDesc("tollgate_db_pool_acquires_total",
		"Connections taken from the pool.", nil, nil)
	poolWaitsDesc = prometheus.NewDesc("tollgate_db_pool_waits_total",
		"Connections taken from the pool after waiting for one to be given back or opened, none being idle: a pool too small for the load, or statements held up.", nil, nil)
	poolWaitSecondsDesc = prometheus.NewDesc("tollgate_db_pool_wait_seconds_total",
		"Time spent waiting for a connection to be given back or opened, none being idle.", nil, nil)
	poolCanceledDesc = prometheus.NewDesc("tollgate_db_pool_canceled_acquires_total",
		"Waits for a connection that ended with the request's context (canceled or timed out).", nil, nil)
)

// poolCollector reads the process's own connection pool at scrape time:
// whether requests wait for a connection, and for how long, is the first
// question when latency rises with load. Per instance (unlike the
// database gauges): aggregate with sum.
type poolCollector struct{ pool *pgxpool.Pool }

func (c *poolCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{poolConnsDesc, poolMaxDesc, poolAcquiresDesc, poolWaitsDesc, poolWaitSecondsDesc, poolCanceledDesc} {
		ch <- d
	}
}

func (c *poolCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.pool.Stat()
	ch <- prometheus.MustNewConstMetric(poolConnsDesc, prometheus.GaugeValue, float64(s.AcquiredConns()), "in_use")
	ch <- prometheus.MustNewConstMetric(poolConnsDesc, prometheus.GaugeValue, float64(s.IdleConns()), "idle")
	ch <- prometheus.MustNewConstMetric(poolConnsDesc, prometheus.GaugeValue, float64(s.ConstructingConns()), "constructing")
	ch <- prometheus.MustNewConstMetric(poolMaxDesc, prometheus.GaugeValue, float64(s.MaxConns()))
	ch <- prometheus.MustNewConstMetric(poolAcquiresDesc, prometheus.CounterValue, float64(s.AcquireCount()))
	ch <- prometheus.MustNewConstMetric(poolWaitsDesc, prometheus.CounterValue, float64(s.EmptyAcquireCount()))
	ch <- prometheus.MustNewConstMetric(poolWaitSecondsDesc, prometheus.CounterValue, s.EmptyAcquireWaitTime().Seconds())
	ch <- prometheus.MustNewConstMetric(poolCanceledDesc, prometheus.CounterValue, float64(s.CanceledAcquireCount()))
}

var (
	queueDepthDesc = prometheus.NewDesc("tollgate_queue_depth", "Unfinished tasks per provider key: waiting (queued, snoozed, retrying) or running, first attempts running on arrival included. 0 when idle.", []string{"provider_key"}, nil)
	oldestDesc     = prometheus.NewDesc("tollgate_queue_oldest_seconds", "Age of the oldest unfinished task per provider key; 0 when there is none.", []string{"provider_key"}, nil)
	budgetDesc     = prometheus.NewDesc("tollgate_budget_used_ratio", "(reserved + spent) / total of the current period, for the 20 fullest budgets (bounded cardinality).", []string{"owner_id", "workload"}, nil)
	gateDesc       = prometheus.NewDesc("tollgate_provider_key_state", "Gate state per provider key: 1 for the current state (closed, paused, open, idle), 0 for the others. idle is an open breaker whose probe is due with no task waiting: the next task's call probes it.", []string{"provider_key", "state"}, nil)
)

// gateStates are the states tollgate_provider_key_state reports.
var gateStates = []string{"closed", "paused", "open", "idle"}

type dbCollector struct {
	pool *pgxpool.Pool
	log  *slog.Logger
	keys []string
}

func (c *dbCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- queueDepthDesc
	ch <- oldestDesc
	ch <- gateDesc
	ch <- budgetDesc
}

func (c *dbCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	p, err := status.CollectProviders(ctx, c.pool, c.keys)
	if err != nil {
		c.log.Warn("metrics: provider queues and gates query failed", slog.String("error", err.Error()))
		return
	}
	for _, q := range p.Queues {
		key, ok := strings.CutPrefix(q.Name, status.QueuePrefix)
		if !ok {
			continue
		}
		oldest := 0.0
		if q.Depth() > 0 {
			oldest = q.OldestSeconds
		}
		ch <- prometheus.MustNewConstMetric(queueDepthDesc, prometheus.GaugeValue, float64(q.Depth()), key)
		ch <- prometheus.MustNewConstMetric(oldestDesc, prometheus.GaugeValue, oldest, key)
	}
	for _, g := range p.Gates {
		for _, s := range gateStates {
			v := 0.0
			if s == g.State {
				v = 1
			}
			ch <- prometheus.MustNewConstMetric(gateDesc, prometheus.GaugeValue, v, g.ProviderKey, s)
		}
	}
	rows, err := c.pool.Query(ctx, `
		SELECT owner_id, workload, (reserved_micros::float8 + spent_micros) / total_micros
		FROM (SELECT DISTINCT ON (owner_id, workload) * FROM budget_periods
		      ORDER BY owner_id, workload, period_start DESC) p
		WHERE total_micros > 0
		ORDER BY 3 DESC LIMIT 20`)
	if err != nil {
		return
	}
	defer rows.Close()
	for rows.Next() {
		var owner, workload string
		var used float64
		if rows.Scan(&owner, &workload, &used) == nil {
			ch <- prometheus.MustNewConstMetric(budgetDesc, prometheus.GaugeValue, used, owner, workload)
		}
	}
}
