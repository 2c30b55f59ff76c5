package tasks

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/tollgate/tollgate/catalog"
	"github.com/tollgate/tollgate/tracing"
)

// A task's first attempt runs on arrival: the process that admits it calls
// the provider right after the admission commits, instead of waiting for
// River to notice the job, fetch it and hand it to a worker (most of the
// time between a task's admission and its answer on an idle queue). The
// admission commits the attempt's journal entry as "sent" and schedules the
// task's River job as a safety net after the call's deadline, so the
// durable promises hold as for any inline run (see run): a process that
// dies mid-call leaves a task its net finishes, with the call counted as
// possibly made; a failure that calls for another attempt or a wait moves
// the net forward, and River runs the rest.
//
// A task runs on arrival only when this process runs workers and accepts
// new runs (not draining), its provider key's gate was closed when the
// submission was read, and a call slot of that key is free: under load the
// slots are full and tasks take the queue, so River's fairness across
// instances and its bounds still govern.

// callSlots bounds this process's concurrent provider calls per provider
// key: River's runs and runs on arrival share them. A River run waits for
// a slot; a run on arrival takes one only if it is free, and a channel
// hands a freed slot to a waiting River run first.
type callSlots map[string]chan struct{}

func newCallSlots(c *catalog.Catalog, n int) callSlots {
	s := callSlots{}
	for _, p := range c.Providers {
		s[p.Key] = make(chan struct{}, n)
	}
	return s
}

// acquire waits for a slot of key until ctx ends.
func (s callSlots) acquire(ctx context.Context, key string) (release func(), err error) {
	ch, ok := s[key]
	if !ok {
		return func() {}, nil
	}
	select {
	case ch <- struct{}{}:
		return func() { <-ch }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// try takes a free slot of key, or reports there is none.
func (s callSlots) try(key string) (release func(), ok bool) {
	ch, ok := s[key]
	if !ok {
		return nil, false
	}
	select {
	case ch <- struct{}{}:
		return func() { <-ch }, true
	default:
		return nil, false
	}
}

// arrivals tracks this process's runs on arrival, so that Stop can wait
// for them as River waits for its jobs.
type arrivals struct {
	mu        sync.Mutex
	accepting bool
	wg        sync.WaitGroup
	ctx       context.Context // the runs' context, canceled when a drain times out
	cancel    context.CancelFunc
	running   atomic.Int64
}

// RunningOnArrival is how many runs on arrival this process has in flight.
func (s *Service) RunningOnArrival() int64 { return s.arrivals.running.Load() }

func (a *arrivals) start() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.ctx, a.cancel = context.WithCancel(context.Background())
	a.accepting = true
}

func (a *arrivals) accepts() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.accepting
}

// mayRunOnArrival reports whether this process runs tasks on arrival at
// all (it runs workers, is not draining and QueueOnly is off).
func (s *intake) mayRunOnArrival() bool { return !s.cfg.QueueOnly && s.arrivals.accepts() }

// claim registers a run about to be admitted; done must be called once,
// whether or not it ran.
func (a *arrivals) claim() (done func(), ok bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.accepting {
		return nil, false
	}
	a.wg.Add(1)
	return a.wg.Done, true
}

// stop refuses new runs and waits for the running ones until ctx ends;
// then it cancels their calls (each recorded as ambiguous, as a canceled
// River run's is) and waits for them to record, at most grace.
func (a *arrivals) stop(ctx context.Context, grace time.Duration) {
	a.mu.Lock()
	a.accepting = false
	cancel := a.cancel
	a.mu.Unlock()
	if cancel == nil {
		return
	}
	finished := make(chan struct{})
	go func() {
		a.wg.Wait()
		close(finished)
	}()
	select {
	case <-finished:
	case <-ctx.Done():
		cancel()
		select {
		case <-finished:
		case <-time.After(grace):
		}
	}
	cancel()
}

// arrivalClaim is a submission's claim to run on arrival: a call slot of
// its provider key and a place among the runs Stop waits for.
type arrivalClaim struct {
	release func()
	model   catalog.Model
	prov    catalog.Provider
}

// claimArrival claims a run on arrival for a task of model m whose gate
// was read closed (gateClosed; Create reads it only when mayRunOnArrival);
// nil when it must take the queue.
func (s *intake) claimArrival(m catalog.Model, gateClosed bool) *arrivalClaim {
	if !gateClosed {
		return nil
	}
	prov, ok := s.cfg.Catalog.Provider(m.Provider)
	if !ok {
		return nil
	}
	done, ok := s.arrivals.claim()
	if !ok {
		return nil
	}
	free, ok := s.slots.try(m.Provider)
	if !ok {
		done()
		return nil
	}
	return &arrivalClaim{model: m, prov: prov, release: func() { free(); done() }}
}

// runOnArrival makes the first attempt of a, just admitted with c's claim,
// and records its outcome. It owns c and releases it.
func (s *runner) runOnArrival(a *admission, c *arrivalClaim) {
	defer c.release()
	s.arrivals.running.Add(1)
	defer s.arrivals.running.Add(-1)
	ctx, span := tracing.Tracer().Start(tracing.Extract(s.arrivals.ctx, a.args.TraceParent), "task",
		trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithAttributes(attribute.String("tollgate.task.id", a.id), attribute.Bool("tollgate.task.on_arrival", true),
			attribute.Int("tollgate.task.attempt", 1)))
	t := a.task
	t.Request = a.sub.Request
	begun := &begunAttempt{task: t, attempt: 1, startAt: s.cfg.Now(), model: c.model, prov: c.prov, raw: a.sub.Request}
	r := inlineRun(a.id, a.args.TraceID, a.jobID, false)
	r.netArgs, r.netQueue = a.args, a.opts.Queue
	s.cfg.Metrics.RanOnArrival()
	err := s.callAndRecord(ctx, r, begun)
	endTaskSpan(span, err)
	var retry *retryError
	var snooze *river.JobSnoozeError
	if err != nil && !errors.As(err, &retry) && !errors.As(err, &snooze) {
		// The run has ended: its net may run now. It records the answer
		// if it was kept, or counts this call as possibly made from the
		// journal's "sent" entry. Should the net not be written here
		// either, a sweep (WriteSafetyNetsOnce) writes it once the run's deadline
		// has passed.
		nctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		nerr := pgx.BeginFunc(nctx, s.pool, func(tx pgx.Tx) error { return s.applier.reschedule(nctx, tx, r, s.cfg.backoff(1)) })
		cancel()
		msg := "outcome of a run on arrival not recorded; its safety net will finish the task"
		if nerr != nil {
			msg += " once the run's deadline has passed"
		}
		s.cfg.Logger.LogAttrs(ctx, slog.LevelError, msg,
			slog.String("task_id", a.id), slog.String("error", err.Error()), slog.String("trace_id", a.args.TraceID))
	}
}
