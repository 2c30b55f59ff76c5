// Command tollgate runs the Tollgate service and its administration tasks.
//
//	tollgate serve                       run the HTTP API and the workers
//	tollgate migrate up|down [N]|version manage the database schema
//	tollgate keys create --owner O [--role client|support|finance|admin] [--workload W] [--name N] [--expires-at T]
//	tollgate budget set --owner O --total-micros N [--period none|daily|monthly] [--workload W]
//	tollgate budget verify                prove every balance from the ledger
//	tollgate classify --provider P --status N [--header 'Name: value']…  classify an error body from stdin
//	tollgate status                      print queues, gates, budgets near limits, oldest tasks
//	tollgate fakeprovider                run the deterministic fake model provider
//	tollgate version                     print the version and the commit it was built from
//
// Configuration comes from the environment; see docs/configuration.md.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"strings"
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
  tollgate serve [--log-format json|text] [--role all|api|worker]
  tollgate migrate up|down [N]|version
  tollgate keys create --owner OWNER [--role client|support|finance|admin] [--workload W] [--name N] [--expires-at RFC3339]
  tollgate keys list [--owner OWNER]
  tollgate keys revoke --id KEY_ID
  tollgate budget set --owner OWNER --total-micros N|unlimited [--period none|daily|monthly] [--workload W]
  tollgate budget verify
  tollgate classify --provider openai|anthropic|cloudflare --status N [--header 'Name: value']... < body
  tollgate status
  tollgate fakeprovider
  tollgate version
  tollgate help

Every command takes --help (or -h): it prints the command's usage and does nothing else.
`

// run is the whole program; main only wires the process to it, so tests
// can run every subcommand in-process.
func run(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return fmt.Errorf("no command given")
	}
	if helpAsked(args[1:]) {
		if lines := commandUsage(args); lines != "" {
			fmt.Fprint(stdout, "usage:\n"+lines)
			if fs := commandFlags(args); fs != nil {
				printFlags(stdout, fs)
			}
			return nil
		}
	}
	switch args[0] {
	case "version", "--version":
		fmt.Fprintln(stdout, version())
		return nil
	case "serve":
		return serve(ctx, args[1:], getenv, stdout, stderr)
	case "migrate":
		return migrateCmd(ctx, args[1:], getenv, stdout)
	case "keys":
		return keysCmd(ctx, args[1:], getenv, stdout, stderr)
	case "budget":
		return budgetCmd(ctx, args[1:], getenv, stdout, stderr)
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

// helpAsked reports whether args ask for help (-h or --help) rather than
// for the command to run: the command's usage is then all that happens.
func helpAsked(args []string) bool {
	for _, a := range args {
		switch a {
		case "--":
			return false
		case "-h", "-help", "--help":
			return true
		}
	}
	return false
}

// commandUsage is usage's lines for the command args name: the
// subcommand's line when args name one usage lists (keys create), else
// every line of the command (keys); "" for an unknown command.
func commandUsage(args []string) string {
	var all, sub strings.Builder
	for _, line := range strings.SplitAfter(usage, "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || f[0] != "tollgate" || f[1] != args[0] {
			continue
		}
		all.WriteString(line)
		if len(f) > 2 && len(args) > 1 && f[2] == args[1] {
			sub.WriteString(line)
		}
	}
	if sub.Len() > 0 {
		return sub.String()
	}
	return all.String()
}

// version is the build's version: the module version, the commit and its
// time as the Go toolchain stamped them, and the Go release.
func version() string {
	v, rev, at, dirty := "(unknown)", "", "", false
	if bi, ok := debug.ReadBuildInfo(); ok {
		v = bi.Main.Version
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.time":
				at = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
	}
	out := "tollgate " + v
	if rev != "" {
		out += " commit " + rev
		if dirty {
			out += " (modified)"
		}
	}
	if at != "" {
		out += " " + at
	}
	return out + " " + runtime.Version()
}
