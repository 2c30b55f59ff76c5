package tasks

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

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

// Service creates, reads and runs tasks. Its work is done by its phases
// (phases.go); it keeps what starts and stops them.
type Service struct {
	pool    *pgxpool.Pool
	cfg     Config
	river   *river.Client[pgx.Tx]
	waiter  *waiter
	started bool // workers running; set by Start before any Stop
	// fitting decides which models can take a request and what it
	// reserves (fit.go).
	fitting *modelFit
	// arrivals are this process's runs on arrival (runOnArrival).
	arrivals *arrivals
	// shed refuses new tasks when the process or the queue is behind.
	shed *shedder

	guard       *guard
	intake      *intake
	runner      *runner
	recording   *recording
	applier     *applier
	outcomes    *outcomes
	reader      *reader
	maintenance *maintenance
}

// New returns a service on pool. Call Start to run workers; a service that
// is never started still creates and reads tasks (an API-only instance).
func New(pool *pgxpool.Pool, cfg Config) (*Service, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	s := &Service{pool: pool, cfg: cfg, fitting: newModelFit(cfg), waiter: newWaiter(pool, cfg.Logger, cfg.RecheckEvery),
		arrivals: &arrivals{}, shed: newShedder(cfg.Catalog, cfg), runner: &runner{}, maintenance: &maintenance{}}
	queues := map[string]river.QueueConfig{}
	workers := river.NewWorkers()
	if err := river.AddWorkerSafely(workers, &worker{run: s.runner}); err != nil {
		return nil, fmt.Errorf("tasks: register worker: %w", err)
	}
	if err := river.AddWorkerSafely(workers, &purgeWorker{m: s.maintenance}); err != nil {
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
	s.wire(client, newCallSlots(cfg.Catalog, cfg.MaxWorkers), cfg.Sealer.DigestKey())
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
	go s.maintenance.reapLoop(ctx, s.cfg.ReapEvery)
	go s.maintenance.safetyNetLoop(ctx, s.cfg.NetEvery)
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
	go s.maintenance.sampleQueues(ctx, s.cfg.ShedSampleEvery)
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
