// Command tollbench measures Tollgate end to end against the ceiling
// Postgres sets on the same machine. `make bench` builds it and
// runs it through scripts/bench.sh, which starts the fake provider and
// `tollgate serve` on a fresh database first.
//
//	tollbench -url http://127.0.0.1:18480 -key tg_... -rates 20,50,100,200 -duration 20s \
//	    -provider-latency 0ms,1s -proxy-addr 127.0.0.1:18491 -upstream http://127.0.0.1:18490 \
//	    -server-pid PID -db postgres://.../tollgate_bench -ceiling-db postgres://.../tollgate_bench_ceiling
//
// It offers each rate open loop (arrivals due at fixed intervals, whatever
// the server does), follows every task to its end by polling, and prints a
// table per model latency: admission and end-to-end latency, finished
// tasks per second, errors, the server's memory and goroutines, and what
// Postgres did per task. The model latency comes from a proxy tollbench
// runs in front of the fake provider (serve's MODEL_BASE_URL points at it).
// With -ceiling-db it first runs pgbench with the SQL of one task's happy
// path and reports Tollgate as a fraction of that. The report is also
// written as JSON (-out).
//
// -scenarios picks what to run (scenarios 1-3 and the agent scenario):
// throughput (the above, the default), agent (throughput's steps at
// -agent-rates with a 32 KiB request of 20 tools and a 30-message tool
// loop, against the pgbench ceiling of -agent-ceiling-db with rows of that
// size), inflight (-inflight-tasks submitted against a
// -inflight-latency model, the server's RSS and goroutines sampled until
// all finished) and duplicates (-dup-keys tasks created, then replayed by
// duplicate POSTs and polled by GETs from each of -dup-clients closed-loop
// clients for -dup-duration).
//
// tollbench -print-workers prints the TOLLGATE_WORKERS the given rates and
// latencies need, for the script to start serve with.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/tollgate/tollgate/tools/bench"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "tollbench:", err)
		}
		os.Exit(1)
	}
}

// run is the whole program, so that it can be run in-process.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("tollbench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		cfg            bench.Config
		rates          = fs.String("rates", "20,50,100,200", "arrival `rates` per second, comma-separated; one step each")
		latencies      = fs.String("provider-latency", "0ms,1s", "model `latencies`, comma-separated; every rate runs at each")
		ceilingDB      = fs.String("ceiling-db", "", "scratch database `URL` for the pgbench ceiling (migrated, with -owner's budget); empty skips the ceiling")
		owner          = fs.String("owner", "bench", "`owner` whose budget the pgbench script reserves on")
		pgbench        = fs.String("pgbench", "pgbench", "pgbench `binary`")
		pgbenchScript  = fs.String("pgbench-script", "scripts/pgbench-task.sql", "pgbench `script`: one task's happy path")
		pgbenchClients = fs.String("pgbench-clients", "1,2,4,8,16", "pgbench client `counts`; the best counts")
		pgbenchDur     = fs.Duration("pgbench-duration", 10*time.Second, "pgbench run `length` per client count")
		out            = fs.String("out", "tools/bench/results/latest.json", "write the report as JSON to `path`; empty for none")
		printWorkers   = fs.Bool("print-workers", false, "print the TOLLGATE_WORKERS that -rates and -provider-latency need, and exit")
		scenarios      = fs.String("scenarios", bench.ScenarioThroughput, "`scenarios` to run, comma-separated: throughput, agent, inflight, duplicates, or all")
		agentRates     = fs.String("agent-rates", "10,25,50,100", "agent: arrival `rates` per second, comma-separated; one step each")
		agentCeilingDB = fs.String("agent-ceiling-db", "", "agent: scratch database `URL` for the pgbench ceiling with agent-sized rows (as -ceiling-db); empty skips it")
		dupClients     = fs.String("dup-clients", "128", "duplicates: closed-loop client `counts`, comma-separated; a replay run and a poll run each")
	)
	fs.StringVar(&cfg.BaseURL, "url", "http://127.0.0.1:8080", "Tollgate's API `root`")
	fs.StringVar(&cfg.APIKey, "key", getenv("TOLLBENCH_API_KEY"), "client API `key` (default $TOLLBENCH_API_KEY)")
	fs.DurationVar(&cfg.Duration, "duration", 20*time.Second, "arrivals per step")
	fs.StringVar(&cfg.ProxyAddr, "proxy-addr", "", "run the latency proxy on `addr` (serve's MODEL_BASE_URL=http://addr/v1); needed for a latency > 0")
	fs.StringVar(&cfg.Upstream, "upstream", "", "the fake provider's `root` (http://host:port), behind the proxy")
	fs.IntVar(&cfg.ServerPID, "server-pid", 0, "`pid` of tollgate serve, for its RSS (0: read its metrics instead)")
	fs.StringVar(&cfg.PprofURL, "pprof-url", "", "the server's pprof listener `root` (TOLLGATE_PPROF_ADDR as http://host:port): each duplicates run saves a CPU profile next to -out")
	fs.StringVar(&cfg.DatabaseURL, "db", "", "Tollgate's database `URL`, for Postgres's cost per task; empty skips it")
	fs.DurationVar(&cfg.PollInterval, "poll-interval", 20*time.Millisecond, "time between polls of an unfinished task")
	fs.DurationVar(&cfg.LongPoll, "long-poll", 0, "follow tasks with long polls (GET with Prefer: wait=`N`s) instead of polling every -poll-interval; 0 for interval polling")
	fs.DurationVar(&cfg.TaskTimeout, "task-timeout", time.Minute, "a task unfinished this long after its arrival is an error")
	fs.DurationVar(&cfg.Warmup, "warmup", 3*time.Second, "unrecorded load at the first rate before measuring; negative for none")
	fs.DurationVar(&cfg.StepWarmup, "step-warmup", 2*time.Second, "unrecorded load at each step's rate after the VACUUM (ANALYZE), or ANALYZE, before it (replanning), reported apart; negative for none")
	fs.DurationVar(&cfg.Settle, "settle", 11*time.Second, "idle time after each step before reading Postgres's counters (idle backends report up to 10s late)")
	fs.DurationVar(&cfg.AdmissionSLO, "admission-slo", 50*time.Millisecond, "a rate counts as sustained only with admission p99 under this")
	fs.StringVar(&cfg.Revision, "revision", "", "name of the code measured, e.g. git describe --always --dirty (default: the binary's VCS stamp)")
	fs.IntVar(&cfg.MaxInFlight, "max-inflight", 50000, "tasks followed at once before arrivals are dropped (and counted as errors)")
	fs.IntVar(&cfg.Nice, "nice", 0, "run the throughput steps (after the ceiling) at nice `n`, so the load and the latency proxy yield the CPU to Tollgate and PostgreSQL; 0 keeps tollbench's priority")
	fs.IntVar(&cfg.ServerWorkers, "workers", 0, "the TOLLGATE_WORKERS serve runs with (`n`), for the in-flight analysis; 0 if unknown")
	fs.DurationVar(&cfg.Agent.ModelLatency, "agent-latency", 0, "agent: model `latency` in every step")
	fs.IntVar(&cfg.InFlight.Tasks, "inflight-tasks", 10000, "in flight: `tasks` to submit")
	fs.DurationVar(&cfg.InFlight.ModelLatency, "inflight-latency", 5*time.Second, "in flight: model `latency`")
	fs.IntVar(&cfg.InFlight.Clients, "inflight-clients", 64, "in flight: concurrent `submitters`")
	fs.Float64Var(&cfg.InFlight.Rate, "inflight-rate", 0, "in flight: arrivals per second, open loop; 0 submits as fast as admission allows")
	fs.DurationVar(&cfg.InFlight.Timeout, "inflight-timeout", 15*time.Minute, "in flight: tasks not finished this long after the first arrival are errors")
	fs.IntVar(&cfg.Duplicates.Keys, "dup-keys", 1000, "duplicates: `tasks` to create, then replay and poll")
	fs.DurationVar(&cfg.Duplicates.Duration, "dup-duration", 20*time.Second, "duplicates: measured `length` of each run")
	fs.DurationVar(&cfg.Duplicates.Warmup, "dup-warmup", 2*time.Second, "duplicates: unmeasured start of each run; negative for none")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	var err error
	if cfg.Rates, err = parseList(*rates, "-rates", func(s string) (float64, error) { return strconv.ParseFloat(s, 64) }); err != nil {
		return err
	}
	if cfg.ProviderLatencies, err = parseList(*latencies, "-provider-latency", time.ParseDuration); err != nil {
		return err
	}
	if cfg.Scenarios, err = bench.ParseScenarios(*scenarios); err != nil {
		return err
	}
	if cfg.Agent.Rates, err = parseList(*agentRates, "-agent-rates", func(s string) (float64, error) { return strconv.ParseFloat(s, 64) }); err != nil {
		return err
	}
	if cfg.Duplicates.Clients, err = parseList(*dupClients, "-dup-clients", strconv.Atoi); err != nil {
		return err
	}
	if *printWorkers {
		fmt.Fprintln(stdout, bench.Workers(cfg.Rates, cfg.ProviderLatencies))
		return nil
	}
	ceiling := func(db string) (*bench.CeilingConfig, error) {
		if db == "" {
			return nil, nil
		}
		clients, err := parseList(*pgbenchClients, "-pgbench-clients", strconv.Atoi)
		if err != nil {
			return nil, err
		}
		return &bench.CeilingConfig{
			DatabaseURL: db, Owner: *owner, PGBench: *pgbench, Script: *pgbenchScript,
			Clients: clients, Duration: *pgbenchDur,
		}, nil
	}
	if cfg.Ceiling, err = ceiling(*ceilingDB); err != nil {
		return err
	}
	if cfg.Agent.Ceiling, err = ceiling(*agentCeilingDB); err != nil {
		return err
	}

	cfg.ProfileDir = "."
	if *out != "" {
		cfg.ProfileDir = filepath.Dir(*out)
	}
	rep, err := bench.Run(ctx, cfg, stdout)
	if rep != nil && *out != "" {
		if werr := rep.WriteJSON(*out); werr != nil {
			return errors.Join(err, werr)
		}
		fmt.Fprintf(stdout, "  report: %s\n", *out)
	}
	return err
}

// parseList parses a comma-separated list; it names the flag in its error.
func parseList[T any](s, flagName string, parse func(string) (T, error)) ([]T, error) {
	var out []T
	for f := range strings.SplitSeq(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		v, err := parse(f)
		if err != nil {
			return nil, fmt.Errorf("%s: %q is not valid: %w", flagName, f, err)
		}
		out = append(out, v)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: empty list", flagName)
	}
	return out, nil
}
