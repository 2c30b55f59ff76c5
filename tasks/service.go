package tasks

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/tollgate/tollgate/internal/keylock"
	"github.com/tollgate/tollgate/internal/pipetx"
	"github.com/tollgate/tollgate/provider"
	"github.com/tollgate/tollgate/webhooks"
)

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
	// fitting decides which models can take a request and what it
	// reserves (fit.go).
	fitting *modelFit
	// budgetRows queues this process's commits on an owner's budget rows
	// (commitOnBudget).
	budgetRows keylock.Locks
	// recorder records succeeded calls, alone or with the owner's other
	// successes (recorder.go).
	recorder recorder
	// admitter writes the tasks Create prepares (admitter.go).
	admitter admitter
	// slots bound this process's concurrent calls per provider key;
	// arrivals are its runs on arrival (runOnArrival).
	slots    callSlots
	arrivals arrivals
	// shed refuses new tasks when the process or the queue is behind.
	shed *shedder
}

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
	s := &Service{pool: pool, cfg: cfg, fitting: newModelFit(cfg), waiter: newWaiter(pool, cfg.Logger, cfg.RecheckEvery), slots: newCallSlots(cfg.Catalog, cfg.MaxWorkers),
		shed: newShedder(cfg.Catalog, cfg)}
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
	if cfg.Webhooks != nil {
		if err := cfg.Webhooks.Register(workers); err != nil {
			return nil, fmt.Errorf("tasks: register webhook worker: %w", err)
		}
		queues[webhooks.Queue] = cfg.Webhooks.QueueConfig()
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
	s.recorder = newBatchRecorder(s)
	s.admitter = newAdmitter(&loneAdmitter{pool: pool, river: client, now: cfg.Now, commitOnBudget: s.commitOnBudget}, cfg)
	return s, nil
}

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
	go s.safetyNetLoop(ctx, s.cfg.NetEvery)
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

// providerRequest is the call begun makes: the raw request as chatFor
// sends it to the attempt's model.
func (s *Service) providerRequest(begun *begunAttempt) provider.Request {
	return provider.Request{Chat: s.fitting.chatFor(begun.model, begun.raw), IdempotencyKey: begun.providerKey()}
}
