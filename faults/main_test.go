//go:build faults

package faults

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// tollgateBin is the binary under test, built once by TestMain (or named
// by TOLLGATE_FAULTS_BIN, to test a binary built elsewhere).
var tollgateBin string

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	tollgateBin = os.Getenv("TOLLGATE_FAULTS_BIN")
	if tollgateBin == "" {
		dir, err := os.MkdirTemp("", "tollgate-faults-")
		if err != nil {
			fmt.Fprintln(os.Stderr, "faults:", err)
			return 1
		}
		defer os.RemoveAll(dir)
		tollgateBin = filepath.Join(dir, "tollgate")
		goCmd := os.Getenv("GO")
		if goCmd == "" {
			goCmd = "go"
		}
		build := exec.Command(goCmd, "build", "-o", tollgateBin, "./cmd/tollgate")
		build.Dir = ".."
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "faults: build tollgate:", err)
			return 1
		}
	}
	start := time.Now()
	code := m.Run()
	printReport(os.Stdout, time.Since(start))
	return code
}

// row is one scenario's line of the report.
type row struct {
	scenario   string
	tasks      int // tasks accepted (rows in the tasks table)
	calls      int // model calls the provider received
	duplicates int // submissions answered with an existing task (replayed) or refused as a changed reuse (422)
	violations int // invariant violations found in SQL; must be 0
	elapsed    time.Duration
	notes      string
	skipped    string // why the scenario did not run
}

var report struct {
	mu   sync.Mutex
	rows []row
}

func record(r row) {
	report.mu.Lock()
	defer report.mu.Unlock()
	report.rows = append(report.rows, r)
}

func printReport(w *os.File, total time.Duration) {
	report.mu.Lock()
	defer report.mu.Unlock()
	if len(report.rows) == 0 {
		return
	}
	slices.SortFunc(report.rows, func(a, b row) int { return strings.Compare(a.scenario, b.scenario) })
	var b strings.Builder
	fmt.Fprintf(&b, "\nTollgate fault suite (%s)\n", total.Round(time.Second))
	fmt.Fprintf(&b, "%-34s %6s %15s %21s %21s %8s  %s\n", "scenario", "tasks", "provider calls", "duplicates prevented", "invariant violations", "time", "notes")
	fmt.Fprintf(&b, "%s\n", strings.Repeat("-", 150))
	for _, r := range report.rows {
		if r.skipped != "" {
			fmt.Fprintf(&b, "%-34s %6s %15s %21s %21s %8s  SKIPPED: %s\n", r.scenario, "-", "-", "-", "-", "-", r.skipped)
			continue
		}
		fmt.Fprintf(&b, "%-34s %6d %15d %21d %21d %8s  %s\n", r.scenario, r.tasks, r.calls, r.duplicates, r.violations,
			r.elapsed.Round(100*time.Millisecond), r.notes)
	}
	fmt.Fprintln(w, b.String())
}
