package bench

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os/exec"
	"regexp"
	"runtime"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tollgate/tollgate/tools/bench/stats"
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
	// Rows are what the script writes per task; zero takes ThroughputRows.
	Rows CeilingRows
}

// CeilingRows are the contents of the rows the pgbench script writes for
// one task, passed to it as variables (-D): the ceiling is only a ceiling
// for requests whose rows are the size of the ones it writes. Sealed
// columns are filled with bytes that do not compress, as ciphertext does
// not: a repeated byte would let PostgreSQL compress a large row to
// nothing.
type CeilingRows struct {
	Request      string // tasks.request: the request as stored (JSON)
	PayloadBytes int    // tasks.payload: the sealed raw request
	Parameters   string // replay_records.parameters (JSON)
	Response     string // replay_records.response (JSON)
	Result       string // tasks.result (JSON)
	OutputBytes  int    // tasks.output_sealed: the sealed answer
}

// sealOverhead is what sealing adds to a body: a version byte, the
// AES-GCM nonce (12) and tag (16).
const sealOverhead = 1 + 12 + 16

// RowsFor returns the rows Tollgate writes for a task whose request body
// is request, answered as the fake provider answers the benchmark (a
// 16-token completion): the request stored as sent and sealed, the
// replay record's parameters (model and output limit), the answer and
// the task's result.
func RowsFor(request []byte) CeilingRows {
	return CeilingRows{
		Request:      string(request),
		PayloadBytes: len(request) + sealOverhead,
		Parameters:   `{"model":"gpt-4o-mini","max_tokens": 16}`,
		Response:     `{"content":"fake completion 0123456789ab","finish_reason":"stop","model":"gpt-4o-mini","usage":{"input_tokens": 14,"output_tokens": 16}}`,
		Result:       `{"model":"gpt-4o-mini","finish_reason":"stop","usage":{"input_tokens": 14,"output_tokens": 16,"source":"reported"},"cost_micros": 14,"output":""}`,
		OutputBytes:  56,
	}
}

// ThroughputRows are the rows of the throughput scenario's small task.
func ThroughputRows() CeilingRows { return RowsFor([]byte(taskBody)) }

// vars are the rows as pgbench -D arguments.
func (r CeilingRows) vars() []string {
	return []string{
		"-D", "request=" + r.Request,
		"-D", "payload=" + incompressible(r.PayloadBytes),
		"-D", "parameters=" + r.Parameters,
		"-D", "response=" + r.Response,
		"-D", "result=" + r.Result,
		"-D", "output=" + incompressible(r.OutputBytes),
	}
}

// incompressible is n bytes that do not compress, as bytea's hex input.
func incompressible(n int) string {
	b := make([]byte, n)
	rng := rand.NewChaCha8([32]byte{'t', 'o', 'l', 'l', 'g', 'a', 't', 'e'})
	_, _ = rng.Read(b) // never fails
	return `\x` + hex.EncodeToString(b)
}

// Ceiling is what Postgres alone commits of Tollgate's work per second.
type Ceiling struct {
	Script string `json:"script"`
	// RequestBytes is the size of the request the script's rows hold.
	RequestBytes int          `json:"request_bytes"`
	Runs         []CeilingRun `json:"runs"`
	BestTPS      float64      `json:"best_tasks_per_s"`
	BestClients  int          `json:"best_clients"`
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
	if cfg.Rows == (CeilingRows{}) {
		cfg.Rows = ThroughputRows()
	}
	c.RequestBytes = len(cfg.Rows.Request)
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
		args := append([]string{"-n", "-M", "prepared", "-f", cfg.Script,
			"-D", "owner=" + cfg.Owner, "-D", "period=" + strconv.FormatInt(period, 10)}, cfg.Rows.vars()...)
		args = append(args, "-c", strconv.Itoa(clients), "-j", strconv.Itoa(threads), "-T", strconv.Itoa(secs), cfg.DatabaseURL)
		cmd := exec.CommandContext(ctx, bin, args...)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			return c, fmt.Errorf("bench: pgbench -c %d: %w\n%s", clients, err, out.String())
		}
		run, err := parsePGBench(out.Bytes())
		if err != nil {
			return c, fmt.Errorf("bench: pgbench -c %d: %w\n%s", clients, err, out.String())
		}
		run.Clients, run.HostLoad = clients, stats.LoadAverage()
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
