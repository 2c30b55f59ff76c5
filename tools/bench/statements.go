package bench

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
)

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
		WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) AND queryid IS NOT NULL
		  AND query !~ 'pg_stat_database|pg_stat_statements|pg_get_wal_records_info|pg_replication_slot_advance'`)
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
