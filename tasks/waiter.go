package tasks

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tollgate/tollgate/internal/pglisten"
)

// finishedChannel is the NOTIFY channel on which tasks that finished (or
// became blocked) are announced, after their transactions committed, so a
// waiter woken by one always reads the finished row. The payload is one
// task id or several, comma-separated.
const finishedChannel = "tollgate_task_finished"

// announceBatch bounds the ids in one notification: 36-byte ids and commas
// well under NOTIFY's 8,000-byte payload limit.
const announceBatch = 190

// waiter lets requests wait for tasks finished by any instance sharing the
// database. One LISTEN connection per process fans notifications out to the
// requests waiting on each task id.
type waiter struct {
	pool   *pgxpool.Pool
	log    *slog.Logger
	mu     sync.Mutex
	subs   map[string]map[chan *Task]struct{}
	cancel context.CancelFunc
	done   chan struct{}
	out    chan string // ids to announce to other instances
}

func newWaiter(pool *pgxpool.Pool, log *slog.Logger) *waiter {
	return &waiter{pool: pool, log: log, subs: map[string]map[chan *Task]struct{}{}, out: make(chan string, 8192)}
}

// announce tells the waiters of a task that it finished or became blocked:
// this process's at once (with the finished task when the recorder read it
// back, else t is nil and they read it), other instances' by a NOTIFY that one goroutine
// (send) sends after the fact for whatever accumulated meanwhile. Inside
// every finishing transaction a NOTIFY would serialise their commits on
// PostgreSQL's notification queue lock, held through the commit's flush;
// batched, it is one small transaction for many tasks. Call it only after
// the task's transaction committed. Should the queue be full, or the
// process die before sending, other instances' waiters find the task at
// their next recheck (recheckEvery).
func (w *waiter) announce(id string, t *Task) {
	w.wake(id, t)
	select {
	case w.out <- id:
	default:
	}
}

// send announces queued ids until ctx ends, then flushes what is left.
func (w *waiter) send(ctx context.Context) {
	for {
		var first string
		select {
		case <-ctx.Done():
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
			defer cancel()
			for w.flush(fctx, "") {
			}
			return
		case first = <-w.out:
		}
		w.flush(ctx, first)
	}
}

// flush sends one notification with first (if any) and whatever else is
// queued, up to announceBatch ids. It reports whether it sent anything.
func (w *waiter) flush(ctx context.Context, first string) bool {
	batch := make([]string, 0, announceBatch)
	if first != "" {
		batch = append(batch, first)
	}
	for len(batch) < announceBatch {
		select {
		case id := <-w.out:
			batch = append(batch, id)
			continue
		default:
		}
		break
	}
	if len(batch) == 0 {
		return false
	}
	if _, err := w.pool.Exec(ctx, `SELECT pg_notify($1, $2)`, finishedChannel, strings.Join(batch, ",")); err != nil {
		w.log.Warn("announcing finished tasks failed; other instances' waiters will recheck", slog.Int("tasks", len(batch)), slog.String("error", err.Error()))
	}
	return true
}

// subscribe returns a channel that receives a value when the task may have
// finished (the finished task itself, when the process that finished it
// read it back; nil when the waiter must read it), and a function to stop
// listening.
func (w *waiter) subscribe(id string) (<-chan *Task, func()) {
	ch := make(chan *Task, 1)
	w.mu.Lock()
	if w.subs[id] == nil {
		w.subs[id] = map[chan *Task]struct{}{}
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

// waiting reports whether a request of this process waits for the task:
// only then does its recorder read the finished task back for them.
func (w *waiter) waiting(id string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.subs[id]) > 0
}

// wake signals the waiters of one task, or of every task when id is empty
// (after a reconnect, when notifications may have been missed). A signal
// carrying the finished task t replaces a bare one still pending, so that
// the waiter need not read what the recorder already read; senders hold
// w.mu, so the replacing send cannot fail.
func (w *waiter) wake(id string, t *Task) {
	w.mu.Lock()
	defer w.mu.Unlock()
	signal := func(set map[chan *Task]struct{}) {
		for ch := range set {
			select {
			case ch <- t:
			default:
				if t != nil {
					select {
					case <-ch:
					default:
					}
					ch <- t
				}
			}
		}
	}
	if id != "" {
		signal(w.subs[id])
		return
	}
	for _, set := range w.subs {
		signal(set)
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
	sent := make(chan struct{})
	go func() {
		defer close(sent)
		w.send(ctx)
	}()
	defer func() { <-sent }()
	pglisten.Run(ctx, w.pool, finishedChannel, "task completion listener", w.log, pglisten.Handler{
		// Anything may have finished while we were not listening.
		Listening: func() { w.wake("", nil) },
		Notify: func(payload string) {
			for id := range strings.SplitSeq(payload, ",") {
				w.wake(id, nil)
			}
		},
	})
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
	ch, unsubscribe := s.waiter.subscribe(id)
	defer unsubscribe()
	return s.wait(ctx, owner, id, ch, nil, d, false)
}

// WaitAnswerable is Wait for synchronous callers: it also returns as soon
// as the task is queued behind a paused key or an open breaker (its Error
// says why), since a caller holding a connection cannot wait that out.
func (s *Service) WaitAnswerable(ctx context.Context, owner, id string, d time.Duration) (Task, error) {
	ch, unsubscribe := s.waiter.subscribe(id)
	defer unsubscribe()
	return s.wait(ctx, owner, id, ch, nil, d, true)
}

// AwaitCreated is Wait for a task Create returned to a Submission with
// Await set: Create began listening for the task before admitting it, so
// no finish can come between the admission and this wait, and the wait
// starts from the task as admitted instead of reading it. A task finished
// by this process arrives with its announcement: the whole wait is then no
// read at all. It must be called once for every such Created (a replay
// carries no subscription and is waited for as Wait does).
func (s *Service) AwaitCreated(ctx context.Context, c Created, d time.Duration) (Task, error) {
	return s.awaitCreated(ctx, c, d, false)
}

// AwaitCreatedAnswerable is AwaitCreated as WaitAnswerable waits.
func (s *Service) AwaitCreatedAnswerable(ctx context.Context, c Created, d time.Duration) (Task, error) {
	return s.awaitCreated(ctx, c, d, true)
}

func (s *Service) awaitCreated(ctx context.Context, c Created, d time.Duration, blocked bool) (Task, error) {
	if c.watch == nil {
		if c.Task.Status.Final() {
			return c.Task, nil
		}
		ch, unsubscribe := s.waiter.subscribe(c.Task.ID)
		defer unsubscribe()
		return s.wait(ctx, c.Task.OwnerID, c.Task.ID, ch, nil, d, blocked)
	}
	defer c.watch.stop()
	admitted := c.Task
	return s.wait(ctx, c.Task.OwnerID, c.Task.ID, c.watch.ch, &admitted, d, blocked)
}

// watch is a subscription Create takes for a caller that waits
// (Submission.Await), before the task is admitted.
type watch struct {
	ch   <-chan *Task
	stop func()
}

// wait waits on ch for the owner's task; known, when set, is the task as
// it was when ch began listening, so the first read is skipped.
func (s *Service) wait(ctx context.Context, owner, id string, ch <-chan *Task, known *Task, d time.Duration, blocked bool) (Task, error) {
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	recheck := time.NewTicker(recheckEvery)
	defer recheck.Stop()
	for {
		var t Task
		if known != nil {
			t, known = *known, nil
		} else {
			var err error
			if t, err = s.Get(ctx, owner, id); err != nil {
				return t, err
			}
		}
		if t.Status.Final() || (blocked && t.Error != nil) {
			return t, nil
		}
		select {
		case <-ctx.Done():
			return t, nil
		case <-deadline.C:
			return s.Get(ctx, owner, id)
		case got := <-ch:
			if got != nil && got.Status.Final() && (owner == "" || got.OwnerID == owner) {
				return got.copy(), nil
			}
		case <-recheck.C:
		}
	}
}

// copy returns the announced task t for one waiter: several may share it,
// and its Result is a pointer their callers may change.
func (t *Task) copy() Task {
	c := *t
	if c.Result != nil {
		r := *c.Result
		c.Result = &r
	}
	return c
}
