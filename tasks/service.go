package tasks

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/tollgate/tollgate/budget"
	"github.com/tollgate/tollgate/catalog"
	"github.com/tollgate/tollgate/gate"
	"github.com/tollgate/tollgate/internal/keylock"
	"github.com/tollgate/tollgate/internal/pipetx"
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
	NetEvery         time.Duration // how often runs on arrival past their deadline get a safety net (NetsOnce); default 5s
	PurgeEvery       time.Duration // how often body retention runs; default 1h
	RetryBase        time.Duration // first transient backoff; default 1s
	RetryMax         time.Duration // backoff and throttle pause cap; default 1m
	MaxWorkers       int           // concurrent tasks per process; default 100
	FetchCooldown    time.Duration // River's; default 100ms
	FetchPoll        time.Duration // River's; default 1s
	RescueAfter      time.Duration // running jobs older than this are retried; default 1h
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

func (c *Config) defaults() error {
	if c.Catalog == nil {
		return errors.New("tasks: Config.Catalog is required")
	}
	for _, p := range c.Catalog.Providers {
		if c.Clients[p.Key] == nil {
			return fmt.Errorf("tasks: no client for provider key %q", p.Key)
		}
	}
	if c.DefaultMaxTokens <= 0 {
		c.DefaultMaxTokens = 1024
	}
	if c.RequestTimeout <= 0 {
		c.RequestTimeout = 30 * time.Second
	}
	if c.MaxAttempts <= 0 {
		c.MaxAttempts = 4
	}
	if c.AmbiguousRetries == 0 {
		c.AmbiguousRetries = 1
	}
	if c.ProbeEvery <= 0 {
		c.ProbeEvery = 30 * time.Second
	}
	if c.MaxSnooze <= 0 {
		c.MaxSnooze = 30 * time.Second
	}
	if c.DefaultDeadline <= 0 {
		c.DefaultDeadline = time.Hour
	}
	if c.ReapEvery <= 0 {
		c.ReapEvery = time.Minute
	}
	if c.NetEvery <= 0 {
		c.NetEvery = 5 * time.Second
	}
	if c.PurgeEvery <= 0 {
		c.PurgeEvery = time.Hour
	}
	if c.RetryBase <= 0 {
		c.RetryBase = time.Second
	}
	if c.RetryMax <= 0 {
		c.RetryMax = time.Minute
	}
	if c.RecordWithin <= 0 {
		c.RecordWithin = 30 * time.Second
	}
	if c.MaxWorkers <= 0 {
		c.MaxWorkers = 100
	}
	if c.RecheckEvery <= 0 {
		c.RecheckEvery = 2 * time.Second
	}
	if c.MaxAdmitting == 0 {
		c.MaxAdmitting = 64
	}
	if c.ShedAdmittingAfter <= 0 {
		c.ShedAdmittingAfter = 500 * time.Millisecond
	}
	if c.ShedQueueWait == 0 {
		c.ShedQueueWait = time.Minute
	}
	if c.ShedSampleEvery <= 0 {
		c.ShedSampleEvery = time.Second
	}
	if c.RescueAfter <= 0 {
		c.RescueAfter = time.Hour
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Sealer == nil {
		return errors.New("tasks: Config.Sealer is required")
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

// maintenanceQueue runs Tollgate's own periodic jobs (retention).
const maintenanceQueue = "maintenance"

// queueFor is the River queue of a provider key.
func queueFor(providerKey string) string { return "provider_" + providerKey }

// querier is what reads need of a pool or a transaction.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// Service creates, reads and runs tasks.
type Service struct {
	digestKey []byte // keys the digests of the hash-only policy
	pool      *pgxpool.Pool
	cfg       Config
	river     *river.Client[pgx.Tx]
	waiter    *waiter
	started   bool // workers running; set by Start before any Stop
	// budgetRows queues this process's commits on an owner's budget rows
	// (commitOnBudget).
	budgetRows keylock.Locks
	// successes records an owner's succeeded calls together
	// (recordTogether); admissions admits an owner's new tasks together
	// (admitTogether).
	successes  together[*succeededCall]
	admissions together[*admission]
	// slots bound this process's concurrent calls per provider key;
	// arrivals are its runs on arrival (runOnArrival).
	slots    callSlots
	arrivals arrivals
	// shed refuses new tasks when the process or the queue is behind.
	shed *shedder
}

// admissionLanes is how many admission batches of one owner run at once.
//
// With one, an admission that arrived while its owner's batch ran waited
// for that batch and then for its own: one batch slowed down (its backend
// descheduled on a busy machine, a wait on the budget row) held back every
// admission of the owner that came meanwhile. With two, the next batch
// writes its rows while the one before commits; they meet only on the
// owner's budget row, for the reservation and COMMIT, where PostgreSQL
// orders them. Two batches still cap the row's waiters from one process,
// which is what the single lane was for (see writeBatch). Measured in
// docs/BENCHMARKS.md (ninth session): at 200 tasks/s with a 1 s model,
// the median admission p99 of seven alternating pairs fell from 34 to
// 23 ms (lower with two lanes in six); four lanes did no better.
const admissionLanes = 2

// commitOnBudget sends b, whose last statement locks owner's budget rows
// (a reservation or a settlement), with COMMIT, after this process's other
// commits on those rows: PostgreSQL then has at most one waiter per
// instance for the row, instead of a herd woken at every commit.
func (s *Service) commitOnBudget(ctx context.Context, tx *pipetx.Tx, owner string, b *pgx.Batch) error {
	unlock, err := s.budgetRows.Lock(ctx, owner)
	if err != nil {
		return err
	}
	defer unlock()
	return tx.CommitWith(ctx, b)
}

// New returns a service on pool. Call Start to run workers; a service that
// is never started still creates and reads tasks (an API-only instance).
func New(pool *pgxpool.Pool, cfg Config) (*Service, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	s := &Service{pool: pool, cfg: cfg, waiter: newWaiter(pool, cfg.Logger, cfg.RecheckEvery), slots: newCallSlots(cfg.Catalog, cfg.MaxWorkers),
		shed: newShedder(cfg.Catalog, cfg)}
	s.admissions.lanes = admissionLanes
	queues := map[string]river.QueueConfig{}
	s.digestKey = cfg.Sealer.DigestKey()
	workers := river.NewWorkers()
	if err := river.AddWorkerSafely(workers, &worker{svc: s}); err != nil {
		return nil, fmt.Errorf("tasks: register worker: %w", err)
	}
	if err := river.AddWorkerSafely(workers, &purgeWorker{svc: s}); err != nil {
		return nil, fmt.Errorf("tasks: register purge worker: %w", err)
	}
	queues[maintenanceQueue] = river.QueueConfig{MaxWorkers: 1}
	for _, p := range cfg.Catalog.Providers {
		queues[queueFor(p.Key)] = river.QueueConfig{MaxWorkers: cfg.MaxWorkers}
	}
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{
		Queues:               queues,
		Workers:              workers,
		FetchCooldown:        cfg.FetchCooldown,
		FetchPollInterval:    cfg.FetchPoll,
		RescueStuckJobsAfter: cfg.RescueAfter,
		JobTimeout:           cfg.jobTimeout(),
		Logger:               cfg.Logger,
		MaxAttempts:          cfg.MaxAttempts + riverAttemptMargin,
		PeriodicJobs: []*river.PeriodicJob{river.NewPeriodicJob(river.PeriodicInterval(cfg.PurgeEvery),
			func() (river.JobArgs, *river.InsertOpts) {
				return PurgeArgs{}, &river.InsertOpts{Queue: maintenanceQueue, UniqueOpts: river.UniqueOpts{ByPeriod: cfg.PurgeEvery}}
			}, &river.PeriodicJobOpts{RunOnStart: true})},
	})
	if err != nil {
		return nil, fmt.Errorf("tasks: river client: %w", err)
	}
	s.river = client
	return s, nil
}

// jobMargin is the time a job may spend around its provider call (the
// transactions before and after it).
const jobMargin = 10 * time.Second

func (c *Config) jobTimeout() time.Duration { return c.RequestTimeout + jobMargin }

// riverAttemptMargin lets River run a job a few more times than the task's
// own attempt limit, so that a job is never discarded by River while its task
// is unfinished: the worker, counting provider calls in the journal, is what
// decides a task has run out of attempts.
const riverAttemptMargin = 5

// Start runs the workers and the completion listener until ctx ends or Stop
// is called.
func (s *Service) Start(ctx context.Context) error {
	s.StartListener(ctx)
	go s.reapLoop(ctx, s.cfg.ReapEvery)
	go s.netLoop(ctx, s.cfg.NetEvery)
	if err := s.river.Start(ctx); err != nil {
		return fmt.Errorf("tasks: start workers: %w", err)
	}
	s.started = true
	s.arrivals.start()
	return nil
}

// StartListener runs only the completion listener, for an API-only
// instance: it creates tasks and answers Prefer: wait, while worker
// instances run them.
func (s *Service) StartListener(ctx context.Context) {
	go s.waiter.run(ctx)
	go s.sampleQueues(ctx, s.cfg.ShedSampleEvery)
}

// Stop stops fetching new jobs and running tasks on arrival, and waits for
// running ones until ctx ends; then it cancels them, and their attempts are
// handed back to the queue.
func (s *Service) Stop(ctx context.Context) error {
	if !s.started {
		s.waiter.stop()
		return nil
	}
	stopped := make(chan struct{})
	go func() {
		s.arrivals.stop(ctx, 10*time.Second)
		close(stopped)
	}()
	err := s.river.Stop(ctx)
	if err != nil && ctx.Err() != nil {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		err = s.river.StopAndCancel(cctx)
	}
	<-stopped
	s.waiter.stop()
	return err
}

// Created is what Create returns.
type Created struct {
	Task     Task
	Replayed bool // an earlier submission with the same key and request
	jobID    int64
	watch    *watch // Submission.Await's subscription, for Wait
}

// Submission is one POST of a task.
type Submission struct {
	OwnerID        string
	Workload       string // the API key's workload, "" for none
	IdempotencyKey string
	TraceID        string
	Request        Request
	RerunOf        string // the task this one repeats, for reruns
	// Inline: the caller runs the task itself (RunInline) to stream it; the
	// River job is scheduled after the call's deadline, as a safety net.
	Inline bool
	// Await: the caller waits for the task's end with Wait
	// (WaitParams.Created) as soon as Create returns, as synchronous
	// calls do. Create then listens for the task before admitting it.
	Await bool
	// For route calls: the route and its prompt version (recorded for
	// replay), and per-task bounds on attempts and on each call.
	Route         string
	PromptVersion string
	MaxAttempts   int
	CallTimeout   time.Duration
}

// Create submits a task under the owner's idempotency key. Task row,
// reservation and job commit in one transaction. A retry of the same key
// and request returns the existing task with Replayed set and changes
// nothing. It returns ErrIdempotencyKeyReused when the key names a task with
// a different request, budget.ErrInsufficient when a budget cannot cover
// the reservation (no task is created and the key stays free), an
// *OverloadError (ErrOverloaded) when it sheds the task (shed.go; nothing is
// written either), and a *ValidationError for an invalid request.
func (s *Service) Create(ctx context.Context, sub Submission) (created Created, err error) {
	owner, key, traceID, req := sub.OwnerID, sub.IdempotencyKey, sub.TraceID, sub.Request
	if err := req.Validate(); err != nil {
		return Created{}, err
	}
	if !ValidIdempotencyKey(key) {
		return Created{}, &ValidationError{Fields: []FieldError{{"Idempotency-Key", "must be 1-255 printable ASCII characters"}}}
	}
	// The key is stored, looked up and logged only as its keyed digest;
	// the key as sent is only for finding a task stored before keys were digested.
	sent := key
	key = s.StoredKey(key)
	// The request's hash is stored keyed too, so a dump cannot confirm a
	// guessed request; plain only finds tasks stored before it was keyed.
	plain := req.Hash()
	hash := s.keyedHash(plain)
	m, priced, err := s.cfg.Catalog.Resolve(req.Model)
	if errors.Is(err, catalog.ErrUnknownModel) {
		return Created{}, &ValidationError{Fields: []FieldError{{"model", "is not a model this service offers"}}}
	}
	if err != nil {
		return Created{}, err
	}
	if !priced && s.Fields().Changes(m.Name) {
		// A pass-through name is sent to the provider and stored, logged
		// and exported as given, so it may not carry what redaction removes.
		return Created{}, &ValidationError{Fields: []FieldError{{"model", "must not contain personal data or a credential"}}}
	}
	// The first model of the chain that can take the request runs it; with
	// none, the request is refused here, before anything is written.
	fitting, err := s.fit(m, req)
	if err != nil {
		return Created{}, err
	}
	m = fitting[0]
	model := m.Name
	rawJSON, err := json.Marshal(req)
	if err != nil {
		return Created{}, fmt.Errorf("tasks: encode request: %w", err)
	}
	amount, estimated := s.estimate(fitting, priced, req)
	if amount > budget.MaxTotalMicros {
		// More than any budget may hold (a saturated cost among them):
		// refused before anything is written.
		s.cfg.Metrics.TaskSubmitted("budget_exceeded")
		return Created{}, budget.ErrInsufficient
	}
	deadline := s.cfg.DefaultDeadline
	if req.DeadlineS > 0 {
		deadline = time.Duration(req.DeadlineS) * time.Second
	}

	// A retry is answered from one round trip, before any redaction,
	// sealing or transaction: retries are frequent and must stay cheap. The
	// same round trip reads the owner's redaction policy for a new task. A
	// key not found here may still be taken by a concurrent request by the
	// time the insert runs; the unique constraint decides that race below.
	// It also reads the gate of the model's provider key when the task may
	// run on arrival (claimArrival).
	keyGate := gate.Open
	var gateRead *gate.Mode
	if !sub.Inline && s.mayRunOnArrival() {
		gateRead = &keyGate
	}
	// The same round trip reads whether the owner's budget has no room
	// for the reservation at all: such a request is refused before it is
	// redacted and sealed, which costs most for the largest requests.
	var broke bool
	policy, existing, hashOK, err := s.lookup(ctx, owner, s.lookupKeys(sent), [][]byte{hash, plain}, m.Provider, gateRead, func(b *pgx.Batch) {
		budget.QueueNoHeadroom(b, owner, s.cfg.Now(), amount, &broke)
	})
	if err != nil {
		return Created{}, fmt.Errorf("tasks: create: %w", err)
	}
	if existing != nil {
		return s.replayed(*existing, hashOK)
	}
	if broke {
		s.cfg.Metrics.TaskSubmitted("budget_exceeded")
		return Created{}, budget.ErrInsufficient
	}
	admitted, err := s.shed.admit()
	if err != nil {
		s.cfg.Metrics.TaskSubmitted("overloaded")
		return Created{}, err
	}
	defer admitted()
	// Redaction happens here, once, before anything is written: the stored
	// request is redacted, the raw one sealed.
	stored, err := json.Marshal(s.privacyFor(redact.Policy(policy)).request(req))
	if err != nil {
		return Created{}, fmt.Errorf("tasks: create: %w", err)
	}
	id := uuid.New().String()
	var w *watch
	if sub.Await && !sub.Inline {
		// Listening from before the admission commits, the caller cannot
		// miss the end of a first attempt that starts at once; it is
		// handed over with the task, or stopped if there is none.
		// Woken for a blocked task too: a Wait with ReturnIfBlocked
		// returns then, any other reads it and waits on.
		ch, stop := s.waiter.subscribe(id, true)
		w = &watch{ch: ch, stop: stop}
		defer func() {
			if created.watch != w {
				stop()
			}
		}()
	}
	a := &admission{id: id, owner: owner, key: key, model: model, hash: hash, stored: stored,
		sealed: s.cfg.Sealer.Seal(rawJSON, []byte(id)), policy: policy, amount: amount, estimated: estimated,
		deadline: deadline, sub: sub, providerKey: m.Provider}
	var arrival *arrivalClaim
	if !sub.Inline {
		arrival = s.claimArrival(m, keyGate == gate.Closed)
	}
	a.onArrival = arrival != nil
	if arrival == nil && !sub.Inline {
		if err := s.shed.queue(m.Provider); err != nil {
			s.cfg.Metrics.TaskSubmitted("overloaded")
			return Created{}, err
		}
	}
	a.args, a.opts = s.enqueueing(ctx, id, traceID, m.Provider, sub.Inline)
	// Admissions of one owner that arrive together are written together;
	// one that cannot be, or a streamed one, is written on its own.
	err = errAlone
	if !sub.Inline {
		err = s.admitTogether(ctx, a)
	}
	switch {
	case errors.Is(err, errAlone):
		a.taken = false
		err = s.admitAlone(ctx, a)
	case err == nil && a.taken:
		err = errKeyTaken
	}
	out := Created{Task: a.task, jobID: a.jobID, watch: w}
	if arrival != nil {
		if err == nil {
			go s.runOnArrival(a, arrival)
		} else {
			arrival.release()
		}
	}
	if errors.Is(err, errKeyTaken) {
		_, existing, hashOK, err := s.lookup(ctx, owner, s.lookupKeys(sent), [][]byte{hash, plain}, "", nil, nil)
		if err != nil {
			return Created{}, fmt.Errorf("tasks: create: %w", err)
		}
		if existing == nil {
			return Created{}, fmt.Errorf("tasks: create: idempotency key taken, but no task holds it")
		}
		return s.replayed(*existing, hashOK)
	}
	switch {
	case errors.Is(err, ErrIdempotencyKeyReused):
		s.cfg.Metrics.TaskSubmitted("conflict")
		return Created{}, err
	case errors.Is(err, budget.ErrInsufficient):
		s.cfg.Metrics.TaskSubmitted("budget_exceeded")
		return Created{}, err
	case err != nil:
		return Created{}, fmt.Errorf("tasks: create: %w", err)
	}
	s.cfg.Metrics.TaskSubmitted("created")
	s.cfg.Logger.LogAttrs(ctx, slog.LevelInfo, "task created",
		slog.String("task_id", out.Task.ID), slog.String("owner_id", owner),
		slog.String("idempotency_key_digest", logKey(key)), slog.String("model", model),
		slog.Int64("reserved_micros", amount), slog.String("trace_id", traceID))
	return out, nil
}

// replayed answers a retry with the task that holds its key: the task when
// its request hash matches, ErrIdempotencyKeyReused when it does not.
func (s *Service) replayed(t Task, hashOK bool) (Created, error) {
	if !hashOK {
		s.cfg.Metrics.TaskSubmitted("conflict")
		return Created{}, ErrIdempotencyKeyReused
	}
	s.reveal(&t)
	s.cfg.Metrics.TaskSubmitted("replayed")
	return Created{Task: t, Replayed: true}, nil
}

// lookup reads, in one round trip, the owner's redaction policy and the
// owner's task under key, if any, with whether its request hash is hash;
// and, with gate non-nil, the gate of providerKey.
// keys are the forms of the client's key (lookupKeys), hashes the
// request's hash keyed and plain: a task admitted before keys and hashes
// were keyed holds the latter.
// also, when not nil, queues further reads on the same round trip.
func (s *Service) lookup(ctx context.Context, owner string, keys []string, hashes [][]byte, providerKey string, mode *gate.Mode, also func(*pgx.Batch)) (policy string, t *Task, hashOK bool, err error) {
	b := &pgx.Batch{}
	if also != nil {
		also(b)
	}
	if mode != nil {
		gate.QueuePeek(b, providerKey, mode)
	}
	b.Queue(`SELECT redaction_policy FROM owners WHERE id = $1`, owner).QueryRow(func(r pgx.Row) error {
		return r.Scan(&policy)
	})
	b.Queue(`SELECT `+answerColumns+`, request_hash = ANY($3) FROM tasks WHERE owner_id = $1 AND idempotency_key = ANY($2)
		ORDER BY created_at LIMIT 1`,
		owner, keys, hashes).Query(func(rows pgx.Rows) error {
		list, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Task, error) { return scanTaskInto(r, &hashOK) })
		if len(list) == 1 {
			t = &list[0]
		}
		return err
	})
	err = s.pool.SendBatch(ctx, b).Close()
	return policy, t, hashOK, err
}

// estimate is the reservation for a request: input tokens estimated
// (estimateInput), output tokens at the output limit times the choices
// asked for, at the price of the most expensive model of fitting (the
// models of the chain that can take the request, fit), since any of them
// may end up running it. An unpriced model is reserved at the default
// price and marked estimated; the amount is never zero, so no request
// skips the reservation. A cost beyond an int64 saturates
// (budget.Price.Cost), never wraps: the amount is then above any budget
// and Create refuses it.
func (s *Service) estimate(fitting []catalog.Model, priced bool, req Request) (amount int64, estimated bool) {
	for _, x := range fitting {
		in, out := s.reservedTokens(x, req)
		amount = max(amount, x.Price().Cost(in, out))
	}
	return max(amount, 1), !priced
}

// providerRequest is the call begun makes: the raw request as chatFor
// sends it to the attempt's model.
func (s *Service) providerRequest(begun *begunAttempt) provider.Request {
	return provider.Request{Chat: s.chatFor(begun.model, begun.raw), IdempotencyKey: begun.providerKey()}
}

// Get returns the owner's task as a client is answered (its Request holds
// only the metadata; Record has the whole stored request), or ErrNotFound,
// also for another owner's task: its existence is not disclosed.
func (s *Service) Get(ctx context.Context, owner, id string) (Task, error) {
	return s.read(ctx, answerColumns, owner, id)
}

// GetAny is Get for any owner's task, for roles that may read across
// owners.
func (s *Service) GetAny(ctx context.Context, id string) (Task, error) {
	return s.read(ctx, answerColumns, "", id)
}

// Record returns the owner's task (any owner's for "") with its whole
// stored request, as redacted under the owner's policy: what a replay
// record shows. It returns ErrNotFound as Get does.
func (s *Service) Record(ctx context.Context, owner, id string) (Task, error) {
	return s.read(ctx, taskColumns, owner, id)
}

// read reads the owner's task (any owner's for "") with columns
// (taskColumns or answerColumns).
func (s *Service) read(ctx context.Context, columns, owner, id string) (Task, error) {
	if uuid.Validate(id) != nil {
		return Task{}, ErrNotFound
	}
	rows, err := s.pool.Query(ctx, `SELECT `+columns+` FROM tasks WHERE id = $1 AND ($2 = '' OR owner_id = $2)`, id, owner)
	if err != nil {
		return Task{}, fmt.Errorf("tasks: get: %w", err)
	}
	t, err := pgx.CollectExactlyOneRow(rows, scanTask)
	if errors.Is(err, pgx.ErrNoRows) {
		return Task{}, ErrNotFound
	}
	if err != nil {
		return Task{}, fmt.Errorf("tasks: get: %w", err)
	}
	s.reveal(&t)
	return t, nil
}

// rawRequest opens the sealed raw request: what the provider must see.
func (s *Service) rawRequest(t Task) (Request, error) {
	if len(t.payload) == 0 {
		return Request{}, seal.ErrCannotOpen
	}
	plain, err := s.cfg.Sealer.Open(t.payload, []byte(t.ID))
	if err != nil {
		return Request{}, err
	}
	var r Request
	dec := json.NewDecoder(bytes.NewReader(plain))
	dec.UseNumber()
	return r, dec.Decode(&r)
}

// Page is one page of a listing.
type Page struct {
	Tasks      []Task
	NextCursor string // empty on the last page
}

// List returns the owner's tasks, newest first. The cursor is opaque to
// clients; a malformed one returns ErrInvalidCursor.
func (s *Service) List(ctx context.Context, owner, cursor string, limit int) (Page, error) {
	limit = min(max(limit, 1), 100)
	after, err := decodeCursor(cursor)
	if err != nil {
		return Page{}, err
	}
	rows, err := s.pool.Query(ctx, `
		SELECT `+taskColumns+` FROM tasks
		WHERE owner_id = $1 AND ($2::text = '' OR (created_at, id) < ($3::timestamptz, $2::uuid))
		ORDER BY created_at DESC, id DESC
		LIMIT $4`, owner, after.ID, after.At, limit+1)
	if err != nil {
		return Page{}, fmt.Errorf("tasks: list: %w", err)
	}
	list, err := pgx.CollectRows(rows, scanTask)
	if err != nil {
		return Page{}, fmt.Errorf("tasks: list: %w", err)
	}
	for i := range list {
		s.reveal(&list[i])
	}
	return page(list, limit), nil
}

// cursor is a position in a newest-first listing.
type cursor struct {
	At time.Time `json:"t"`
	ID string    `json:"i"`
}

func decodeCursor(c string) (cursor, error) {
	var after cursor
	if c == "" {
		return after, nil
	}
	raw, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil || json.Unmarshal(raw, &after) != nil || uuid.Validate(after.ID) != nil {
		return cursor{}, ErrInvalidCursor
	}
	return after, nil
}

// page cuts a result fetched with limit+1 rows into a page and its cursor.
func page(list []Task, limit int) Page {
	p := Page{Tasks: list}
	if len(list) > limit {
		p.Tasks = list[:limit]
		last := p.Tasks[limit-1]
		raw, _ := json.Marshal(cursor{At: last.CreatedAt, ID: last.ID})
		p.NextCursor = base64.RawURLEncoding.EncodeToString(raw)
	}
	if p.Tasks == nil {
		p.Tasks = []Task{}
	}
	return p
}

// taskColumns are the columns scanTask reads, in its order, from a query
// on tasks (unaliased). The status is statusExpr: the worker does not write
// "running" (it would cost a transaction per task), so a queued task whose
// job a worker holds is shown running.
const taskColumns = `id::text, owner_id, ` + statusExpr + `, idempotency_key, model, attempts, reserved_micros,
	created_at, updated_at, finished_at, deadline_at, result, error, request, workload, cancel_requested,
	payload, output_sealed, redaction_policy, bodies_erased_at, route, prompt_version, max_attempts, call_timeout_ms, job_id, answer_sealed`

// answerColumns are taskColumns for a task that is only answered to a
// client: its stored request reduced to the metadata, the one part of the
// request a client's view shows (Task.Request holds only that). Polls,
// waits, replayed POSTs and admissions would otherwise decode the whole
// stored prompt on every answer, at a cost that grows with its size.
var answerColumns = strings.Replace(taskColumns, " request,", " jsonb_build_object('metadata', request->'metadata') AS request,", 1)

// statusExpr is a task's status as clients see it, for queries on tasks
// (unaliased): the stored one, except that a queued task whose River job is
// running is running; a task waiting on its provider key (its error says
// why) stays queued while its job checks the gate. Inline (streamed) runs
// store "running" themselves.
const statusExpr = `CASE WHEN tasks.status = 'queued' AND tasks.error IS NULL AND tasks.job_id IS NOT NULL AND EXISTS (
		SELECT 1 FROM river_job j WHERE j.id = tasks.job_id AND j.state = 'running')
	THEN 'running' ELSE tasks.status END`

func scanTask(r pgx.CollectableRow) (Task, error) { return scanTaskInto(r) }

func scanTaskInto(r pgx.CollectableRow, extra ...any) (Task, error) {
	var t Task
	var status string
	dest := []any{&t.ID, &t.OwnerID, &status, &t.IdempotencyKey, &t.Model, &t.Attempts, &t.ReservedMicros,
		&t.CreatedAt, &t.UpdatedAt, &t.FinishedAt, &t.DeadlineAt, &t.Result, &t.Error, &t.Request, &t.Workload, &t.CancelRequested,
		&t.payload, &t.outputSealed, &t.policy, &t.BodiesErasedAt, &t.Route, &t.PromptVersion, &t.maxAttempts, &t.callTimeoutMS, &t.jobID, &t.answerSealed}
	if err := r.Scan(append(dest, extra...)...); err != nil {
		return Task{}, err
	}
	t.Status = Status(status)
	t.Metadata = t.Request.Metadata
	return t, nil
}

// logKeyDigits is how many hex digits of a stored key's digest a log
// line shows: enough to tell one owner's tasks apart, half the digest.
const logKeyDigits = 16

// logKey is how an idempotency key appears in logs: the beginning of its
// stored form (StoredKey), "h:" and the first digits of its keyed digest.
// That is a digest already, since clients sometimes put meaningful data in
// keys, and the very prefix of the idempotency_key support sees in API
// answers, so a log line and a task can be matched. A key stored in clear
// (before keys were digested) is never logged.
func logKey(stored string) string {
	if !strings.HasPrefix(stored, redact.HashPrefix) {
		return ""
	}
	return stored[:min(len(stored), len(redact.HashPrefix)+logKeyDigits)]
}

// ErrFinished is returned by Cancel for a task that already finished.
var ErrFinished = errors.New("tasks: task already finished")

// Cancel cancels the owner's task. A queued task is canceled at once and
// its reservation released. A running task is marked: when its in-flight
// call returns, it is canceled and settled for what that call spent. It
// returns the task as it now is, ErrNotFound, or ErrFinished.
func (s *Service) Cancel(ctx context.Context, owner, id string) (Task, error) {
	if uuid.Validate(id) != nil {
		return Task{}, ErrNotFound
	}
	var final *outcome
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		t, err := lockTask(ctx, tx, id)
		if err != nil {
			return err
		}
		if t.OwnerID != owner {
			return ErrNotFound
		}
		if t.Status.Final() {
			return ErrFinished
		}
		running := t.Status == StatusRunning
		if !running && t.jobID != nil {
			// Lock the job row: a worker that has fetched the job may be
			// calling the provider (it writes nothing before the call), and
			// one that has not cannot fetch it until this commits (River
			// fetches with SKIP LOCKED). A job not running is canceled with
			// the task, so no worker picks it up afterwards.
			var state string
			err := tx.QueryRow(ctx, `SELECT state FROM river_job WHERE id = $1 FOR UPDATE`, *t.jobID).Scan(&state)
			if err != nil && !errors.Is(err, pgx.ErrNoRows) {
				return err
			}
			running = state == "running"
			if !running && err == nil {
				if _, err := s.river.JobCancelTx(ctx, tx, *t.jobID); err != nil && !errors.Is(err, river.ErrNotFound) {
					return err
				}
			}
		}
		if running {
			_, err := tx.Exec(ctx, `UPDATE tasks SET cancel_requested = true, updated_at = now() WHERE id = $1`, id)
			return err
		}
		jc, err := countJournal(ctx, tx, t.ID, t.Model)
		if err != nil {
			return err
		}
		alerts, err := s.finishUnsucceeded(ctx, tx, t, StatusCanceled, nil, jc.possiblyCharged())
		final = &outcome{taskID: t.ID, status: StatusCanceled, created: t.CreatedAt, alerts: alerts}
		return err
	})
	if err != nil {
		if errors.Is(err, ErrNotFound) || errors.Is(err, ErrFinished) {
			return Task{}, err
		}
		return Task{}, fmt.Errorf("tasks: cancel: %w", err)
	}
	s.observe(final)
	return s.Get(ctx, owner, id)
}

// RerunParams names the finished task to repeat and who asks for it.
type RerunParams struct {
	// Owner is the caller's owner; "" lets an admin rerun any owner's task.
	Owner string
	// Workload is the caller's workload ("" for none): the rerun is the
	// caller's spending, charged to it and held to its cap like any task
	// the caller submits, whichever workload ran the original. An admin's
	// rerun (Owner "") is charged to the original's workload instead.
	Workload string
	TaskID   string
	Key      string // the caller's Idempotency-Key
	TraceID  string
}

// Rerun creates a NEW task that repeats a finished one's request: a new
// idempotency key derived from the old task, the workload charged and the
// caller's key (RerunKey), charged
// to the owner's budget and the caller's workload like any task (see
// RerunParams), linked by rerun_of. The original task and its record are
// never touched. It returns ErrNotFound, ErrNotFinished, ErrErased when
// the request body is gone, or what Create returns (a budget refusal
// among them).
func (s *Service) Rerun(ctx context.Context, p RerunParams) (Created, error) {
	owner, id, key, traceID := p.Owner, p.TaskID, p.Key, p.TraceID
	var t Task
	var err error
	workload := p.Workload
	if owner == "" {
		t, err = s.GetAny(ctx, id)
		workload = t.Workload
	} else {
		t, err = s.Get(ctx, owner, id)
	}
	if err != nil {
		return Created{}, err
	}
	if !t.Status.Final() {
		return Created{}, ErrNotFinished
	}
	if t.BodiesErasedAt != nil {
		return Created{}, ErrErased
	}
	raw, err := s.rawRequest(t)
	if err != nil {
		return Created{}, fmt.Errorf("tasks: rerun: %w", err)
	}
	derived := RerunKey(t.ID, workload, key)
	if !ValidIdempotencyKey(key) || !ValidIdempotencyKey(derived) {
		return Created{}, &ValidationError{Fields: []FieldError{{"Idempotency-Key",
			fmt.Sprintf("must be 1-%d printable ASCII characters for a rerun", MaxKeyLength-len(derived)+len(key))}}}
	}
	return s.Create(ctx, Submission{OwnerID: t.OwnerID, Workload: workload, IdempotencyKey: derived,
		TraceID: traceID, Request: raw, RerunOf: t.ID})
}

// RerunKey is the idempotency key of a rerun of task id under the
// caller's key, charged to workload: `rerun/<id>/<key>` without a
// workload, `rerun@<workload>/<id>/<key>` with one. Two reruns share a
// task only when they would be charged to the same workload, so a
// workload's rerun is never answered with, and charged as, another's.
// Workload names hold no '/' and the no-workload form has none before the
// id, so no two (workload, key) pairs give one derived key.
func RerunKey(id, workload, key string) string {
	if workload == "" {
		return "rerun/" + id + "/" + key
	}
	return "rerun@" + workload + "/" + id + "/" + key
}

// Fields applies the privacy table (redact.Fields) to the short fields
// other packages store: X-Reason, top-up notes, route users.
func (s *Service) Fields() redact.Stored { return redact.NewStored(s.cfg.Redactor, s.digestKey) }

// StoredKey is an idempotency key as tasks.idempotency_key holds it: its
// keyed digest, so support finds a task by the exact key and a dump shows
// none. It never fails.
func (s *Service) StoredKey(key string) string {
	return s.Fields().Apply(redact.FieldIdempotencyKey, key)
}

// keyedHash is a request hash as tasks.request_hash holds it: HMAC-SHA256
// of the plain hash under the digest key.
func (s *Service) keyedHash(plain []byte) []byte { return keyHash(s.digestKey, plain) }

// lookupKeys returns the forms under which a task may hold the client's
// key: its keyed digest (StoredKey), and the key as sent for a task stored
// before keys were digested. Create, its lookups and Exists share them, so
// a retry finds the same task whichever way it asks. A key that begins
// with "h:" is looked up only as its digest: stored keys are shown in API
// answers, and one sent back as a key must not reach the task it names.
func (s *Service) lookupKeys(sent string) []string {
	if strings.HasPrefix(sent, redact.HashPrefix) {
		return []string{s.StoredKey(sent)}
	}
	return []string{s.StoredKey(sent), sent}
}

// Exists reports whether the owner has a task under the idempotency key,
// in any of the forms Create finds it under (lookupKeys).
func (s *Service) Exists(ctx context.Context, owner, key string) (bool, error) {
	var ok bool
	err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM tasks WHERE owner_id = $1 AND idempotency_key = ANY($2))`, owner, s.lookupKeys(key)).Scan(&ok)
	if err != nil {
		return false, fmt.Errorf("tasks: exists: %w", err)
	}
	return ok, nil
}
