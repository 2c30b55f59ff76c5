package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"os/exec"
	"regexp"
	"runtime"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
)

// CeilingConfig says how to measure the ceiling: pgbench running the SQL of
// one task's happy path (scripts/pgbench-task.sql) against a scratch
// database migrated like Tollgate's, at several client counts.
type CeilingConfig struct {
	DatabaseURL string        // the scratch database, migrated, with Owner's budget set
	Owner       string        // whose budget every script run reserves on
	PGBench     string        // the pgbench binary
	Script      string        // the pgbench script
	Clients     []int         // client counts to try; the best counts
	Duration    time.Duration // per client count
}

// Ceiling is what Postgres alone commits of Tollgate's work per second.
type Ceiling struct {
	Script      string       `json:"script"`
	Runs        []CeilingRun `json:"runs"`
	BestTPS     float64      `json:"best_tasks_per_s"`
	BestClients int          `json:"best_clients"`
}

// CeilingRun is one pgbench run. One pgbench "transaction" is one run of
// the script, that is one task (two database transactions).
type CeilingRun struct {
	Clients   int     `json:"clients"`
	TPS       float64 `json:"tasks_per_s"`
	LatencyMS float64 `json:"latency_avg_ms"`
	Failed    int64   `json:"failed"`
	Tasks     int64   `json:"tasks"`
	HostLoad  float64 `json:"host_load"` // 1-minute load average after the run
	Cost      PGCost  `json:"pg"`
}

// runCeiling runs pgbench at each client count and keeps the best. It
// returns an error when pgbench is missing, the database has no budget for
// the owner, or a run fails.
func runCeiling(ctx context.Context, cfg CeilingConfig, progress func(CeilingRun)) (Ceiling, error) {
	c := Ceiling{Script: cfg.Script}
	bin, err := exec.LookPath(cfg.PGBench)
	if err != nil {
		return c, fmt.Errorf("bench: pgbench: %w (it comes with the postgresql package)", err)
	}
	conn, err := pgx.Connect(ctx, cfg.DatabaseURL)
	if err != nil {
		return c, fmt.Errorf("bench: ceiling database: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var period int64
	err = conn.QueryRow(ctx, `
		SELECT id FROM budget_periods WHERE owner_id = $1 AND workload = '' ORDER BY period_start DESC LIMIT 1`,
		cfg.Owner).Scan(&period)
	if errors.Is(err, pgx.ErrNoRows) {
		return c, fmt.Errorf("bench: ceiling database has no budget for owner %q (tollgate budget set --owner %s ...)", cfg.Owner, cfg.Owner)
	}
	if err != nil {
		return c, fmt.Errorf("bench: ceiling database: %w", err)
	}
	meter, err := newPGMeter(ctx, conn)
	if err != nil {
		return c, err
	}
	secs := max(1, int(math.Ceil(cfg.Duration.Seconds())))
	for _, clients := range cfg.Clients {
		before, err := meter.read(ctx)
		if err != nil {
			return c, err
		}
		// pgbench threads beyond the CPUs only compete with Postgres.
		threads := min(clients, runtime.NumCPU())
		cmd := exec.CommandContext(ctx, bin, "-n", "-M", "prepared", "-f", cfg.Script,
			"-D", "owner="+cfg.Owner, "-D", "period="+strconv.FormatInt(period, 10),
			"-c", strconv.Itoa(clients), "-j", strconv.Itoa(threads), "-T", strconv.Itoa(secs),
			cfg.DatabaseURL)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			return c, fmt.Errorf("bench: pgbench -c %d: %w\n%s", clients, err, out.String())
		}
		run, err := parsePGBench(out.Bytes())
		if err != nil {
			return c, fmt.Errorf("bench: pgbench -c %d: %w\n%s", clients, err, out.String())
		}
		run.Clients, run.HostLoad = clients, loadAverage()
		// pgbench's backends have exited, and an exiting backend flushes
		// its statistics: no wait needed, unlike for Tollgate's pool.
		after, err := meter.read(ctx)
		if err != nil {
			return c, err
		}
		run.Cost = meter.cost(ctx, before, after, int(run.Tasks))
		c.Runs = append(c.Runs, run)
		if run.TPS > c.BestTPS {
			c.BestTPS, c.BestClients = run.TPS, clients
		}
		if progress != nil {
			progress(run)
		}
	}
	return c, nil
}

var (
	pgbenchTPS       = regexp.MustCompile(`(?m)^tps = ([0-9.]+) \(without initial connection time\)`)
	pgbenchLatency   = regexp.MustCompile(`(?m)^latency average = ([0-9.]+) ms`)
	pgbenchFailed    = regexp.MustCompile(`(?m)^number of failed transactions: ([0-9]+)`)
	pgbenchProcessed = regexp.MustCompile(`(?m)^number of transactions actually processed: ([0-9]+)`)
)

// parsePGBench reads a pgbench report. It returns an error when the report
// has no tps line (pgbench aborted).
func parsePGBench(out []byte) (CeilingRun, error) {
	var r CeilingRun
	m := pgbenchTPS.FindSubmatch(out)
	if m == nil {
		return r, errors.New("no tps in pgbench's report")
	}
	r.TPS, _ = strconv.ParseFloat(string(m[1]), 64)
	if m := pgbenchLatency.FindSubmatch(out); m != nil {
		r.LatencyMS, _ = strconv.ParseFloat(string(m[1]), 64)
	}
	if m := pgbenchFailed.FindSubmatch(out); m != nil {
		r.Failed, _ = strconv.ParseInt(string(m[1]), 10, 64)
	}
	if m := pgbenchProcessed.FindSubmatch(out); m != nil {
		r.Tasks, _ = strconv.ParseInt(string(m[1]), 10, 64)
	}
	return r, nil
}
