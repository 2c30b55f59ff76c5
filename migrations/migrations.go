// Package migrations owns Tollgate's database schema: River's tables and
// ours, in one golang-migrate history embedded in the binary, so that one
// `tollgate migrate up` creates everything a process needs.
//
// River's versions are generated from River's published SQL by
// internal/rivergen; Tollgate's own start at 000100, the v0.1.0 baseline
// (the whole schema as released), and every later change is a migration
// numbered after it, so that a database of any release since v0.1.0
// migrates forward.
package migrations

//go:generate go run ./internal/rivergen .

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"strconv"
	"strings"

	"github.com/golang-migrate/migrate/v4"
	_ "github.com/golang-migrate/migrate/v4/database/pgx/v5" // registers the pgx5:// driver
	"github.com/golang-migrate/migrate/v4/source/iofs"
	"github.com/jackc/pgx/v5"
)

//go:embed *.sql
var files embed.FS

// FS returns the embedded migration files.
func FS() fs.FS { return files }

// Latest returns the highest version among the embedded migrations.
func Latest() uint {
	entries, _ := fs.ReadDir(files, ".")
	var latest uint
	for _, e := range entries {
		n, _, ok := strings.Cut(e.Name(), "_")
		if !ok {
			continue
		}
		v, err := strconv.ParseUint(n, 10, 32)
		if err == nil && uint(v) > latest {
			latest = uint(v)
		}
	}
	return latest
}

// Migrator applies the embedded migrations to one database. It holds
// golang-migrate's advisory lock while it works, so instances starting
// together against one database do not race.
type Migrator struct {
	m *migrate.Migrate
}

// New opens a migrator for the database at databaseURL (a postgres:// URL).
// It fails when the database cannot be reached.
func New(databaseURL string) (*Migrator, error) {
	src, err := iofs.New(files, ".")
	if err != nil {
		return nil, fmt.Errorf("migrations: open embedded files: %w", err)
	}
	u, err := driverURL(databaseURL)
	if err != nil {
		return nil, err
	}
	m, err := migrate.NewWithSourceInstance("iofs", src, u)
	if err != nil {
		return nil, fmt.Errorf("migrations: connect: %w", err)
	}
	return &Migrator{m: m}, nil
}

// Close releases the migrator's connection.
func (mg *Migrator) Close() error {
	serr, derr := mg.m.Close()
	return errors.Join(serr, derr)
}

// Up applies every pending migration. Being current already is not an error.
func (mg *Migrator) Up() error {
	if err := mg.m.Up(); err != nil && !errors.Is(err, migrate.ErrNoChange) {
		return fmt.Errorf("migrations: up: %w", err)
	}
	return nil
}

// Down reverts the given number of migrations (at least one).
func (mg *Migrator) Down(steps int) error {
	if steps < 1 {
		return fmt.Errorf("migrations: down needs at least one step, got %d", steps)
	}
	if err := mg.m.Steps(-steps); err != nil && !errors.Is(err, migrate.ErrNoChange) {
		return fmt.Errorf("migrations: down: %w", err)
	}
	return nil
}

// Version reports the applied version and whether a failed migration left
// the schema dirty. A database with no migrations reports 0.
func (mg *Migrator) Version() (version uint, dirty bool, err error) {
	v, d, err := mg.m.Version()
	if errors.Is(err, migrate.ErrNilVersion) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("migrations: version: %w", err)
	}
	return v, d, nil
}

// Current reports whether the database behind conn is clean and at least at
// the latest embedded version. It reads golang-migrate's bookkeeping table
// directly so that readiness checks need no migrator (and no lock).
func Current(ctx context.Context, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}) (bool, error) {
	var v int64
	var dirty bool
	err := q.QueryRow(ctx, `SELECT version, dirty FROM schema_migrations LIMIT 1`).Scan(&v, &dirty)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("migrations: read version: %w", err)
	}
	// A newer schema than this binary's is fine: migrations only add, so a
	// rolling deploy keeps old instances ready after the new ones migrate.
	return !dirty && uint(v) >= Latest(), nil
}

// EnsureDatabase creates the database named in databaseURL if it does not
// exist, connecting to the server's maintenance database to do so.
func EnsureDatabase(ctx context.Context, databaseURL string) error {
	u, err := url.Parse(databaseURL)
	if err != nil {
		return fmt.Errorf("migrations: parse DATABASE_URL: %w", err)
	}
	cfg, err := pgx.ParseConfig(withoutPoolParams(u).String())
	if err != nil {
		return fmt.Errorf("migrations: parse DATABASE_URL: %w", err)
	}
	name := cfg.Database
	if name == "" {
		return errors.New("migrations: DATABASE_URL names no database")
	}
	cfg.Database = "postgres"
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return fmt.Errorf("migrations: connect to maintenance database: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var exists bool
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)`, name).Scan(&exists); err != nil {
		return fmt.Errorf("migrations: look up database: %w", err)
	}
	if exists {
		return nil
	}
	_, err = conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize())
	var pgErr interface{ SQLState() string }
	if errors.As(err, &pgErr) && pgErr.SQLState() == "42P04" { // duplicate_database: another instance won
		return nil
	}
	if err != nil {
		return fmt.Errorf("migrations: create database: %w", err)
	}
	return nil
}

// driverURL turns a postgres:// URL into the pgx5:// form golang-migrate's
// pgx v5 driver registers under.
func driverURL(databaseURL string) (string, error) {
	u, err := url.Parse(databaseURL)
	if err != nil {
		return "", fmt.Errorf("migrations: parse DATABASE_URL: %w", err)
	}
	switch u.Scheme {
	case "postgres", "postgresql", "pgx5":
		u.Scheme = "pgx5"
	default:
		return "", fmt.Errorf("migrations: DATABASE_URL scheme %q is not postgres://", u.Scheme)
	}
	return withoutPoolParams(u).String(), nil
}

// withoutPoolParams drops pgxpool's own parameters (pool_max_conns, ...):
// a plain connection would send them to the server, which refuses them.
func withoutPoolParams(u *url.URL) *url.URL {
	q := u.Query()
	for k := range q {
		if strings.HasPrefix(k, "pool_") {
			q.Del(k)
		}
	}
	u.RawQuery = q.Encode()
	return u
}
