package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/tollgate/tollgate/accounts"
	"github.com/tollgate/tollgate/budget"
	"github.com/tollgate/tollgate/migrations"
)

// migrateCmd: tollgate migrate up | down [N] | version.
func migrateCmd(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	if len(args) == 0 {
		return errors.New("usage: tollgate migrate up|down [N]|version")
	}
	dbURL := orDefault(getenv("DATABASE_URL"), defaultDatabaseURL)
	if args[0] == "up" {
		if err := migrations.EnsureDatabase(ctx, dbURL); err != nil {
			return err
		}
	}
	m, err := migrations.New(dbURL)
	if err != nil {
		return err
	}
	defer m.Close()
	switch args[0] {
	case "up":
		if err := m.Up(); err != nil {
			return err
		}
	case "down":
		steps := 1
		if len(args) > 1 {
			if steps, err = strconv.Atoi(args[1]); err != nil || steps < 1 {
				return errors.New("usage: tollgate migrate down [N] (N >= 1, default 1)")
			}
		}
		if err := m.Down(steps); err != nil {
			return err
		}
	case "version":
	default:
		return fmt.Errorf("unknown migrate command %q: want up, down or version", args[0])
	}
	v, dirty, err := m.Version()
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "version %d (latest %d)", v, migrations.Latest())
	if dirty {
		fmt.Fprint(stdout, " DIRTY: a migration failed part-way; fix and force the version")
	}
	fmt.Fprintln(stdout)
	return nil
}

// keysCmd: tollgate keys create | list | revoke. create prints the key
// alone on stdout, so scripts can capture it.
func keysCmd(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) > 0 && (args[0] == "list" || args[0] == "revoke") {
		return keysManage(ctx, args, getenv, stdout, stderr)
	}
	if len(args) == 0 || args[0] != "create" {
		return errors.New("usage: tollgate keys create --owner OWNER --role client|support|finance|admin [--workload W] [--name N] [--expires-at T] | keys list [--owner O] | keys revoke --id KEY_ID")
	}
	fs, o := keysCreateFlags()
	if err := parseFlags(fs, args[1:], stderr); err != nil {
		return err
	}
	p, err := o.params(time.Now())
	if err != nil {
		return err
	}
	pool, err := openDatabase(ctx, orDefault(getenv("DATABASE_URL"), defaultDatabaseURL), getenv("TOLLGATE_MIGRATE") != "off")
	if err != nil {
		return err
	}
	defer pool.Close()
	k, err := accounts.NewStore(pool).NewKey(ctx, p)
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, k.Secret)
	return nil
}

// keysCreateOptions are the flags of keys create, as given.
type keysCreateOptions struct {
	owner, role, workload, name, expiresAt string
}

// keysCreateFlags is keys create's flag set, parsing into the options.
func keysCreateFlags() (*flag.FlagSet, *keysCreateOptions) {
	o := &keysCreateOptions{}
	fs := flag.NewFlagSet("keys create", flag.ContinueOnError)
	fs.StringVar(&o.owner, "owner", "", "owner id (required): 1-64 letters, digits, '.', '_' or '-'")
	fs.StringVar(&o.role, "role", "client", "client, support, finance or admin")
	fs.StringVar(&o.workload, "workload", "", "workload (a named group of keys with its own budget cap); optional")
	fs.StringVar(&o.name, "name", "", fmt.Sprintf("what the key is for, for people (at most %d characters); optional", accounts.MaxKeyName))
	fs.StringVar(&o.expiresAt, "expires-at", "", "when the key stops authenticating, RFC 3339 (2027-01-02T15:04:05Z); optional, never by default")
	return fs, o
}

// params checks the options as POST /v1/keys checks its body, an expiry
// in the future of now, and returns the key to create; each error names
// its flag and what it takes.
func (o *keysCreateOptions) params(now time.Time) (accounts.KeyParams, error) {
	p := accounts.KeyParams{Owner: o.owner, Role: accounts.Role(o.role), Workload: o.workload, Name: o.name, Actor: "cli"}
	switch {
	case o.owner == "":
		return p, errors.New("--owner is required: the owner id the key belongs to")
	case !accounts.ValidOwner(o.owner):
		return p, errors.New("--owner must be 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit")
	case o.workload != "" && !accounts.ValidOwner(o.workload):
		return p, errors.New("--workload must be 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit")
	case utf8.RuneCountInString(o.name) > accounts.MaxKeyName:
		return p, fmt.Errorf("--name must be at most %d characters", accounts.MaxKeyName)
	}
	if _, err := accounts.ParseRole(o.role); err != nil {
		return p, fmt.Errorf("--role must be client, support, finance or admin, not %q", o.role)
	}
	if o.expiresAt != "" {
		t, err := time.Parse(time.RFC3339Nano, o.expiresAt)
		switch {
		case err != nil:
			return p, fmt.Errorf("--expires-at must be an RFC 3339 time, such as 2027-01-02T15:04:05Z, not %q", o.expiresAt)
		case !t.After(now):
			return p, errors.New("--expires-at must be in the future")
		}
		p.ExpiresAt = &t
	}
	return p, nil
}

// parseFlags parses args into fs. A bad flag prints the command's flags on
// stderr and returns the error for main to print, once: the flag package
// would print it too.
func parseFlags(fs *flag.FlagSet, args []string, stderr io.Writer) error {
	fs.SetOutput(io.Discard)
	err := fs.Parse(args)
	if err != nil {
		printFlags(stderr, fs)
	}
	return err
}

// printFlags lists fs's flags with their defaults and what they take.
func printFlags(w io.Writer, fs *flag.FlagSet) {
	fmt.Fprintln(w, "flags:")
	fs.SetOutput(w)
	fs.PrintDefaults()
	fs.SetOutput(io.Discard)
}

// budgetCmd: tollgate budget set --owner O --total-micros N | budget verify.
func budgetCmd(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "verify" {
		return budgetVerify(ctx, getenv, stdout)
	}
	if len(args) == 0 || args[0] != "set" {
		return errors.New("usage: tollgate budget set --owner OWNER --total-micros N|unlimited [--period none|daily|monthly] [--workload W] | tollgate budget verify")
	}
	fs, owner, totalFlag, period, workload := budgetSetFlags()
	if err := parseFlags(fs, args[1:], stderr); err != nil {
		return err
	}
	total, err := parseTotalMicros(*totalFlag)
	if err != nil {
		return err
	}
	pool, err := openDatabase(ctx, orDefault(getenv("DATABASE_URL"), defaultDatabaseURL), getenv("TOLLGATE_MIGRATE") != "off")
	if err != nil {
		return err
	}
	defer pool.Close()
	p, err := budget.ParsePeriod(*period)
	if err != nil {
		return err
	}
	b, err := budget.NewStore(pool, nil).SetLimit(ctx, budget.Limit{OwnerID: *owner, Workload: *workload, Period: p, TotalMicros: total, Actor: "cli"})
	if errors.Is(err, budget.ErrBelowCommitted) {
		return fmt.Errorf("owner %s already has reserved plus spent money above %d micros; choose a larger total", *owner, total)
	}
	if err != nil {
		return err
	}
	// A workload's cap names its workload: the same line without it
	// reads as the owner's own budget.
	who := "owner=" + b.OwnerID
	if b.Workload != "" {
		who += " workload=" + b.Workload
	}
	fmt.Fprintf(stdout, "%s period=%s total_micros=%d reserved_micros=%d spent_micros=%d available_micros=%d\n",
		who, b.Period, b.TotalMicros, b.ReservedMicros, b.SpentMicros, b.Available())
	return nil
}

// budgetSetFlags is budget set's flag set and the flags it parses into.
func budgetSetFlags() (fs *flag.FlagSet, owner, total, period, workload *string) {
	fs = flag.NewFlagSet("budget set", flag.ContinueOnError)
	owner = fs.String("owner", "", "owner id")
	total = fs.String("total-micros", "", "budget total in micro-units (1 unit = 1,000,000), at most 1000000000000000000; \"unlimited\" for that maximum")
	period = fs.String("period", "none", "none, daily or monthly (UTC calendar periods)")
	workload = fs.String("workload", "", "set the cap of this workload instead of the owner's own")
	return fs, owner, total, period, workload
}

// parseTotalMicros reads --total-micros: an integer from 0 to
// budget.MaxTotalMicros, or "unlimited" for that maximum. The error names
// the flag and the range.
func parseTotalMicros(s string) (int64, error) {
	if s == "unlimited" {
		return budget.Unlimited, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 || n > budget.MaxTotalMicros {
		return 0, fmt.Errorf("--total-micros is required: an integer from 0 to %d, or \"unlimited\"", budget.MaxTotalMicros)
	}
	return n, nil
}

// budgetVerify: tollgate budget verify. Proves every balance from the
// ledger; exits non-zero naming each owner whose balances disagree.
func budgetVerify(ctx context.Context, getenv func(string) string, stdout io.Writer) error {
	pool, err := openDatabase(ctx, orDefault(getenv("DATABASE_URL"), defaultDatabaseURL), getenv("TOLLGATE_MIGRATE") != "off")
	if err != nil {
		return err
	}
	defer pool.Close()
	mm, err := budget.NewStore(pool, nil).Verify(ctx)
	if err != nil {
		return err
	}
	if len(mm) == 0 {
		fmt.Fprintln(stdout, "ok: every balance equals its ledger")
		return nil
	}
	owners := map[string]bool{}
	for _, m := range mm {
		fmt.Fprintln(stdout, "MISMATCH", m)
		owners[m.OwnerID] = true
	}
	return fmt.Errorf("budget verify: %d mismatches across %d owners", len(mm), len(owners))
}

// keysManage: tollgate keys list [--owner O] | keys revoke --id KEY_ID. A
// key is rotated by creating a new one, moving clients to it, then
// revoking the old one; revocation takes effect at once on every instance.
func keysManage(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs, owner, id := keysManageFlags(args[0])
	if err := parseFlags(fs, args[1:], stderr); err != nil {
		return err
	}
	pool, err := openDatabase(ctx, orDefault(getenv("DATABASE_URL"), defaultDatabaseURL), getenv("TOLLGATE_MIGRATE") != "off")
	if err != nil {
		return err
	}
	defer pool.Close()
	store := accounts.NewStore(pool)
	if args[0] == "revoke" {
		if *id == "" {
			return errors.New("usage: tollgate keys revoke --id KEY_ID")
		}
		if err := store.Revoke(ctx, *id, "cli"); err != nil {
			return fmt.Errorf("revoke %s: %w", *id, err)
		}
		fmt.Fprintln(stdout, "revoked", *id)
		return nil
	}
	keys, err := store.ListKeys(ctx, *owner)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tOWNER\tROLE\tWORKLOAD\tPREFIX\tCREATED\tREVOKED")
	for _, k := range keys {
		revoked := "-"
		if k.RevokedAt != nil {
			revoked = k.RevokedAt.UTC().Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s…\t%s\t%s\n", k.ID, k.OwnerID, k.Role, k.Workload, k.Prefix, k.CreatedAt.UTC().Format(time.RFC3339), revoked)
	}
	return tw.Flush()
}

// keysManageFlags is the flag set of keys list or keys revoke (cmd).
func keysManageFlags(cmd string) (fs *flag.FlagSet, owner, id *string) {
	fs = flag.NewFlagSet("keys "+cmd, flag.ContinueOnError)
	owner = fs.String("owner", "", "only this owner's keys (list)")
	id = fs.String("id", "", "the key's id, as keys list prints it (revoke)")
	return fs, owner, id
}

// commandFlags is the flag set of the command args name, for its help;
// nil for a command that takes no flags.
func commandFlags(args []string) *flag.FlagSet {
	sub := ""
	if len(args) > 1 {
		sub = args[1]
	}
	switch {
	case args[0] == "keys" && sub == "create":
		fs, _ := keysCreateFlags()
		return fs
	case args[0] == "keys" && (sub == "list" || sub == "revoke"):
		fs, _, _ := keysManageFlags(sub)
		return fs
	case args[0] == "budget" && sub == "set":
		fs, _, _, _, _ := budgetSetFlags()
		return fs
	}
	return nil
}
