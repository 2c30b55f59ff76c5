package tasks

import (
	"errors"
	"slices"
	"sync"
)

// maxBatch bounds how many tasks one batch holds.
const maxBatch = 64

// errAlone: the batch did not commit; each of its members takes its
// ordinary path on its own.
var errAlone = errors.New("tasks: run alone")

// ownerBatcher batches the work of one owner: admissions, or the recording of
// succeeded calls, whose transactions all end on the owner's budget row. A
// batch shares one transaction, one hand-over of the row's lock and one
// commit.
//
// Batching is natural: work that finds one of its owner's lanes free runs
// at once (a batch of one, no added wait); work that arrives while every
// lane runs a batch queues, and the oldest of it runs the next batch, with
// everything queued by then, in the first lane to come free. Each
// goroutine runs at most one batch, its own, so none is held past its own
// work for long.
type ownerBatcher[T any] struct {
	// lanes is how many batches of one owner may run at once; 0 means 1.
	lanes  int
	mu     sync.Mutex
	owners map[string]*waiting[T]
}

type waiting[T any] struct {
	running int // batches of the owner running
	queued  []*member[T]
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
func (g *ownerBatcher[T]) do(owner string, v T, run func(batch []T) error) error {
	me := &member[T]{v: v, done: make(chan error, 1)}
	g.mu.Lock()
	if g.owners == nil {
		g.owners = map[string]*waiting[T]{}
	}
	w := g.owners[owner]
	if w == nil {
		w = &waiting[T]{}
		g.owners[owner] = w
	}
	// A lane is free only while nothing is queued: a batch leaving its
	// lane hands it to the oldest queued value first (handOver).
	lead := w.running < max(g.lanes, 1)
	if lead {
		w.running++
	} else {
		w.queued = append(w.queued, me)
	}
	g.mu.Unlock()

	if !lead {
		// A goroutine running a batch of owner hands its lane over to
		// this one or runs this value in its next batch; it never leaves
		// it waiting. The wait is bounded by that batch's transaction.
		if err := <-me.done; !errors.Is(err, errLead) {
			return err
		}
	}
	batch := append([]*member[T]{me}, g.take(owner, maxBatch-1)...)
	values := make([]T, len(batch))
	for i, m := range batch {
		values[i] = m.v
	}
	// Whatever happens in run, a panic included, the others hear back
	// (errAlone unless run returned) and the next batch gets its runner:
	// a batch must never strand its owner's later work.
	err := errAlone
	defer func() {
		for _, m := range batch[1:] {
			m.done <- err
		}
		g.handOver(owner)
	}()
	err = run(values)
	return err
}

// take removes up to n queued members of owner, oldest first.
func (g *ownerBatcher[T]) take(owner string, n int) []*member[T] {
	g.mu.Lock()
	defer g.mu.Unlock()
	w := g.owners[owner]
	n = min(len(w.queued), n)
	batch := slices.Clone(w.queued[:n])
	w.queued = w.queued[n:]
	return batch
}

// handOver gives the lane a batch of owner just left to the oldest queued
// member, which runs the next batch, or frees the lane when none is
// queued, forgetting the owner when no lane is in use.
func (g *ownerBatcher[T]) handOver(owner string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	w := g.owners[owner]
	if len(w.queued) == 0 {
		w.running--
		if w.running == 0 {
			delete(g.owners, owner)
		}
		return
	}
	next := w.queued[0]
	w.queued = w.queued[1:]
	next.done <- errLead
}
