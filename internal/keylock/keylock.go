// Package keylock serialises work on one key within one process.
//
// Why: every reservation and settlement of an owner updates the owner's
// budget row. PostgreSQL serialises them on the row lock, and a row lock
// with many waiters is expensive to hand over: when its holder commits,
// every waiter wakes, and all but one go back to sleep. Under load that
// herd, not the work, sets the owner's throughput, and it gets worse as
// load grows. Queuing those statements in the process first (a Go channel
// handover costs microseconds) leaves PostgreSQL at most one waiter per
// instance for the row.
package keylock

import (
	"context"
	"sync"
)

// Locks holds one lock per key, created on first use and dropped when no
// one holds or waits for it. The zero value is ready to use.
type Locks struct {
	mu sync.Mutex
	m  map[string]*entry
}

type entry struct {
	ch   chan struct{} // holds a token while the key is locked
	refs int           // holders and waiters
}

// Lock waits until key is free or ctx ends, and returns the function that
// frees it again. It returns ctx's error when ctx ends first.
func (l *Locks) Lock(ctx context.Context, key string) (unlock func(), err error) {
	l.mu.Lock()
	if l.m == nil {
		l.m = map[string]*entry{}
	}
	e := l.m[key]
	if e == nil {
		e = &entry{ch: make(chan struct{}, 1)}
		l.m[key] = e
	}
	e.refs++
	l.mu.Unlock()

	select {
	case e.ch <- struct{}{}:
	case <-ctx.Done():
		l.release(key, e)
		return nil, ctx.Err()
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			<-e.ch
			l.release(key, e)
		})
	}, nil
}

func (l *Locks) release(key string, e *entry) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if e.refs--; e.refs == 0 {
		delete(l.m, key)
	}
}
