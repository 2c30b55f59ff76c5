package keylock

import (
	"context"
	"errors"
	"sync"
	"testing"
)

// TestLockExcludesPerKey runs many goroutines through one key and checks
// that at most one is ever inside, and that other keys do not wait for it.
func TestLockExcludesPerKey(t *testing.T) {
	var l Locks
	ctx := context.Background()
	var inside, maxInside, total int
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := 0; i < 200; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			unlock, err := l.Lock(ctx, "owner")
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			inside++
			maxInside = max(maxInside, inside)
			mu.Unlock()
			mu.Lock()
			inside--
			total++
			mu.Unlock()
			unlock()
			unlock() // a second call is harmless
		}()
	}
	// Another key is free while "owner" is contended.
	held, err := l.Lock(ctx, "owner")
	if err != nil {
		t.Fatal(err)
	}
	other, err := l.Lock(ctx, "other")
	if err != nil {
		t.Fatal(err)
	}
	other()
	held()
	wg.Wait()
	if maxInside != 1 || total != 200 {
		t.Fatalf("max inside %d (want 1), total %d (want 200)", maxInside, total)
	}
	if len(l.m) != 0 {
		t.Fatalf("%d entries left after every lock was freed, want 0", len(l.m))
	}
}

// TestLockHonoursContext: a waiter whose context ends gets its error and
// leaves no trace.
func TestLockHonoursContext(t *testing.T) {
	var l Locks
	unlock, err := l.Lock(context.Background(), "k")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := l.Lock(ctx, "k"); !errors.Is(err, context.Canceled) {
		t.Fatalf("Lock with a canceled context: %v, want context.Canceled", err)
	}
	unlock()
	if len(l.m) != 0 {
		t.Fatalf("%d entries left, want 0", len(l.m))
	}
}
