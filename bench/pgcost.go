package bench

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// pgCounters is a reading of Postgres's cumulative counters. Commits and
// row counts are the benchmark database's own (pg_stat_database); WAL
// position and transaction ids are cluster-wide, since Postgres keeps no
// per-database figure for either, so other databases' writes during a step
// count too: OtherCommits says how busy they were.
type pgCounters struct {
	at           time.Time
	commits      int64 // xact_commit: every transaction, read-only ones too
	rollbacks    int64
	inserted     int64
	updated      int64
	deleted      int64
	walBytes     int64 // WAL position in bytes from 0/0
	nextXID      int64 // transactions that wrote: only they take an xid
	otherCommits int64 // xact_commit of every other database
}

// PGCost is what Postgres did during one measurement, in total and per
// finished task.
type PGCost struct {
	Commits        int64 `json:"commits"`
	Rollbacks      int64 `json:"rollbacks"`
	WriteXacts     int64 `json:"write_xacts"`
	WALBytes       int64 `json:"wal_bytes"`
	RowsInserted   int64 `json:"rows_inserted"`
	RowsUpdated    int64 `json:"rows_updated"`
	RowsDeleted    int64 `json:"rows_deleted"`
	OtherDBCommits int64 `json:"other_db_commits"`

	CommitsPerTask    float64 `json:"commits_per_task"`
	WriteXactsPerTask float64 `json:"write_xacts_per_task"`
	WALBytesPerTask   float64 `json:"wal_bytes_per_task"`
	RowsPerTask       float64 `json:"rows_written_per_task"`
}

// readCounters reads the counters through conn, connected to the database
// being measured. pg_stat_database is read as of this statement (each
// autocommit statement is its own transaction, so no cached snapshot).
func readCounters(ctx context.Context, conn *pgx.Conn) (pgCounters, error) {
	c := pgCounters{at: time.Now()}
	err := conn.QueryRow(ctx, `
		SELECT d.xact_commit, d.xact_rollback, d.tup_inserted, d.tup_updated, d.tup_deleted,
		       pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint,
		       pg_snapshot_xmax(pg_current_snapshot())::text::bigint,
		       (SELECT coalesce(sum(o.xact_commit), 0) FROM pg_stat_database o
		        WHERE o.datname IS DISTINCT FROM current_database())::bigint
		FROM pg_stat_database d WHERE d.datname = current_database()`).
		Scan(&c.commits, &c.rollbacks, &c.inserted, &c.updated, &c.deleted, &c.walBytes, &c.nextXID, &c.otherCommits)
	if err != nil {
		return c, fmt.Errorf("bench: read pg_stat_database: %w", err)
	}
	return c, nil
}

// cost is what happened between two readings, per task for tasks > 0.
func cost(before, after pgCounters, tasks int) PGCost {
	c := PGCost{
		Commits:        after.commits - before.commits,
		Rollbacks:      after.rollbacks - before.rollbacks,
		WriteXacts:     after.nextXID - before.nextXID,
		WALBytes:       after.walBytes - before.walBytes,
		RowsInserted:   after.inserted - before.inserted,
		RowsUpdated:    after.updated - before.updated,
		RowsDeleted:    after.deleted - before.deleted,
		OtherDBCommits: after.otherCommits - before.otherCommits,
	}
	if tasks > 0 {
		n := float64(tasks)
		c.CommitsPerTask = float64(c.Commits) / n
		c.WriteXactsPerTask = float64(c.WriteXacts) / n
		c.WALBytesPerTask = float64(c.WALBytes) / n
		c.RowsPerTask = float64(c.RowsInserted+c.RowsUpdated+c.RowsDeleted) / n
	}
	return c
}

// Statement is one normalised statement's share of a step, from
// pg_stat_statements.
type Statement struct {
	Query        string  `json:"query"`
	Calls        int64   `json:"calls"`
	CallsPerTask float64 `json:"calls_per_task"`
	TotalMS      float64 `json:"total_ms"`
	MeanMS       float64 `json:"mean_ms"`
}

type statementReading struct {
	query   string
	calls   int64
	totalMS float64
}

// statements reads pg_stat_statements for the database conn is on, when the
// module is loaded (shared_preload_libraries) and the extension exists or
// can be created. It never resets the view, which is shared with whatever
// else uses the server: steps diff two readings instead. ok is false when
// the view is unavailable.
type statements struct {
	conn *pgx.Conn
	ok   bool
	why  string
}

func newStatements(ctx context.Context, conn *pgx.Conn) *statements {
	s := &statements{conn: conn}
	var preload string
	if err := conn.QueryRow(ctx, `SELECT current_setting('shared_preload_libraries')`).Scan(&preload); err != nil {
		s.why = err.Error()
		return s
	}
	if !strings.Contains(preload, "pg_stat_statements") {
		s.why = "pg_stat_statements is not in shared_preload_libraries"
		return s
	}
	if _, err := conn.Exec(ctx, `CREATE EXTENSION IF NOT EXISTS pg_stat_statements`); err != nil {
		s.why = "CREATE EXTENSION pg_stat_statements: " + err.Error()
		return s
	}
	if _, err := s.read(ctx); err != nil {
		s.why = err.Error()
		return s
	}
	s.ok = true
	return s
}

func (s *statements) read(ctx context.Context) (map[int64]statementReading, error) {
	rows, err := s.conn.Query(ctx, `
		SELECT queryid, calls, total_exec_time, left(regexp_replace(query, '\s+', ' ', 'g'), 160)
		FROM pg_stat_statements
		WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) AND queryid IS NOT NULL`)
	if err != nil {
		return nil, fmt.Errorf("bench: read pg_stat_statements: %w", err)
	}
	out := map[int64]statementReading{}
	var id int64
	var r statementReading
	_, err = pgx.ForEachRow(rows, []any{&id, &r.calls, &r.totalMS, &r.query}, func() error {
		// A statement run by several users appears once per user; add them.
		prev := out[id]
		out[id] = statementReading{query: r.query, calls: prev.calls + r.calls, totalMS: prev.totalMS + r.totalMS}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("bench: read pg_stat_statements: %w", err)
	}
	return out, nil
}

// topStatements returns the limit statements that took the most time between two
// readings.
func topStatements(before, after map[int64]statementReading, tasks, limit int) []Statement {
	var out []Statement
	for k, a := range after {
		b := before[k]
		calls := a.calls - b.calls
		if calls <= 0 {
			continue
		}
		st := Statement{Query: a.query, Calls: calls, TotalMS: a.totalMS - b.totalMS}
		st.MeanMS = st.TotalMS / float64(calls)
		if tasks > 0 {
			st.CallsPerTask = float64(calls) / float64(tasks)
		}
		out = append(out, st)
	}
	// Largest total time first; ties by query, so the output is stable.
	slices.SortFunc(out, func(a, b Statement) int {
		if c := cmp.Compare(b.TotalMS, a.TotalMS); c != 0 {
			return c
		}
		return strings.Compare(a.Query, b.Query)
	})
	if len(out) > limit {
		out = out[:limit]
	}
	return out
}
