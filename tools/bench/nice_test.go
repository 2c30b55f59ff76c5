package bench

import (
	"errors"
	"os"
	"runtime"
	"sync"
	"syscall"
	"testing"
)

func TestStatNice(t *testing.T) {
	for _, tc := range []struct {
		name, stat string
		want       int
		bad        bool
	}{
		{name: "plain", stat: "123 (tollbench) S 1 123 123 0 -1 4194560 100 0 0 0 5 3 0 0 20 0 7 0 100 1000 50 18446744073709551615", want: 0},
		{name: "niced", stat: "123 (tollbench) S 1 123 123 0 -1 4194560 100 0 0 0 5 3 0 0 30 10 7 0 100 1000 50 18446744073709551615", want: 10},
		{name: "name with spaces and parentheses", stat: "9 (a (b) c) R 1 9 9 0 -1 0 0 0 0 0 0 0 0 0 25 5 1 0 1 1 1 1", want: 5},
		{name: "negative", stat: "9 (x) R 1 9 9 0 -1 0 0 0 0 0 0 0 0 0 10 -10 1 0", want: -10},
		{name: "no name", stat: "9 x R 1", bad: true},
		{name: "short", stat: "9 (x) R 1 9 9", bad: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := statNice([]byte(tc.stat))
			if tc.bad {
				if err == nil {
					t.Fatalf("statNice = %d, want an error", got)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("statNice = %d, %v; want %d", got, err, tc.want)
			}
		})
	}
}

// TestLowerPriorityReachesEveryThread lowers this test process's priority
// by one step and reads it back from every thread, those the runtime
// starts meanwhile included, then restores it (which needs privilege).
func TestLowerPriorityReachesEveryThread(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("Linux only")
	}
	was, err := threadNice(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if was >= 19 {
		t.Skip("already at the lowest priority")
	}
	// More threads than the one running this test: some blocked in
	// system calls of their own.
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			<-stop
		}()
	}
	defer func() { close(stop); wg.Wait() }()

	restore, err := lowerPriority(was + 1)
	if err != nil {
		t.Fatal(err)
	}
	tids, err := threads()
	if err != nil {
		t.Fatal(err)
	}
	if len(tids) < 2 {
		t.Fatalf("%d threads listed, want several", len(tids))
	}
	for _, tid := range tids {
		got, err := threadNice(tid)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil || got != was+1 {
			t.Errorf("thread %d at nice %d (%v), want %d", tid, got, err, was+1)
		}
	}
	if err := restore(); err != nil {
		if errors.Is(err, syscall.EACCES) || errors.Is(err, syscall.EPERM) {
			t.Skipf("cannot raise the priority back without privilege: %v", err)
		}
		t.Fatal(err)
	}
	for _, tid := range tids {
		if got, err := threadNice(tid); err == nil && got != was {
			t.Errorf("thread %d at nice %d after restore, want %d", tid, got, was)
		}
	}
	// Lowering to a value at or under the current one changes nothing.
	same, err := lowerPriority(was)
	if err != nil {
		t.Fatal(err)
	}
	if err := same(); err != nil {
		t.Fatal(err)
	}
}
