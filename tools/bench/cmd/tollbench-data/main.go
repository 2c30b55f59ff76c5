// Command tollbench-data seeds a scratch Tollgate database with a large
// history and measures the reads that history makes slow: replay lookup and
// support search over a million records, the usage report and the CSV
// export over ten million ledger rows (the data scenarios 4 and 5).
// scripts/bench-data.sh runs it twice, around starting `tollgate serve`:
//
//	tollbench-data -seed -db postgres://.../tollgate_bigdata -tasks 1000000 -ledger 10000000 -out tools/bench/results/data.json
//	tollbench-data -measure -db postgres://.../tollgate_bigdata -url http://127.0.0.1:18680 \
//	    -support-key tg_... -finance-key tg_... -client-key tg_... -server-pid PID \
//	    -seed-report tools/bench/results/data.json -out tools/bench/results/data.json
//
// Keys may come from $TOLLBENCH_SUPPORT_KEY, $TOLLBENCH_FINANCE_KEY and
// $TOLLBENCH_CLIENT_KEY instead. The seed needs a migrated database with no
// tasks; the measurement reads the database only to draw random ids and
// everything else through the HTTP API.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tollgate/tollgate/tools/bench/bigdata"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "tollbench-data:", err)
		}
		os.Exit(1)
	}
}

// run is the whole program, so that it can be run in-process.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("tollbench-data", flag.ContinueOnError)
	fs.SetOutput(stderr)
	shape := bigdata.DefaultShape(time.Now().Add(-time.Minute))
	var mc bigdata.MeasureConfig
	var (
		seed       = fs.Bool("seed", false, "seed the database (which must be migrated and hold no tasks)")
		measure    = fs.Bool("measure", false, "measure against the server at -url")
		dbURL      = fs.String("db", getenv("DATABASE_URL"), "the scratch database's `URL` (default $DATABASE_URL)")
		days       = fs.Int("days", 90, "the history spans this many `days`, ending now")
		seedReport = fs.String("seed-report", "", "with -measure: include the seed report from this earlier -out `file`")
		out        = fs.String("out", "tools/bench/results/data.json", "write the report as JSON to `path`; empty for none")
		revision   = fs.String("revision", "", "name of the code measured, e.g. git describe --always --dirty")
	)
	fs.Int64Var(&shape.Tasks, "tasks", shape.Tasks, "tasks to seed, each with its attempts and replay records")
	fs.Int64Var(&shape.Ledger, "ledger", shape.Ledger, "budget ledger rows to seed, about (0: no budgets, ledger or usage)")
	fs.IntVar(&shape.Owners, "owners", shape.Owners, "owners to spread the history over")
	fs.Int64Var(&shape.Batch, "batch", shape.Batch, "tasks per INSERT statement (and transaction)")
	fs.StringVar(&mc.BaseURL, "url", "http://127.0.0.1:18680", "Tollgate's API `root`")
	fs.StringVar(&mc.SupportKey, "support-key", getenv("TOLLBENCH_SUPPORT_KEY"), "support `key` for lookups and searches (default $TOLLBENCH_SUPPORT_KEY)")
	fs.StringVar(&mc.FinanceKey, "finance-key", getenv("TOLLBENCH_FINANCE_KEY"), "finance `key` for usage reports (default $TOLLBENCH_FINANCE_KEY)")
	fs.StringVar(&mc.ClientKey, "client-key", getenv("TOLLBENCH_CLIENT_KEY"), "client `key` of -client-owner (default $TOLLBENCH_CLIENT_KEY)")
	fs.StringVar(&mc.ClientOwner, "client-owner", bigdata.OwnerID(0), "`owner` of -client-key")
	fs.IntVar(&mc.Concurrency, "concurrency", 8, "concurrent clients for lookups and searches")
	fs.IntVar(&mc.Lookups, "lookups", 20000, "replay lookups per lookup scenario")
	fs.IntVar(&mc.Searches, "searches", 300, "requests per search scenario")
	fs.IntVar(&mc.UsageRuns, "usage-runs", 3, "runs of each usage report")
	fs.DurationVar(&mc.RequestTimeout, "request-timeout", 30*time.Second, "cut a lookup or search after this long (an error)")
	fs.DurationVar(&mc.ScenarioBudget, "scenario-budget", 2*time.Minute, "start no more requests of a search scenario after this long (0: no limit)")
	fs.BoolVar(&mc.CSV, "csv", true, "export the usage CSV while sampling the server's memory")
	fs.IntVar(&mc.ServerPID, "server-pid", 0, "`pid` of tollgate serve, for its memory during CSV exports (0: not sampled)")
	fs.Uint64Var(&mc.Seed, "rand-seed", 1, "seed of the random choice of requests")
	if err := fs.Parse(args); err != nil {
		return err
	}
	switch {
	case fs.NArg() > 0:
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	case !*seed && !*measure:
		return errors.New("nothing to do: give -seed, -measure or both")
	case *dbURL == "":
		return errors.New("-db (or $DATABASE_URL) is required")
	case *days < 1:
		return fmt.Errorf("-days must be at least 1, got %d", *days)
	case *measure && mc.SupportKey == "" && mc.FinanceKey == "" && mc.ClientKey == "":
		return errors.New("-measure needs at least one of -support-key, -finance-key and -client-key")
	}
	shape.Span = time.Duration(*days) * 24 * time.Hour
	if *seed {
		if err := shape.Validate(); err != nil {
			return err
		}
	}

	pool, err := pgxpool.New(ctx, *dbURL)
	if err != nil {
		return fmt.Errorf("database: %w", err)
	}
	defer pool.Close()
	rep := &bigdata.Report{StartedAt: time.Now().UTC(), Notes: []string{
		"Latencies are measured by the client over loopback HTTP, closed loop, at the given concurrency, after a warm-up.",
		"Absolute numbers on a shared machine wander; see machine.load_avg_1m.",
	}}
	if *seed {
		fmt.Fprintf(stdout, "seeding %d tasks and about %d ledger rows for %d owners over %d days\n", shape.Tasks, shape.Ledger, shape.Owners, *days)
		if rep.Seed, err = bigdata.Seed(ctx, pool, shape, stdout); err != nil {
			return err
		}
		bigdata.PrintSeed(stdout, rep.Seed)
	} else if *seedReport != "" {
		if rep.Seed, err = bigdata.ReadSeedReport(*seedReport); err != nil {
			return err
		}
	}
	var measureErr error
	if *measure {
		if mc.Concurrency < 1 || mc.Lookups < 1 || mc.Searches < 2 {
			return errors.New("-concurrency and -lookups must be at least 1, -searches at least 2")
		}
		d, err := bigdata.Discover(ctx, pool, mc.ClientOwner, min(mc.Lookups, 50000))
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "measuring %s with %d clients\n", mc.BaseURL, mc.Concurrency)
		rep.Results, measureErr = bigdata.Measure(ctx, mc, d, stdout)
		if rep.Results != nil {
			bigdata.PrintResults(stdout, rep.Results)
		}
	}
	rep.Machine = bigdata.ReadMachine(ctx, pool, *revision)
	rep.FinishedAt = time.Now().UTC()
	if *out != "" {
		if err := rep.WriteJSON(*out); err != nil {
			return errors.Join(measureErr, err)
		}
		fmt.Fprintf(stdout, "report: %s\n", *out)
	}
	return measureErr
}
