package status

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// NearLimitPct is the share of a period's total, reserved plus spent, from
// which a budget is reported as near its limit: the first budget alert
// threshold.
const NearLimitPct = 70

// MaxBudgets caps the budgets reported, fullest first, and MaxWaiting the
// waiting tasks, oldest first: a glance, not a report.
const (
	MaxBudgets = 50
	MaxWaiting = 10
)

// Querier is what Collect reads through: a *pgxpool.Pool, a *pgx.Conn, or
// a pgx.Tx when the caller wants all sections from one snapshot.
type Querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Report is the state of the whole fleet at one moment. Ages are measured
// on the database's clock, from At.
type Report struct {
	At      time.Time `json:"at"`
	Queues  []Queue   `json:"queues"`
	Gates   []Gate    `json:"gates"`
	Budgets []Budget  `json:"budgets"`
	Oldest  []Waiting `json:"oldest"`
}

// Queue is one River queue: each provider key has its own
// (provider_<key>), plus the maintenance queue. Counts are of jobs in each
// unfinished state; OldestSeconds is the age of the oldest of them, 0 when
// there are none. RunningInline counts the tasks whose attempt runs in the
// process that admitted them (a first attempt on arrival, or a stream):
// their jobs are scheduled safety nets, left out of Scheduled, which holds
// the jobs waiting for a later time (a retry's backoff, a long snooze).
type Queue struct {
	Name          string  `json:"name" db:"name"`
	Available     int64   `json:"available" db:"available"`
	Scheduled     int64   `json:"scheduled" db:"scheduled"`
	Running       int64   `json:"running" db:"running"`
	RunningInline int64   `json:"running_inline" db:"running_inline"`
	Retryable     int64   `json:"retryable" db:"retryable"`
	OldestSeconds float64 `json:"oldest_seconds" db:"oldest_seconds"`
	// DueWaitSeconds is how long the longest-due available job has waited
	// for a worker: how far behind the workers are, and what
	// TOLLGATE_SHED_QUEUE_WAIT_S compares against. 0 when none is due.
	DueWaitSeconds float64 `json:"due_wait_seconds" db:"due_wait_seconds"`
}

// Gate is a provider key's throttle pause and circuit breaker, as every
// instance obeys them. State is closed, paused, open or idle: idle is an
// open breaker whose probe is due with no task waiting on the key (the
// next task's call probes it); it has no NextProbeAt. A key that has never
// been paused or opened has no row: listed closed when the catalog names
// it, not listed otherwise.
type Gate struct {
	ProviderKey string     `json:"provider_key" db:"provider_key"`
	State       string     `json:"state" db:"state"`
	PausedUntil *time.Time `json:"paused_until" db:"paused_until"`
	NextProbeAt *time.Time `json:"next_probe_at" db:"next_probe_at"`
	OpenedAt    *time.Time `json:"opened_at" db:"opened_at"`
	ReasonClass *string    `json:"reason_class" db:"reason_class"`
	ReasonCode  *string    `json:"reason_code" db:"reason_code"`
}

// Budget is a budget's current period when reserved plus spent money is
// at least NearLimitPct of its total. UsedPct counts reserved money too,
// because admission does: a budget at 100 % refuses new tasks even before
// the running ones settle. A budget whose total is 0 admits nothing and
// reads 100 %. Workload is "" for the owner's own cap.
type Budget struct {
	OwnerID        string    `json:"owner_id" db:"owner_id"`
	Workload       string    `json:"workload" db:"workload"`
	Period         string    `json:"period" db:"period"`
	PeriodStart    time.Time `json:"period_start" db:"period_start"`
	TotalMicros    int64     `json:"total_micros" db:"total_micros"`
	ReservedMicros int64     `json:"reserved_micros" db:"reserved_micros"`
	SpentMicros    int64     `json:"spent_micros" db:"spent_micros"`
	UsedPct        float64   `json:"used_pct" db:"used_pct"`
}

// Waiting is an unfinished task. WaitingFor is, for a queued task held
// back by its provider key's gate, the failure class it waits out
// (throttled, exhausted); nil when it is simply next in line or running.
type Waiting struct {
	TaskID     string    `json:"task_id" db:"task_id"`
	OwnerID    string    `json:"owner_id" db:"owner_id"`
	Model      string    `json:"model" db:"model"`
	Status     string    `json:"status" db:"status"`
	CreatedAt  time.Time `json:"created_at" db:"created_at"`
	AgeSeconds float64   `json:"age_seconds" db:"age_seconds"`
	WaitingFor *string   `json:"waiting_for" db:"waiting_for"`
}

// Collect reads the report. keys are the provider keys of the current
// catalog: queues and gates of other keys (removed from the catalog, left
// in the database) are dropped, and a key in keys with no queue or gate
// row yet reports an empty queue and a closed gate. nil keys reports every
// key the database holds, for a reader without the catalog. It returns an
// error, naming the section, when a query fails; it never returns part of
// a report. Each section is one statement: pass a pgx.Tx (REPEATABLE
// READ, read only) for one snapshot.
func Collect(ctx context.Context, q Querier, keys []string) (Report, error) {
	p, err := CollectProviders(ctx, q, keys)
	if err != nil {
		return Report{}, err
	}
	r := Report{At: p.At, Queues: p.Queues, Gates: p.Gates}
	if r.Budgets, err = collect[Budget](ctx, q, budgetsSQL, r.At, NearLimitPct, MaxBudgets); err != nil {
		return Report{}, fmt.Errorf("status: budgets: %w", err)
	}
	if r.Oldest, err = collect[Waiting](ctx, q, waitingSQL, r.At, MaxWaiting); err != nil {
		return Report{}, fmt.Errorf("status: waiting tasks: %w", err)
	}
	return r, nil
}

// Providers is the provider keys' part of a report: what the metrics
// export at each scrape.
type Providers struct {
	At     time.Time
	Queues []Queue
	Gates  []Gate
}

// CollectProviders reads the queues and gates as Collect does, keys
// meaning the same.
func CollectProviders(ctx context.Context, q Querier, keys []string) (Providers, error) {
	var p Providers
	if err := q.QueryRow(ctx, `SELECT now()`).Scan(&p.At); err != nil {
		return Providers{}, fmt.Errorf("status: %w", err)
	}
	var err error
	if p.Queues, err = collect[Queue](ctx, q, queuesSQL, p.At); err != nil {
		return Providers{}, fmt.Errorf("status: queues: %w", err)
	}
	if p.Gates, err = collect[Gate](ctx, q, gatesSQL, p.At); err != nil {
		return Providers{}, fmt.Errorf("status: gates: %w", err)
	}
	if keys != nil {
		p.Queues, p.Gates = onlyKeys(p.Queues, p.Gates, keys)
	}
	return p, nil
}

// QueuePrefix starts the name of each provider key's River queue.
const QueuePrefix = "provider_"

// onlyKeys keeps the queues and gates of keys (and the queues of no
// provider key, such as maintenance), adding an empty queue and a closed
// gate for a key without one, in name order.
func onlyKeys(queues []Queue, gates []Gate, keys []string) ([]Queue, []Gate) {
	known := make(map[string]bool, len(keys))
	for _, k := range keys {
		known[k] = true
	}
	qs, gs := make([]Queue, 0, len(queues)+len(keys)), make([]Gate, 0, len(keys))
	seenQ, seenG := map[string]bool{}, map[string]bool{}
	for _, q := range queues {
		if key, ok := strings.CutPrefix(q.Name, QueuePrefix); ok {
			if !known[key] {
				continue
			}
			seenQ[key] = true
		}
		qs = append(qs, q)
	}
	for _, g := range gates {
		if known[g.ProviderKey] {
			seenG[g.ProviderKey] = true
			gs = append(gs, g)
		}
	}
	for _, k := range keys {
		if !seenQ[k] {
			qs = append(qs, Queue{Name: QueuePrefix + k})
		}
		if !seenG[k] {
			gs = append(gs, Gate{ProviderKey: k, State: "closed"})
		}
	}
	slices.SortFunc(qs, func(a, b Queue) int { return strings.Compare(a.Name, b.Name) })
	slices.SortFunc(gs, func(a, b Gate) int { return strings.Compare(a.ProviderKey, b.ProviderKey) })
	return qs, gs
}

// Depth is the queue's unfinished tasks: waiting (available, scheduled,
// retryable) or running, a run on arrival included.
func (q Queue) Depth() int64 {
	return q.Available + q.Scheduled + q.Running + q.RunningInline + q.Retryable
}

func collect[T any](ctx context.Context, q Querier, sql string, args ...any) ([]T, error) {
	rows, err := q.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowToStructByName[T])
}

// queuesSQL lists every queue River knows (river_queue) or holds
// unfinished jobs in, so an idle provider queue shows as zeros. It reads
// river_job through its (state, queue, ...) index. A scheduled job is an
// inline run's safety net when its task, found by the id in its args (the
// primary key), is stored running with this job: a River run stores its
// task running only while its job runs or waits to retry a run that could
// not record, never while the job is scheduled (a snooze stores the task
// queued). A run on arrival has no job until it needs one: it is a task
// stored running with none, found through the held reservations' partial
// index and counted on the queue of its attempt's provider key.
const queuesSQL = `
	WITH unfinished AS (
		SELECT queue, state, created_at, scheduled_at,
		       state = 'scheduled' AND kind = 'tollgate_task' AND EXISTS (
		           SELECT 1 FROM tasks t
		           WHERE t.id = (river_job.args->>'task_id')::uuid AND t.job_id = river_job.id AND t.status = 'running') AS inline
		FROM river_job
		WHERE state IN ('available', 'scheduled', 'running', 'retryable')
	), jobs AS (
		SELECT queue,
		       count(*) FILTER (WHERE state = 'available') AS available,
		       count(*) FILTER (WHERE state = 'scheduled' AND NOT inline) AS scheduled,
		       count(*) FILTER (WHERE state = 'running')   AS running,
		       count(*) FILTER (WHERE inline)              AS running_inline,
		       count(*) FILTER (WHERE state = 'retryable') AS retryable,
		       min(created_at) AS oldest,
		       min(scheduled_at) FILTER (WHERE state = 'available') AS due
		FROM unfinished
		GROUP BY queue
	), arrivals AS (
		SELECT 'provider_' || (SELECT a.provider_key FROM task_attempts a WHERE a.task_id = t.id ORDER BY a.attempt DESC LIMIT 1) AS queue,
		       count(*) AS n, min(t.created_at) AS oldest
		FROM budget_reservations r JOIN tasks t ON t.id = r.task_id
		WHERE r.state = 'held' AND t.status = 'running' AND t.job_id IS NULL
		GROUP BY 1
	)
	SELECT COALESCE(j.queue, q.name, a.queue) AS name,
	       COALESCE(j.available, 0) AS available,
	       COALESCE(j.scheduled, 0) AS scheduled,
	       COALESCE(j.running, 0) AS running,
	       COALESCE(j.running_inline, 0) + COALESCE(a.n, 0) AS running_inline,
	       COALESCE(j.retryable, 0) AS retryable,
	       COALESCE(GREATEST(EXTRACT(EPOCH FROM $1::timestamptz - LEAST(j.oldest, a.oldest)), 0), 0)::float8 AS oldest_seconds,
	       COALESCE(GREATEST(EXTRACT(EPOCH FROM $1::timestamptz - j.due), 0), 0)::float8 AS due_wait_seconds
	FROM jobs j FULL JOIN river_queue q ON q.name = j.queue
	     FULL JOIN arrivals a ON a.queue = COALESCE(j.queue, q.name)
	WHERE COALESCE(j.queue, q.name, a.queue) IS NOT NULL
	ORDER BY 1`

// gatesSQL reports an open breaker whose probe is due while no job waits
// on its key's queue as idle: no task is held back, and the next task's
// call is the probe (gate.AdmitTx), so the key is not alerting (the
// TollgateBreakerOpen rule fires on open only) and shows no probe time.
// An open breaker with tasks waiting shows its next probe, never in the
// past: a probe due and not yet claimed is due now.
const gatesSQL = `
	SELECT key AS provider_key,
	       CASE WHEN idle THEN 'idle' ELSE state END AS state,
	       paused_until,
	       CASE WHEN state = 'open' AND NOT idle THEN GREATEST(next_probe_at, $1) END AS next_probe_at,
	       opened_at, reason_class, reason_code
	FROM (
		SELECT k.*, k.state = 'open' AND k.next_probe_at <= $1 AND NOT EXISTS (
		           SELECT 1 FROM river_job j
		           WHERE j.state IN ('available', 'scheduled', 'running', 'retryable') AND j.queue = 'provider_' || k.key
		       ) AS idle
		FROM provider_keys k
	) g
	ORDER BY key`

// budgetsSQL takes each budget's latest period row, the one admission
// charges, and drops it when that period has already ended (a daily
// budget not used today): the next request opens a fresh period from the
// limit.
const budgetsSQL = `
	SELECT owner_id, workload, period, period_start, total_micros, reserved_micros, spent_micros,
	       CASE WHEN total_micros = 0 THEN 100
	            ELSE 100 * (reserved_micros::float8 + spent_micros) / total_micros END AS used_pct
	FROM (
		SELECT DISTINCT ON (owner_id, workload) *
		FROM budget_periods
		ORDER BY owner_id, workload, period_start DESC
	) p
	WHERE (period_end IS NULL OR period_end > $1)
	  AND 100 * (reserved_micros::numeric + spent_micros) >= $2::numeric * total_micros
	ORDER BY used_pct DESC, owner_id, workload
	LIMIT $3`

// waitingSQL finds the oldest unfinished tasks through their held
// reservations (a task holds one from its admission to its finish, both
// written in the task's own transactions), whose partial index is in
// admission order: the reservation's created_at is its task's, both the
// admission transaction's now(). An index on the tasks themselves would
// keep their finishes from being HOT (the baseline migration).
const waitingSQL = `
	SELECT t.id::text AS task_id, t.owner_id, t.model, t.status, t.created_at,
	       GREATEST(EXTRACT(EPOCH FROM $1::timestamptz - t.created_at), 0)::float8 AS age_seconds,
	       CASE WHEN t.status = 'queued' THEN t.error->>'class' END AS waiting_for
	FROM budget_reservations r JOIN tasks t ON t.id = r.task_id
	WHERE r.state = 'held' AND t.finished_at IS NULL
	ORDER BY r.created_at, r.task_id
	LIMIT $2`
