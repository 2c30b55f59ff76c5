package tasks

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tollgate/tollgate/catalog"
	"github.com/tollgate/tollgate/internal/periodic"
	"github.com/tollgate/tollgate/metrics"
)

// Shedding load. Offered more than it can finish, a deployment that keeps
// admitting every task answers each later than the last: admissions queue
// for connections and for the owner's budget row, the queue's backlog
// grows, and the host spends its CPU on waits and re-reads instead of
// finishing work. Create refuses a new task at once instead, with
// ErrOverloaded and a Retry-After, when
//
//   - this process already has Config.MaxAdmitting admissions in progress
//     (from the request's first read to its commit) and the oldest of them
//     has waited longer than Config.ShedAdmittingAfter: arrivals faster
//     than the process commits them, not a burst it is absorbing; or
//   - the task would take its provider key's queue and the next task that
//     queue will hand out has waited longer than Config.ShedQueueWait:
//     the workers of every instance together are behind. Each process
//     reads that wait from PostgreSQL every Config.ShedSampleEvery, so API
//     instances without workers shed on it too.
//
// Nothing is written for a refused task: its idempotency key stays free,
// and a retry with the same key is a new attempt. A retry of a task already
// admitted is answered as always (the key is looked up first), overloaded
// or not. A task that runs on arrival or is streamed does not wait in the
// queue, so the queue's wait does not refuse it; the admission bound does.

// ErrOverloaded is matched (errors.Is) by the *OverloadError Create returns
// when it sheds a new task.
var ErrOverloaded = errors.New("tasks: overloaded")

// Overload reasons: which bound refused a task.
const (
	ShedAdmissions = "admissions" // Config.MaxAdmitting admissions in progress
	ShedQueue      = "queue"      // the provider queue's wait past Config.ShedQueueWait
)

// OverloadError is a new task refused because the deployment is behind.
// Nothing was written; the client should retry after RetryAfter.
type OverloadError struct {
	Reason     string        // ShedAdmissions or ShedQueue
	RetryAfter time.Duration // at least a second
}

func (e *OverloadError) Error() string {
	return fmt.Sprintf("tasks: overloaded (%s); retry after %s", e.Reason, e.RetryAfter)
}

// Is makes errors.Is(err, ErrOverloaded) hold.
func (e *OverloadError) Is(target error) bool { return target == ErrOverloaded }

// shedder holds the bounds' state of one process.
type shedder struct {
	maxAdmitting int64         // <= 0: no bound
	patience     time.Duration // see Config.ShedAdmittingAfter
	maxWait      time.Duration // <= 0: no bound
	mu           sync.Mutex
	started      map[uint64]time.Time // admissions in progress, by sequence number
	seq          uint64
	// behind: the bound found a backlog (see begin); until the admissions
	// in progress fall to half the bound, every new one past the bound is
	// refused, however young the oldest.
	behind bool
	// waits is the last wait read of each provider key's queue, in
	// nanoseconds. The map is built once and only read after.
	waits   map[string]*atomic.Int64
	metrics *metrics.Metrics
}

func newShedder(c *catalog.Catalog, cfg Config) *shedder {
	s := &shedder{maxAdmitting: int64(cfg.MaxAdmitting), patience: cfg.ShedAdmittingAfter, maxWait: cfg.ShedQueueWait,
		started: map[uint64]time.Time{}, waits: map[string]*atomic.Int64{}, metrics: cfg.Metrics}
	for _, p := range c.Providers {
		s.waits[p.Key] = &atomic.Int64{}
	}
	return s
}

// begin counts one admission in progress, or refuses it when the process
// has maxAdmitting already and the oldest of them has waited the patience:
// a burst, admitted as fast as it arrives, is let through; a backlog, whose
// oldest admissions wait on, is not. Once a backlog is found the bound is
// strict until the admissions in progress fall to half of it, so that
// under sustained overload an admission waits for about maxAdmitting
// commits, not the patience again each time the oldest has gone. done
// must be called once the admission ends.
func (s *shedder) begin() (done func(), err error) {
	now := time.Now()
	s.mu.Lock()
	n := int64(len(s.started))
	if s.behind && n <= s.maxAdmitting/2 {
		s.behind = false
	}
	if s.maxAdmitting > 0 && n >= s.maxAdmitting && (s.behind || now.Sub(s.oldest()) >= s.patience) {
		s.behind = true
		s.mu.Unlock()
		s.metrics.Shed(ShedAdmissions)
		return nil, &OverloadError{Reason: ShedAdmissions, RetryAfter: time.Second}
	}
	s.seq++
	id := s.seq
	s.started[id] = now
	s.mu.Unlock()
	s.metrics.Admitting(1)
	return func() {
		s.mu.Lock()
		delete(s.started, id)
		s.mu.Unlock()
		s.metrics.Admitting(-1)
	}, nil
}

// oldest is when the oldest admission in progress started. Called with
// mu held, only past the bound, so the walk is over maxAdmitting entries
// at a time when the process is refusing work anyway.
func (s *shedder) oldest() time.Time {
	var first time.Time
	for _, t := range s.started {
		if first.IsZero() || t.Before(first) {
			first = t
		}
	}
	return first
}

// admitting is how many admissions are in progress.
func (s *shedder) admitting() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return int64(len(s.started))
}

// queue refuses a task that would wait in providerKey's queue when that
// queue's last read wait is past the bound. The Retry-After grows with how
// far past it is, from one second to thirty: long enough for the backlog
// to shrink, short enough that clients come back as soon as it has.
func (s *shedder) queue(providerKey string) error {
	w, ok := s.waits[providerKey]
	if !ok || s.maxWait <= 0 {
		return nil
	}
	wait := time.Duration(w.Load())
	if wait <= s.maxWait {
		return nil
	}
	s.metrics.Shed(ShedQueue)
	over := time.Duration(math.Ceil((wait - s.maxWait).Seconds())) * time.Second
	return &OverloadError{Reason: ShedQueue, RetryAfter: min(max(over, time.Second), 30*time.Second)}
}

// sample reads every provider queue's wait once. On failure the waits
// read before are forgotten (set to zero): shedding on a stale reading
// would refuse work for a backlog that may be gone.
func (s *shedder) sample(ctx context.Context, pool *pgxpool.Pool) error {
	if s.maxWait <= 0 && s.metrics == nil {
		return nil
	}
	queues := make([]string, 0, len(s.waits))
	byQueue := map[string]string{}
	for key := range s.waits {
		queues = append(queues, queueFor(key))
		byQueue[queueFor(key)] = key
	}
	waits, err := readQueueWaits(ctx, pool, queues)
	if err != nil {
		for key, w := range s.waits {
			w.Store(0)
			s.metrics.QueueWait(key, 0)
		}
		return err
	}
	for queue, d := range waits {
		key := byQueue[queue]
		s.waits[key].Store(int64(d))
		s.metrics.QueueWait(key, d)
	}
	return nil
}

// sampleQueues reads the queues' waits every interval until ctx ends.
func (s *maintenance) sampleQueues(ctx context.Context, interval time.Duration) {
	periodic.Every(ctx, interval, func(ctx context.Context) {
		if err := s.shed.sample(ctx, s.pool); err != nil && ctx.Err() == nil {
			s.cfg.Logger.LogAttrs(ctx, slog.LevelWarn, "reading the queues' waits failed; not shedding on them until the next reading",
				slog.String("error", err.Error()))
		}
	})
}

// QueueWait is how long the next task providerKey's queue hands out had
// been waiting when this process last looked (every
// Config.ShedSampleEvery, once Start or StartListener ran); zero for an
// unknown key or an empty queue.
func (s *Service) QueueWait(providerKey string) time.Duration {
	if w, ok := s.shed.waits[providerKey]; ok {
		return time.Duration(w.Load())
	}
	return 0
}

// Admitting is how many admissions this process has in progress.
func (s *Service) Admitting() int64 { return s.shed.admitting() }
