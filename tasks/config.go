package tasks

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/riverqueue/river"

	"github.com/tollgate/tollgate/budget"
	"github.com/tollgate/tollgate/catalog"
	"github.com/tollgate/tollgate/metrics"
	"github.com/tollgate/tollgate/provider"
	"github.com/tollgate/tollgate/redact"
	"github.com/tollgate/tollgate/seal"
)

// Config is what the task service needs. Zero durations and counts take the
// documented defaults.
type Config struct {
	// Catalog lists provider keys and models (required). Each provider key
	// gets its own queue, so pausing one leaves the others running.
	Catalog *catalog.Catalog
	// Clients holds one client per provider key of the catalog (required).
	Clients          map[string]provider.Client
	DefaultMaxTokens int           // used when a request sets no max_tokens; default 1024
	RequestTimeout   time.Duration // one provider call; default 30s
	MaxAttempts      int           // counted provider calls per task (throttled and exhausted ones are not counted); default 4
	AmbiguousRetries int           // repeats allowed after an ambiguous attempt; default 1, negative for none
	ProbeEvery       time.Duration // probe interval of an open breaker; default 30s
	MaxSnooze        time.Duration // longest a waiting job sleeps before looking again; default 30s
	DefaultDeadline  time.Duration // a task's whole life unless the request sets deadline_s; default 1h
	ReapEvery        time.Duration // how often the orphan reaper runs; default 1m
	NetEvery         time.Duration // how often runs on arrival past their deadline get a safety net (WriteSafetyNetsOnce); default 5s
	PurgeEvery       time.Duration // how often body retention runs; default 1h
	RetryBase        time.Duration // first transient backoff; default 1s
	RetryMax         time.Duration // backoff and throttle pause cap; default 1m
	MaxWorkers       int           // concurrent tasks per process; default 100
	FetchCooldown    time.Duration // River's; default 100ms
	FetchPoll        time.Duration // River's; default 1s
	RescueAfter      time.Duration // running jobs older than this are retried; default 1h
	// Webhooks delivers the events finishing tasks write (webhooks.Service):
	// its worker runs on this process's River client, on webhooks.Queue.
	// nil: this process delivers none; the events wait for one that does.
	Webhooks Deliverer
	// RecordWithin bounds how long an inline run (on arrival, or a stream)
	// tries again to record its outcome before leaving it, its answer
	// kept, to its safety net; default 30s.
	RecordWithin time.Duration
	// RecheckEvery is how often the tasks that requests wait for are read
	// again, all in one query, in case an announcement was lost; default 2s.
	RecheckEvery time.Duration
	// MaxAdmitting bounds the admissions one process has in progress; past
	// it Create sheds new tasks (ErrOverloaded). Default 64; negative for
	// no bound. See shed.go.
	MaxAdmitting int
	// ShedAdmittingAfter: past MaxAdmitting admissions in progress, a new
	// task is shed only once the oldest of them has waited this long, so
	// that a burst being admitted, or a hiccup of the host, is not refused.
	// Default 500ms.
	ShedAdmittingAfter time.Duration
	// ShedQueueWait: Create sheds a new task that would wait in its
	// provider key's queue when the next task of that queue has been due
	// longer than this. Default 60s; negative never sheds on it.
	ShedQueueWait time.Duration
	// ShedSampleEvery is how often each process reads its queues' waits;
	// default 1s.
	ShedSampleEvery time.Duration
	// FailureReplayWindow: a request without an idempotency key identical
	// to one whose task failed this recently is answered with that failure,
	// without a provider call (retrywindow.go). Default 60s; negative for
	// none.
	FailureReplayWindow time.Duration
	// QueueOnly makes every attempt wait for River to fetch its job. By
	// default a task's first attempt runs on arrival, in the process that
	// admitted it, when a call slot is free (see runOnArrival).
	QueueOnly    bool
	BuildVersion string
	Logger       *slog.Logger
	Metrics      *metrics.Metrics // nil records nothing
	// AlertThresholds are budget alert thresholds in percent spent; nil
	// takes budget.DefaultThresholds.
	AlertThresholds []int
	// Alerter delivers budget alerts after the settling transaction
	// commits; nil only logs nothing.
	Alerter *budget.Alerter
	// Sealer encrypts raw requests and outputs at rest (required).
	Sealer *seal.Sealer
	// Redactor redacts what is stored in clear; nil uses the built-in rules.
	Redactor *redact.Redactor
	Now      func() time.Time // latency measurement; default time.Now
}

// defaults checks what Config requires and fills in the defaults of what
// is left zero. It returns an error naming the first missing requirement.
func (c *Config) defaults() error {
	if err := c.required(); err != nil {
		return err
	}
	c.defaultDurations()
	c.defaultCounts()
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Redactor == nil {
		r, err := redact.New()
		if err != nil {
			return err
		}
		c.Redactor = r
	}
	if c.AlertThresholds == nil {
		c.AlertThresholds = budget.DefaultThresholds
	}
	if c.RescueAfter <= c.jobTimeout() {
		return fmt.Errorf("tasks: RescueAfter (%s) must exceed the job timeout, REQUEST_TIMEOUT plus %s (%s)", c.RescueAfter, jobMargin, c.jobTimeout())
	}
	return nil
}

// required returns an error when something the service cannot run without
// is missing: the catalog, a client for each of its provider keys, the
// sealer.
func (c *Config) required() error {
	if c.Catalog == nil {
		return errors.New("tasks: Config.Catalog is required")
	}
	for _, p := range c.Catalog.Providers {
		if c.Clients[p.Key] == nil {
			return fmt.Errorf("tasks: no client for provider key %q", p.Key)
		}
	}
	if c.Sealer == nil {
		return errors.New("tasks: Config.Sealer is required")
	}
	return nil
}

// defaultDurations fills in the durations left zero (or negative, where a
// negative value has no meaning of its own).
func (c *Config) defaultDurations() {
	orIfNotPositive(&c.RequestTimeout, 30*time.Second)
	orIfNotPositive(&c.ProbeEvery, 30*time.Second)
	orIfNotPositive(&c.MaxSnooze, 30*time.Second)
	orIfNotPositive(&c.DefaultDeadline, time.Hour)
	orIfNotPositive(&c.ReapEvery, time.Minute)
	orIfNotPositive(&c.NetEvery, 5*time.Second)
	orIfNotPositive(&c.PurgeEvery, time.Hour)
	orIfNotPositive(&c.RetryBase, time.Second)
	orIfNotPositive(&c.RetryMax, time.Minute)
	orIfNotPositive(&c.RecordWithin, 30*time.Second)
	orIfNotPositive(&c.RecheckEvery, 2*time.Second)
	orIfNotPositive(&c.ShedAdmittingAfter, 500*time.Millisecond)
	orIfZero(&c.ShedQueueWait, time.Minute) // negative: never shed on the queue
	orIfNotPositive(&c.ShedSampleEvery, time.Second)
	orIfZero(&c.FailureReplayWindow, time.Minute) // negative: no window
	orIfNotPositive(&c.RescueAfter, time.Hour)
}

// defaultCounts fills in the counts left zero (or negative, where a
// negative value has no meaning of its own).
func (c *Config) defaultCounts() {
	orIfNotPositive(&c.DefaultMaxTokens, 1024)
	orIfNotPositive(&c.MaxAttempts, 4)
	orIfZero(&c.AmbiguousRetries, 1) // negative: no repeat
	orIfNotPositive(&c.MaxWorkers, 100)
	orIfZero(&c.MaxAdmitting, 64) // negative: no bound
}

// orIfNotPositive sets *v to def when *v is zero or negative.
func orIfNotPositive[T int | time.Duration](v *T, def T) {
	if *v <= 0 {
		*v = def
	}
}

// orIfZero sets *v to def when *v is zero, for settings where a negative
// value means "none".
func orIfZero[T int | time.Duration](v *T, def T) {
	if *v == 0 {
		*v = def
	}
}

// jobMargin is the time a job may spend around its provider call (the
// transactions before and after it).
const jobMargin = 10 * time.Second

func (c *Config) jobTimeout() time.Duration { return c.RequestTimeout + jobMargin }

// Deliverer is the worker of webhook deliveries (webhooks.Service).
type Deliverer interface {
	Register(*river.Workers) error
	QueueConfig() river.QueueConfig
}
