package bigdata

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tollgate/tollgate/tools/bench"
)

// Report is one run of the data scenarios, as written to
// tools/bench/results/data.json.
type Report struct {
	StartedAt  time.Time   `json:"started_at"`
	FinishedAt time.Time   `json:"finished_at"`
	Machine    Machine     `json:"machine"`
	Seed       *SeedReport `json:"seed,omitempty"`
	Results    *Results    `json:"results,omitempty"`
	Notes      []string    `json:"notes"`
}

// Machine is where the run happened.
type Machine struct {
	CPUs     int     `json:"cpus"`
	Go       string  `json:"go"`
	Postgres string  `json:"postgres"`
	Revision string  `json:"revision"`
	LoadAvg1 float64 `json:"load_avg_1m"` // at the end: what else competed for the CPUs
}

// ReadMachine describes this host and the Postgres behind pool; what it
// cannot read stays empty.
func ReadMachine(ctx context.Context, pool *pgxpool.Pool, revision string) Machine {
	m := Machine{CPUs: runtime.NumCPU(), Go: runtime.Version(), Revision: revision}
	if pool != nil {
		_ = pool.QueryRow(ctx, `SELECT current_setting('server_version')`).Scan(&m.Postgres)
	}
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		_, _ = fmt.Sscanf(string(b), "%f", &m.LoadAvg1)
	}
	return m
}

// WriteJSON writes the report to path, creating its directory.
func (r *Report) WriteJSON(path string) error { return bench.WriteJSON(path, r) }

// ReadSeedReport reads the seed part of a report written by an earlier
// run (the seed and the measurement run as two commands, with the server
// started in between).
func ReadSeedReport(path string) (*SeedReport, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("bigdata: %w", err)
	}
	var r Report
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("bigdata: %s: %w", path, err)
	}
	if r.Seed == nil {
		return nil, fmt.Errorf("bigdata: %s holds no seed report", path)
	}
	return r.Seed, nil
}

// PrintSeed writes the seed's phases and the resulting tables.
func PrintSeed(w io.Writer, s *SeedReport) {
	fmt.Fprintf(w, "seed: %d tasks, %d ledger tasks (universe %d), %d owners, %s .. %s, %.0f s\n",
		s.Tasks, s.LedgerTasks, s.Universe, s.Owners, s.From, s.To, s.Seconds)
	fmt.Fprintf(w, "  %-28s %12s %9s\n", "phase", "rows", "seconds")
	for _, p := range s.Phases {
		fmt.Fprintf(w, "  %-28s %12d %9.1f\n", p.Name, p.Rows, p.Seconds)
	}
	fmt.Fprintf(w, "  %-28s %12s %9s\n", "table", "rows", "MB")
	for _, t := range seededTables {
		if _, ok := s.Rows[t]; ok {
			fmt.Fprintf(w, "  %-28s %12d %9.0f\n", t, s.Rows[t], s.SizesMB[t])
		}
	}
}

// PrintResults writes the measurement as one table per kind.
func PrintResults(w io.Writer, r *Results) {
	d := r.Data
	fmt.Fprintf(w, "\ndataset: %d tasks, %d replay records, %d settled usage rows, %d ledger rows, %s .. %s\n",
		d.Tasks, d.ReplayRecords, d.UsageRecords, d.LedgerRows, d.From.Format(time.DateOnly), d.To.Format(time.DateOnly))
	if len(r.Lookup)+len(r.Search) > 0 {
		fmt.Fprintf(w, "\n%-46s %6s %4s %8s %8s %8s %8s %8s %7s %8s\n", "scenario (ms)", "n", "conc", "p50", "p95", "p99", "max", "req/s", "errors", "cut/skip")
		fmt.Fprintln(w, strings.Repeat("-", 121))
		for _, l := range append(append([]Latency(nil), r.Lookup...), r.Search...) {
			s := l.Summary
			fmt.Fprintf(w, "%-46s %6d %4d %8.2f %8.2f %8.2f %8.2f %8.1f %7d %8s\n",
				l.Name, s.N, l.Concurrency, s.P50, s.P95, s.P99, s.Max, l.PerSecond, l.Errors, fmt.Sprintf("%d/%d", l.TimedOut, l.Skipped))
		}
	}
	if len(r.Usage) > 0 {
		fmt.Fprintf(w, "\n%-52s %5s %8s %8s %8s %10s %7s\n", "usage report (s)", "runs", "min", "median", "max", "rows", "groups")
		fmt.Fprintln(w, strings.Repeat("-", 104))
		for _, t := range r.Usage {
			fmt.Fprintf(w, "%-52s %5d %8.2f %8.2f %8.2f %10d %7d\n", t.Name, len(t.Seconds), t.MinS, t.MedianS, t.MaxS, t.Tasks, t.Groups)
		}
	}
	if len(r.CSV) > 0 {
		fmt.Fprintf(w, "\n%-36s %10s %8s %7s %8s %10s %9s %9s %9s\n", "csv export", "rows", "MB", "1st B s", "total s", "rows/s", "RSS MB", "peak MB", "VmHWM MB")
		fmt.Fprintln(w, strings.Repeat("-", 116))
		for _, e := range r.CSV {
			base, peak, hwm := "-", "-", "-"
			if m := e.Memory; m != nil {
				base, peak, hwm = fmt.Sprintf("%.1f", m.BaselineMB), fmt.Sprintf("%.1f", m.PeakMB), fmt.Sprintf("%.1f", m.HWMAfterMB)
			}
			fmt.Fprintf(w, "%-36s %10d %8.1f %7.2f %8.2f %10.0f %9s %9s %9s\n",
				e.Name, e.Rows, e.MB, e.FirstByteS, e.Seconds, e.RowsPerSecond, base, peak, hwm)
		}
	}
}
