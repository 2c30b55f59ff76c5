// Package testdb gives each test its own PostgreSQL database, cloned from a
// template that holds the fully migrated schema.
//
// Migrating once and cloning with CREATE DATABASE … TEMPLATE keeps a fresh
// database per test at a few tens of milliseconds, so tests never share
// state and never depend on what an earlier run left behind. The template's
// name carries a digest of the migration files: a changed migration makes a
// new template instead of reusing a stale one.
//
// The template, tollgate_template_<digest>, is kept between runs, to be
// reused, and is an ordinary database (not marked IS_TEMPLATE): PostgreSQL
// clones any database its owner or a superuser names as TEMPLATE, and an
// unmarked one can be dropped like any other (DROP DATABASE
// tollgate_template_…), which a marked one cannot be without ALTER
// DATABASE … IS_TEMPLATE false first. Its prefix differs from the
// tollgate_tmpl_ of the marked templates earlier versions built, so that
// both versions can share a server without taking each other's template
// for an unfinished one.
package testdb

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"sort"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tollgate/tollgate/migrations"
)

// DefaultServerURL is used when TOLLGATE_TEST_DATABASE_URL is unset. It names
// the server's maintenance database; tests never write to it.
const DefaultServerURL = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"

// ServerURL returns the URL of the PostgreSQL server tests run against.
func ServerURL() string {
	if u := os.Getenv("TOLLGATE_TEST_DATABASE_URL"); u != "" {
		return u
	}
	return DefaultServerURL
}

// New creates a migrated database for this test, dropped when the test ends,
// and returns its URL.
func New(tb testing.TB) string {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	admin, err := pgx.Connect(ctx, ServerURL())
	if err != nil {
		tb.Fatalf("testdb: connect to %s: %v", redact(ServerURL()), err)
	}
	defer admin.Close(context.Background())

	tmpl, err := ensureTemplate(ctx, admin)
	if err != nil {
		tb.Fatalf("testdb: template: %v", err)
	}
	name := "tollgate_test_" + randomHex(8)
	if err := createFrom(ctx, admin, name, tmpl); err != nil {
		tb.Fatalf("testdb: create %s: %v", name, err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		conn, err := pgx.Connect(ctx, ServerURL())
		if err != nil {
			tb.Errorf("testdb: connect to drop %s: %v", name, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
			tb.Errorf("testdb: drop %s: %v", name, err)
		}
	})
	return withDatabase(ServerURL(), name)
}

// NewPool is New plus a pool on the new database, closed when the test ends.
func NewPool(tb testing.TB) (*pgxpool.Pool, string) {
	tb.Helper()
	u := New(tb)
	pool, err := pgxpool.New(context.Background(), u)
	if err != nil {
		tb.Fatalf("testdb: pool: %v", err)
	}
	tb.Cleanup(pool.Close)
	return pool, u
}

// createFrom clones the template. CREATE DATABASE fails when another session
// is briefly connected to the template (a concurrent template build), so it
// retries for a short while.
func createFrom(ctx context.Context, admin *pgx.Conn, name, tmpl string) error {
	sql := "CREATE DATABASE " + pgx.Identifier{name}.Sanitize() + " TEMPLATE " + pgx.Identifier{tmpl}.Sanitize()
	for {
		_, err := admin.Exec(ctx, sql)
		if err == nil {
			return nil
		}
		var pgErr interface{ SQLState() string }
		if !errors.As(err, &pgErr) || pgErr.SQLState() != "55006" { // object_in_use
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// ensureTemplate builds the migrated template once per migration digest.
func ensureTemplate(ctx context.Context, admin *pgx.Conn) (string, error) {
	digest, err := migrationsDigest()
	if err != nil {
		return "", err
	}
	name := "tollgate_template_" + digest[:16]
	return name, buildTemplate(ctx, admin, name)
}

// buildTemplate builds the migrated template name unless it exists. An
// advisory lock serialises builders across test processes (test packages
// run concurrently), and a template is built under another name and
// renamed once migrated, so a database by the template's name is a
// complete one.
func buildTemplate(ctx context.Context, admin *pgx.Conn, name string) error {
	if _, err := admin.Exec(ctx, `SELECT pg_advisory_lock(727274)`); err != nil {
		return err
	}
	defer admin.Exec(context.Background(), `SELECT pg_advisory_unlock(727274)`) //nolint:errcheck

	var ready bool
	if err := admin.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)`, name).Scan(&ready); err != nil || ready {
		return err
	}
	building := name + "_build"
	if _, err := admin.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{building}.Sanitize()+" WITH (FORCE)"); err != nil {
		return err
	}
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{building}.Sanitize()); err != nil {
		return err
	}
	m, err := migrations.New(withDatabase(ServerURL(), building))
	if err != nil {
		return err
	}
	upErr := m.Up()
	if err := errors.Join(upErr, m.Close()); err != nil {
		return err
	}
	_, err = admin.Exec(ctx, "ALTER DATABASE "+pgx.Identifier{building}.Sanitize()+" RENAME TO "+pgx.Identifier{name}.Sanitize())
	return err
}

func migrationsDigest() (string, error) {
	h := sha256.New()
	var names []string
	err := fs.WalkDir(migrations.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			names = append(names, p)
		}
		return err
	})
	if err != nil {
		return "", err
	}
	sort.Strings(names)
	for _, n := range names {
		b, err := fs.ReadFile(migrations.FS(), n)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(h, "%s\x00%d\x00", n, len(b))
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func withDatabase(serverURL, db string) string {
	u, err := url.Parse(serverURL)
	if err != nil {
		panic(err)
	}
	u.Path = "/" + db
	return u.String()
}

func redact(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(unparseable url)"
	}
	return u.Redacted()
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
