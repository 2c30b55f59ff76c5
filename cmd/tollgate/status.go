package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tollgate/tollgate/catalog"
	"github.com/tollgate/tollgate/status"
)

// statusCmd: tollgate status. Prints the fleet's queues, provider-key
// gates, budgets near their limits and oldest waiting tasks, read from the
// database every instance shares. It only reads: it never creates or
// migrates the database, so it is safe against production. With
// TOLLGATE_CONFIG set, queues and gates are the catalog's provider keys'
// (a key removed from it is not shown); without, every key the database
// holds.
func statusCmd(ctx context.Context, getenv func(string) string, stdout io.Writer) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	// One connection is enough for four queries in a row, and an operator
	// running this against a busy database should take no more.
	cfg, err := pgxpool.ParseConfig(orDefault(getenv("DATABASE_URL"), defaultDatabaseURL))
	if err != nil {
		return fmt.Errorf("DATABASE_URL: %w", err)
	}
	cfg.MaxConns = 1
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return fmt.Errorf("database: %w", err)
	}
	defer pool.Close()
	// With the catalog the service runs on (TOLLGATE_CONFIG), its provider
	// keys only; without, every key the database holds.
	var keys []string
	if path := getenv("TOLLGATE_CONFIG"); path != "" {
		cat, err := catalog.Load(path, getenv)
		if err != nil {
			return fmt.Errorf("TOLLGATE_CONFIG: %w", err)
		}
		keys = cat.ProviderKeys()
	}
	r, err := status.Collect(ctx, pool, keys)
	if err != nil {
		return err
	}
	return r.WriteTable(stdout)
}
