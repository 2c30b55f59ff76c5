package tasks

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tollgate/tollgate/internal/periodic"
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
	pool    *pgxpool.Pool
	log     *slog.Logger
	recheck time.Duration // the sweep's period
	mu      sync.Mutex
	subs    map[string]map[chan *Task]bool
	cancel  context.CancelFunc
	done    chan struct{}
	running bool        // run is listening and sweeping
	out     chan string // ids to announce to other instances
}

func newWaiter(pool *pgxpool.Pool, log *slog.Logger, recheck time.Duration) *waiter {
	return &waiter{pool: pool, log: log, recheck: recheck, subs: map[string]map[chan *Task]bool{}, out: make(chan string, 8192)}
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
// their process's next sweep.
func (w *waiter) announce(id string, t *Task) {
	w.wake(id, t)
	select {
	case w.out <- id:
	default:
	}
}

// flushTimeout bounds one notification. Each write has a context of its
// own, not send's: a stop cancels send's context at any moment, and a
// write it cut short would lose the last finishes of a normal stop and
// warn about it. Only a write the database did not take within the bound
// (it is down or overloaded) warns.
const flushTimeout = 2 * time.Second

// send announces queued ids until ctx ends, then flushes what is left.
func (w *waiter) send(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			for w.flush(ctx, "") {
			}
			return
		case first := <-w.out:
			w.flush(ctx, first)
		}
	}
}

// flush sends one notification with first (if any) and whatever else is
// queued, up to announceBatch ids, within flushTimeout whether or not ctx
// has ended. It reports whether it sent anything.
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
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), flushTimeout)
	defer cancel()
	if _, err := w.pool.Exec(fctx, `SELECT pg_notify($1, $2)`, finishedChannel, strings.Join(batch, ",")); err != nil {
		w.log.Warn("announcing finished tasks failed; other instances' waiters will recheck", slog.Int("tasks", len(batch)), slog.String("error", err.Error()))
	}
	return true
}

// subscribe returns a channel that receives a value when the task may have
// finished (the finished task itself, when the process that finished it
// read it back; nil when the waiter must read it), and a function to stop
// listening. blocked asks to be woken too when the sweep finds the task
// blocked (a Wait with ReturnIfBlocked returns then; any other would only
// read it again).
func (w *waiter) subscribe(id string, blocked bool) (<-chan *Task, func()) {
	ch := make(chan *Task, 1)
	w.mu.Lock()
	if w.subs[id] == nil {
		w.subs[id] = map[chan *Task]bool{}
	}
	w.subs[id][ch] = blocked
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
	signal := func(set map[chan *Task]bool) {
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
// bounded backoff when the database goes away, and sweeps.
func (w *waiter) run(ctx context.Context) {
	ctx, cancel := context.WithCancel(ctx)
	w.mu.Lock()
	w.cancel, w.done, w.running = cancel, make(chan struct{}), true
	done := w.done
	w.mu.Unlock()
	defer close(done)
	defer func() {
		w.mu.Lock()
		w.running = false
		w.mu.Unlock()
	}()
	var helpers sync.WaitGroup
	helpers.Go(func() { w.send(ctx) })
	helpers.Go(func() { w.sweep(ctx) })
	defer helpers.Wait()
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

// sweepBatch bounds the task ids one sweep query carries.
const sweepBatch = 1000

// sweep reads again, every w.recheck, whether the tasks this process's
// requests wait for have finished or become blocked, in one query for all
// of them, and wakes those that have: their announcement may have been
// lost (a full announcement queue, a listener reconnecting, an instance
// dying between its commit and its NOTIFY). One query per process whatever
// the number of waiters: when each waiter re-read its own task every two
// seconds, waiting cost grew with the wait, and at 500 tasks/s offered to a
// host whose ceiling was 400 those reads (4.6 per task, 2.4 ms each) took
// the CPU the finishes needed, and fewer tasks finished the longer they
// waited.
func (w *waiter) sweep(ctx context.Context) {
	periodic.Every(ctx, w.recheck, func(ctx context.Context) {
		if err := w.sweepOnce(ctx); err != nil && ctx.Err() == nil {
			w.log.Warn("rechecking waited-for tasks failed; next sweep retries", slog.String("error", err.Error()))
		}
	})
}

// sweepOnce wakes the waiters of every waited-for task that is finished or
// blocked (its error set while queued).
func (w *waiter) sweepOnce(ctx context.Context) error {
	w.mu.Lock()
	ids := make([]string, 0, len(w.subs))
	for id := range w.subs {
		// A Get validates its id after subscribing: skip what is not one.
		if uuid.Validate(id) == nil {
			ids = append(ids, id)
		}
	}
	w.mu.Unlock()
	for len(ids) > 0 {
		n := min(len(ids), sweepBatch)
		rows, err := w.pool.Query(ctx, `
			SELECT id::text, finished_at IS NOT NULL FROM tasks
			WHERE id = ANY($1::uuid[]) AND (finished_at IS NOT NULL OR error IS NOT NULL)`, ids[:n])
		if err != nil {
			return err
		}
		type ended struct {
			id       string
			finished bool
		}
		list, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (ended, error) {
			var e ended
			return e, r.Scan(&e.id, &e.finished)
		})
		if err != nil {
			return err
		}
		for _, e := range list {
			if e.finished {
				w.wake(e.id, nil)
			} else {
				w.wakeBlocked(e.id)
			}
		}
		ids = ids[n:]
	}
	return nil
}

// wakeBlocked signals the waiters of a blocked task that asked for it.
func (w *waiter) wakeBlocked(id string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for ch, blocked := range w.subs[id] {
		if blocked {
			select {
			case ch <- nil:
			default:
			}
		}
	}
}

// sweeping reports whether run is sweeping: when not (a service never
// started), each waiter rechecks its own task.
func (w *waiter) sweeping() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.running
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

// WaitParams says which task Wait waits for, for how long, and for what.
type WaitParams struct {
	// Owner and ID name the task; Owner "" waits for any owner's task.
	Owner, ID string
	// Created, when set, names the task instead: what Create returned to a
	// Submission with Await. Create began listening for the task before
	// admitting it, so no finish can come between the admission and this
	// wait, and the wait starts from the task as admitted instead of
	// reading it; a task finished by this process arrives with its
	// announcement, and the whole wait is then no read at all. Every such
	// Created must be waited for once (a replayed task carries no
	// subscription and is waited for as any other).
	Created *Created
	// For bounds the wait.
	For time.Duration
	// ReturnIfBlocked returns as soon as the task is blocked: queued behind
	// a paused provider key or an open breaker, its Error saying why. A
	// caller holding a connection open cannot wait that out.
	ReturnIfBlocked bool
}

// Wait returns the task once it is finished (or blocked, with
// ReturnIfBlocked) or when p.For has passed, whichever comes first: the
// task as it then is either way. It returns ErrNotFound for a task that is
// not the owner's.
func (s *Service) Wait(ctx context.Context, p WaitParams) (Task, error) {
	return s.reader.await(ctx, p)
}

// await carries out Service.Wait.
func (s *reader) await(ctx context.Context, p WaitParams) (Task, error) {
	if c := p.Created; c != nil {
		p.Owner, p.ID = c.Task.OwnerID, c.Task.ID
		if c.watch != nil {
			defer c.watch.stop()
			admitted := c.Task
			return s.wait(ctx, p, c.watch.ch, &admitted)
		}
		if c.Task.Status.Final() {
			return c.Task, nil
		}
	}
	ch, unsubscribe := s.waiter.subscribe(p.ID, p.ReturnIfBlocked)
	defer unsubscribe()
	return s.wait(ctx, p, ch, nil)
}

// watch is a subscription Create takes for a caller that waits
// (Submission.Await), before the task is admitted.
type watch struct {
	ch   <-chan *Task
	stop func()
}

// wait waits on ch for the task p names; known, when set, is the task as
// it was when ch began listening, so the first read is skipped.
func (s *reader) wait(ctx context.Context, p WaitParams, ch <-chan *Task, known *Task) (Task, error) {
	deadline := time.NewTimer(p.For)
	defer deadline.Stop()
	// A lost announcement is found by the process's sweep; a process that
	// does not sweep (its service never started) rechecks per waiter.
	var recheck <-chan time.Time
	if !s.waiter.sweeping() {
		t := time.NewTicker(s.waiter.recheck)
		defer t.Stop()
		recheck = t.C
	}
	for {
		var t Task
		if known != nil {
			t, known = *known, nil
		} else {
			var err error
			if t, err = s.read(ctx, clientViewColumns, p.Owner, p.ID); err != nil {
				return t, err
			}
		}
		if t.Status.Final() || (p.ReturnIfBlocked && t.Error != nil) {
			return t, nil
		}
		select {
		case <-ctx.Done():
			return t, nil
		case <-deadline.C:
			return s.read(ctx, clientViewColumns, p.Owner, p.ID)
		case got := <-ch:
			if got != nil && got.Status.Final() && (p.Owner == "" || got.OwnerID == p.Owner) {
				return got.copy(), nil
			}
		case <-recheck:
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
