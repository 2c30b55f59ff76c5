// Package pgstats makes sure PostgreSQL plans Tollgate's statements from
// statistics once its tables hold data: in a database just migrated, a
// statement prepared while a table is empty keeps the plan chosen then, on
// every pooled connection, until something invalidates it (an ANALYZE, or
// a vacuum that updates the table's statistics).
//
// Planned against an empty tasks table, the idempotency lookup every POST
// makes walks all of the owner's tasks (tasks_owner_created, filtering on
// the key) instead of probing the unique key: measured on 2 cores at 300
// tasks/s into a fresh database, admission p99 grew from 50 to 700 ms over
// 40 s, and POSTs were shed, until autovacuum's first pass. With
// autovacuum off, nothing would ever have re-planned it. AnalyzeNew closes
// that window within seconds of the data arriving, whatever autovacuum's
// settings; afterwards it finds nothing to do.
package pgstats

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tollgate/tollgate/internal/periodic"
)

// DefaultMinBytes is how much a never-analyzed table must hold before
// AnalyzeNew analyzes it: 1 MiB is about a thousand tasks, a few seconds of
// load, and far past the size where the planner's guesses for an empty
// table and its real statistics choose the same plans.
const DefaultMinBytes = 1 << 20

// AnalyzeNew ANALYZEs every ordinary table of the current schema that
// PostgreSQL has never analyzed nor vacuumed (pg_class.reltuples < 0) and
// that now holds at least minBytes, skipping those in skip, and returns
// the tables it analyzed. ANALYZE invalidates the plans every connection
// cached for the table, so the next execution of each is planned from the
// statistics. A table the role may not analyze is skipped by PostgreSQL
// with a warning and stays as it was; autovacuum still covers it. It
// returns the error of the listing or of the first ANALYZE that failed.
func AnalyzeNew(ctx context.Context, pool *pgxpool.Pool, minBytes int64, skip map[string]bool) ([]string, error) {
	rows, err := pool.Query(ctx, `
		SELECT c.relname FROM pg_class c
		WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind = 'r'
		  AND c.reltuples < 0 AND pg_relation_size(c.oid) >= $1
		ORDER BY c.relname`, minBytes)
	if err != nil {
		return nil, fmt.Errorf("pgstats: list tables: %w", err)
	}
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("pgstats: list tables: %w", err)
	}
	var analyzed []string
	for _, t := range tables {
		if skip[t] {
			continue
		}
		if _, err := pool.Exec(ctx, "ANALYZE "+pgx.Identifier{t}.Sanitize()); err != nil {
			return analyzed, fmt.Errorf("pgstats: analyze %s: %w", t, err)
		}
		analyzed = append(analyzed, t)
	}
	return analyzed, nil
}

// Run calls AnalyzeNew every interval until ctx ends, each table at most
// once per process (a table PostgreSQL skipped for want of privilege is
// not tried again), and logs what it analyzed.
func Run(ctx context.Context, pool *pgxpool.Pool, interval time.Duration, minBytes int64, log *slog.Logger) {
	tried := map[string]bool{}
	periodic.Every(ctx, interval, func(ctx context.Context) {
		analyzed, err := AnalyzeNew(ctx, pool, minBytes, tried)
		for _, name := range analyzed {
			tried[name] = true
			log.Info("analyzed a table that had no statistics yet, so that its statements are planned from them", slog.String("table", name))
		}
		if err != nil && ctx.Err() == nil {
			log.Warn("analyzing new tables failed; the next round retries", slog.String("error", err.Error()))
		}
	})
}
