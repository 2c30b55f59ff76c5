package bench

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"syscall"
)

// lowerPriority sets every thread of this process to nice n, for the
// throughput steps: tollbench, its latency proxy and the fake provider
// share the machine's cores with Tollgate and PostgreSQL, and at equal
// priority their bursts preempt the server and its backends at random,
// which lands in the very tail being measured. Niced, the harness still
// gets every idle cycle, and any delay it suffers counts against Tollgate
// (latencies run from each arrival's due time), so the change can only
// take the harness's interference out, never hide the server's time.
//
// Linux keeps a nice value per thread and a new thread inherits its
// creator's, so each thread is set, and the threads are listed again
// until a pass finds none left at another value (the Go runtime may start
// one meanwhile). restore puts every thread back at the value the process
// had; raising a priority needs privilege (CAP_SYS_NICE, or root), so
// without it restore returns an error and the process stays niced.
func lowerPriority(n int) (restore func() error, err error) {
	was, err := threadNice(os.Getpid())
	if err != nil {
		return nil, err
	}
	if n <= was {
		return func() error { return nil }, nil
	}
	if err := setEveryThread(n); err != nil {
		return nil, err
	}
	return func() error { return setEveryThread(was) }, nil
}

// setEveryThread sets each of the process's threads to nice n.
func setEveryThread(n int) error {
	for pass := 0; pass < 10; pass++ {
		tids, err := threads()
		if err != nil {
			return err
		}
		changed := false
		for _, tid := range tids {
			cur, err := threadNice(tid)
			if errors.Is(err, os.ErrNotExist) {
				continue // the thread ended
			}
			if err != nil {
				return err
			}
			if cur == n {
				continue
			}
			if err := syscall.Setpriority(syscall.PRIO_PROCESS, tid, n); err != nil && !errors.Is(err, syscall.ESRCH) {
				return fmt.Errorf("bench: set thread %d to nice %d: %w", tid, n, err)
			}
			changed = true
		}
		if !changed {
			return nil
		}
	}
	return fmt.Errorf("bench: threads kept appearing at another nice value than %d", n)
}

// threads lists this process's thread ids.
func threads() ([]int, error) {
	entries, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return nil, fmt.Errorf("bench: list threads: %w", err)
	}
	tids := make([]int, 0, len(entries))
	for _, e := range entries {
		if tid, err := strconv.Atoi(e.Name()); err == nil {
			tids = append(tids, tid)
		}
	}
	return tids, nil
}

// threadNice reads a thread's nice value: field 19 of its stat file,
// counted after the command name, which may hold spaces and parentheses.
func threadNice(tid int) (int, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/self/task/%d/stat", tid))
	if err != nil {
		return 0, err
	}
	return statNice(b)
}
