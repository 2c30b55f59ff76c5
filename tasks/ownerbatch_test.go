package tasks

import (
	"errors"
	"sync"
	"testing"

	"github.com/tollgate/tollgate/internal/eventually"
)

// queued is how many values of owner wait, -1 when no batch of owner runs.
func (g *ownerBatcher[T]) queued(owner string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	w := g.owners[owner]
	if w == nil {
		return -1
	}
	return len(w.queued)
}

// TestOwnerBatcherBatchesAndHandsOver: values of one owner that arrive while a
// batch runs go into later batches, every value is run exactly once and
// hears its batch's result, and a panicking batch still releases the
// others (with errAlone) and the owner.
func TestOwnerBatcherBatchesAndHandsOver(t *testing.T) {
	var g ownerBatcher[int]
	release := make(chan struct{})
	var mu sync.Mutex
	seen := map[int]int{}
	var sizes []int
	run := func(batch []int) error {
		if batch[0] == 0 {
			<-release // the first batch holds the owner while the others queue
		}
		mu.Lock()
		defer mu.Unlock()
		sizes = append(sizes, len(batch))
		for _, v := range batch {
			seen[v]++
		}
		return nil
	}
	first := make(chan error)
	go func() { first <- g.do("o", 0, run) }()
	eventually.Wait(t, "the first batch running", func() bool { return g.queued("o") == 0 })
	var wg sync.WaitGroup
	errs := make([]error, 20)
	for i := 1; i <= 20; i++ {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i-1] = g.do("o", i, run) }()
	}
	eventually.Wait(t, "20 values queued", func() bool { return g.queued("o") == 20 })
	close(release)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("value %d: %v", i+1, err)
		}
	}
	for v := 0; v <= 20; v++ {
		if seen[v] != 1 {
			t.Errorf("value %d ran %d times, want once", v, seen[v])
		}
	}
	if len(sizes) != 2 || sizes[0] != 1 || sizes[1] != 20 {
		t.Errorf("batch sizes %v, want [1 20]: the queued values run together", sizes)
	}
	if len(g.owners) != 0 {
		t.Errorf("owners left: %d, want 0", len(g.owners))
	}

	// A panicking batch: its other members get errAlone, the owner is free.
	hold := make(chan struct{})
	panicking := func(batch []int) error {
		<-hold
		panic("boom")
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer func() { _ = recover() }()
		_ = g.do("p", 1, panicking)
	}()
	eventually.Wait(t, "the panicking batch running", func() bool { return g.queued("p") == 0 })
	other := make(chan error)
	go func() { other <- g.do("p", 2, func([]int) error { return nil }) }()
	eventually.Wait(t, "a value queued behind it", func() bool { return g.queued("p") == 1 })
	close(hold)
	<-done
	// Value 2 was queued behind the panicking batch: it runs next, on its own.
	if err := <-other; err != nil && !errors.Is(err, errAlone) {
		t.Fatalf("value behind a panicking batch: %v", err)
	}
	if len(g.owners) != 0 {
		t.Errorf("owners left after a panic: %d, want 0", len(g.owners))
	}
}

// TestOwnerBatcherLanesRunBatchesSideBySide: with two lanes, two batches of one
// owner run at once and a third value waits for a lane; a lane left is
// handed to the oldest waiting value, with whatever queued behind it; every
// value runs once, and the owner is forgotten when both lanes are free.
func TestOwnerBatcherLanesRunBatchesSideBySide(t *testing.T) {
	g := ownerBatcher[int]{lanes: 2}
	var mu sync.Mutex
	running, most := 0, 0
	seen := map[int]int{}
	var sizes []int
	gates := map[int]chan struct{}{0: make(chan struct{}), 1: make(chan struct{})}
	run := func(batch []int) error {
		mu.Lock()
		running++
		most = max(most, running)
		gate := gates[batch[0]]
		mu.Unlock()
		if gate != nil {
			<-gate
		}
		mu.Lock()
		defer mu.Unlock()
		running--
		sizes = append(sizes, len(batch))
		for _, v := range batch {
			seen[v]++
		}
		return nil
	}
	var wg sync.WaitGroup
	errs := make([]error, 12)
	start := func(v int) {
		wg.Add(1)
		go func() { defer wg.Done(); errs[v] = g.do("o", v, run) }()
	}
	start(0)
	eventually.Wait(t, "the first batch running", func() bool { mu.Lock(); defer mu.Unlock(); return running == 1 })
	start(1)
	eventually.Wait(t, "the second batch running beside it", func() bool { mu.Lock(); defer mu.Unlock(); return running == 2 })
	if q := g.queued("o"); q != 0 {
		t.Fatalf("queued = %d with a lane free for each, want 0", q)
	}
	for v := 2; v < 12; v++ {
		start(v)
	}
	eventually.Wait(t, "10 values waiting for a lane", func() bool { return g.queued("o") == 10 })
	close(gates[0]) // value 2 takes the lane, with the nine behind it
	eventually.Wait(t, "the queue taken", func() bool { return g.queued("o") == 0 })
	close(gates[1])
	wg.Wait()
	for v, err := range errs {
		if err != nil {
			t.Errorf("value %d: %v", v, err)
		}
		if seen[v] != 1 {
			t.Errorf("value %d ran %d times, want once", v, seen[v])
		}
	}
	if most != 2 {
		t.Errorf("at most %d batches ran at once, want 2", most)
	}
	if len(sizes) != 3 || sizes[2] != 10 && sizes[1] != 10 {
		t.Errorf("batch sizes %v, want two of one and one of ten", sizes)
	}
	if len(g.owners) != 0 {
		t.Errorf("owners left: %d, want 0", len(g.owners))
	}
}
