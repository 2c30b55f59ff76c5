package bigdata

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tollgate/tollgate/tools/bench/stats"
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
	m.LoadAvg1 = stats.LoadAverage()
	return m
}

// WriteJSON writes the report to path, creating its directory.
func (r *Report) WriteJSON(path string) error { return stats.WriteJSON(path, r) }

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
	phases := stats.NewTable("phase", "rows", "seconds")
	for _, p := range s.Phases {
		phases.Rowf("%s\t%d\t%.1f", p.Name, p.Rows, p.Seconds)
	}
	_ = phases.Write(w, "  ")
	tables := stats.NewTable("table", "rows", "MB")
	for _, t := range seededTables {
		if _, ok := s.Rows[t]; ok {
			tables.Rowf("%s\t%d\t%.0f", t, s.Rows[t], s.SizesMB[t])
		}
	}
	_ = tables.Write(w, "  ")
}

// PrintResults writes the measurement as one table per kind.
func PrintResults(w io.Writer, r *Results) {
	d := r.Data
	fmt.Fprintf(w, "\ndataset: %d tasks, %d replay records, %d settled usage rows, %d ledger rows, %s .. %s\n",
		d.Tasks, d.ReplayRecords, d.UsageRecords, d.LedgerRows, d.From.Format(time.DateOnly), d.To.Format(time.DateOnly))
	if len(r.Lookup)+len(r.Search) > 0 {
		t := stats.NewTable("scenario (ms)", "n", "conc", "p50", "p95", "p99", "max", "req/s", "errors", "cut/skip")
		t.Rule = true
		for _, l := range append(append([]Latency(nil), r.Lookup...), r.Search...) {
			s := l.Summary
			t.Rowf("%s\t%d\t%d\t%.2f\t%.2f\t%.2f\t%.2f\t%.1f\t%d\t%d/%d",
				l.Name, s.N, l.Concurrency, s.P50, s.P95, s.P99, s.Max, l.PerSecond, l.Errors, l.TimedOut, l.Skipped)
		}
		fmt.Fprintln(w)
		_ = t.Write(w, "")
	}
	if len(r.Usage) > 0 {
		t := stats.NewTable("usage report (s)", "runs", "min", "median", "max", "rows", "groups")
		t.Rule = true
		for _, u := range r.Usage {
			t.Rowf("%s\t%d\t%.2f\t%.2f\t%.2f\t%d\t%d", u.Name, len(u.Seconds), u.MinS, u.MedianS, u.MaxS, u.Tasks, u.Groups)
		}
		fmt.Fprintln(w)
		_ = t.Write(w, "")
	}
	if len(r.CSV) > 0 {
		t := stats.NewTable("csv export", "rows", "MB", "1st B s", "total s", "rows/s", "RSS MB", "peak MB", "VmHWM MB")
		t.Rule = true
		for _, e := range r.CSV {
			base, peak, hwm := "-", "-", "-"
			if m := e.Memory; m != nil {
				base, peak, hwm = fmt.Sprintf("%.1f", m.BaselineMB), fmt.Sprintf("%.1f", m.PeakMB), fmt.Sprintf("%.1f", m.HWMAfterMB)
			}
			t.Rowf("%s\t%d\t%.1f\t%.2f\t%.2f\t%.0f\t%s\t%s\t%s",
				e.Name, e.Rows, e.MB, e.FirstByteS, e.Seconds, e.RowsPerSecond, base, peak, hwm)
		}
		fmt.Fprintln(w)
		_ = t.Write(w, "")
	}
}
