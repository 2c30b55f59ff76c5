package tasks

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// finishedChannel is the NOTIFY channel on which a finishing transaction
// announces its task id. Notifications are delivered at commit, so a waiter
// woken by one always reads the finished row.
const finishedChannel = "tollgate_task_finished"

// waiter lets requests wait for tasks finished by any instance sharing the
// database. One LISTEN connection per process fans notifications out to the
// requests waiting on each task id.
type waiter struct {
	pool   *pgxpool.Pool
	log    *slog.Logger
	mu     sync.Mutex
	subs   map[string]map[chan struct{}]struct{}
	cancel context.CancelFunc
	done   chan struct{}
}

func newWaiter(pool *pgxpool.Pool, log *slog.Logger) *waiter {
	return &waiter{pool: pool, log: log, subs: map[string]map[chan struct{}]struct{}{}}
}

// subscribe returns a channel that receives a value when the task may have
// finished, and a function to stop listening.
func (w *waiter) subscribe(id string) (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	w.mu.Lock()
	if w.subs[id] == nil {
		w.subs[id] = map[chan struct{}]struct{}{}
	}
	w.subs[id][ch] = struct{}{}
	w.mu.Unlock()
	return ch, func() {
		w.mu.Lock()
		delete(w.subs[id], ch)
		if len(w.subs[id]) == 0 {
			delete(w.subs, id)
		}
		w.mu.Unlock()
	}
}

// wake signals the waiters of one task, or of every task when id is empty
// (after a reconnect, when notifications may have been missed).
func (w *waiter) wake(id string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for key, set := range w.subs {
		if id != "" && key != id {
			continue
		}
		for ch := range set {
			select {
			case ch <- struct{}{}:
			default:
			}
		}
	}
}

// run holds the LISTEN connection until ctx ends, reconnecting with a
// bounded backoff when the database goes away.
func (w *waiter) run(ctx context.Context) {
	ctx, cancel := context.WithCancel(ctx)
	w.mu.Lock()
	w.cancel, w.done = cancel, make(chan struct{})
	done := w.done
	w.mu.Unlock()
	defer close(done)
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		err := w.listen(ctx)
		if ctx.Err() != nil {
			return
		}
		w.log.Warn("task completion listener lost its connection; reconnecting", slog.String("error", err.Error()))
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 5*time.Second)
	}
}

func (w *waiter) listen(ctx context.Context) error {
	pooled, err := w.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	// A LISTEN connection must not go back to the pool still listening.
	conn := pooled.Hijack()
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "LISTEN "+finishedChannel); err != nil {
		return err
	}
	w.wake("") // anything may have finished while we were not listening
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		w.wake(n.Payload)
	}
}

func (w *waiter) stop() {
	w.mu.Lock()
	cancel, done := w.cancel, w.done
	w.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
}

// recheckEvery bounds how long a waiter can miss a finish if a notification
// is lost (for example while the listener reconnects).
const recheckEvery = 2 * time.Second

// Wait returns the owner's task once it is finished or when d has passed,
// whichever comes first; the task as it then is either way.
func (s *Service) Wait(ctx context.Context, owner, id string, d time.Duration) (Task, error) {
	return s.wait(ctx, owner, id, d, false)
}

// WaitAnswerable is Wait for synchronous callers: it also returns as soon
// as the task is queued behind a paused key or an open breaker (its Error
// says why), since a caller holding a connection cannot wait that out.
func (s *Service) WaitAnswerable(ctx context.Context, owner, id string, d time.Duration) (Task, error) {
	return s.wait(ctx, owner, id, d, true)
}

func (s *Service) wait(ctx context.Context, owner, id string, d time.Duration, blocked bool) (Task, error) {
	ch, unsubscribe := s.waiter.subscribe(id)
	defer unsubscribe()
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	recheck := time.NewTicker(recheckEvery)
	defer recheck.Stop()
	for {
		t, err := s.Get(ctx, owner, id)
		if err != nil || t.Status.Final() || (blocked && t.Error != nil) {
			return t, err
		}
		select {
		case <-ctx.Done():
			return t, nil
		case <-deadline.C:
			return s.Get(ctx, owner, id)
		case <-ch:
		case <-recheck.C:
		}
	}
}
