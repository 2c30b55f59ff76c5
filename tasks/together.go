package tasks

import (
	"errors"
	"slices"
	"sync"
)

// maxTogether bounds how many tasks one batch holds.
const maxTogether = 64

// together batches the work of one owner: admissions, or the recording of
// succeeded calls, whose transactions all end on the owner's budget row. A
// batch shares one transaction, one hand-over of the row's lock and one
// commit.
//
// Batching is natural: work that finds no batch of its owner in progress
// runs at once (a batch of one, no added wait); work that arrives meanwhile
// queues, and the oldest of it runs the next batch, with everything queued
// by then, once the current batch is done. Each goroutine runs at most one
// batch, its own, so none is held past its own work for long.
type together[T any] struct {
	mu     sync.Mutex
	owners map[string]*waiting[T]
}

type waiting[T any] struct {
	queued []*member[T]
}

type member[T any] struct {
	v T
	// done receives the batch's result, or errLead when this member is to
	// run the next batch.
	done chan error
}

var errLead = errors.New("tasks: run the next batch")

// do runs v in a batch of owner's work with run, and returns run's result
// for that batch. run receives the batch's values, oldest first, v among
// them.
func (g *together[T]) do(owner string, v T, run func(batch []T) error) error {
	me := &member[T]{v: v, done: make(chan error, 1)}
	g.mu.Lock()
	if g.owners == nil {
		g.owners = map[string]*waiting[T]{}
	}
	w, busy := g.owners[owner]
	if !busy {
		w = &waiting[T]{}
		g.owners[owner] = w
	}
	w.queued = append(w.queued, me)
	g.mu.Unlock()

	if busy {
		// The goroutine running the current batch hands over to this one
		// or runs this value in a batch; it never leaves it waiting. The
		// wait is bounded by that batch's transaction.
		if err := <-me.done; !errors.Is(err, errLead) {
			return err
		}
	}
	batch := g.take(owner)
	values := make([]T, len(batch))
	for i, m := range batch {
		values[i] = m.v
	}
	// Whatever happens in run, a panic included, the others hear back
	// (errAlone unless run returned) and the next batch gets its runner:
	// a batch must never strand its owner's later work.
	err := errAlone
	defer func() {
		for _, m := range batch {
			if m != me {
				m.done <- err
			}
		}
		g.handOver(owner)
	}()
	err = run(values)
	return err
}

// take removes up to maxTogether queued members of owner, oldest first.
func (g *together[T]) take(owner string) []*member[T] {
	g.mu.Lock()
	defer g.mu.Unlock()
	w := g.owners[owner]
	n := min(len(w.queued), maxTogether)
	batch := slices.Clone(w.queued[:n])
	w.queued = w.queued[n:]
	return batch
}

// handOver makes the oldest queued member of owner run the next batch, or
// forgets the owner when none is queued.
func (g *together[T]) handOver(owner string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	w := g.owners[owner]
	if len(w.queued) == 0 {
		delete(g.owners, owner)
		return
	}
	w.queued[0].done <- errLead
}
