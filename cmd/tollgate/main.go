// Command tollgate runs the Tollgate service and its administration tasks.
//
//	tollgate serve                       run the HTTP API and the workers
//	tollgate migrate up|down [N]|version manage the database schema
//	tollgate keys create --owner O --role client|support|finance|admin [--workload W]
//	tollgate budget set --owner O --total-micros N [--period none|daily|monthly] [--workload W]
//	tollgate budget verify                prove every balance from the ledger
//	tollgate classify --provider P --status N [--header 'Name: value']…  classify an error body from stdin
//	tollgate status                      print queues, gates, budgets near limits, oldest tasks
//	tollgate fakeprovider                run the deterministic fake model provider
//
// Configuration comes from the environment; see docs/configuration.md.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/tollgate/tollgate/internal/logsafe"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stdin, os.Stdout, os.Stderr); err != nil {
		// Errors can quote DATABASE_URL or another URL (url.Parse does).
		fmt.Fprintln(os.Stderr, "tollgate:", logsafe.Error(err))
		os.Exit(1)
	}
}

const usage = `usage:
  tollgate serve [--log-format json|text] [--role api|worker|all]
  tollgate migrate up|down [N]|version
  tollgate keys create --owner OWNER --role client|support|finance|admin [--workload W]
  tollgate keys list [--owner OWNER]
  tollgate keys revoke --id KEY_ID
  tollgate budget set --owner OWNER --total-micros N [--period none|daily|monthly] [--workload W]
  tollgate budget verify
  tollgate tasks digest-keys [--batch N]
  tollgate classify --provider openai|anthropic|cloudflare --status N [--header 'Name: value']... < body
  tollgate status
  tollgate fakeprovider
`

// run is the whole program; main only wires the process to it, so tests
// can run every subcommand in-process.
func run(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return fmt.Errorf("no command given")
	}
	switch args[0] {
	case "serve":
		return serve(ctx, args[1:], getenv, stdout, stderr)
	case "migrate":
		return migrateCmd(ctx, args[1:], getenv, stdout)
	case "keys":
		return keysCmd(ctx, args[1:], getenv, stdout)
	case "budget":
		return budgetCmd(ctx, args[1:], getenv, stdout)
	case "tasks":
		return tasksCmd(ctx, args[1:], getenv, stdout)
	case "status":
		return statusCmd(ctx, getenv, stdout)
	case "classify":
		return classifyCmd(args[1:], stdin, stdout)
	case "fakeprovider":
		return fakeProvider(ctx, getenv, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	}
	fmt.Fprint(stderr, usage)
	return fmt.Errorf("unknown command %q", args[0])
}
