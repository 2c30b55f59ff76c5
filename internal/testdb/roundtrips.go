package testdb

import (
	"context"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
)

// RoundTrips is a pgx tracer (pgx.ConnConfig.Tracer) that counts what
// connections send to PostgreSQL in one go: each statement sent alone and
// each batch, a pipeline, once. Tests and benchmarks use it to count round
// trips, a figure that does not move with the host's load. It is safe for
// concurrent use.
type RoundTrips struct {
	// Skip, when set, leaves out the statements it matches; a batch is
	// judged by its first statement after BEGIN.
	Skip func(sql string) bool
	n    atomic.Int64
}

// N returns the round trips counted so far.
func (r *RoundTrips) N() int64 { return r.n.Load() }

func (r *RoundTrips) count(sql string) {
	if r.Skip == nil || !r.Skip(sql) {
		r.n.Add(1)
	}
}

// TraceQueryStart counts a statement sent alone.
func (r *RoundTrips) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	r.count(d.SQL)
	return ctx
}

// TraceQueryEnd does nothing.
func (r *RoundTrips) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// TraceBatchStart counts a batch.
func (r *RoundTrips) TraceBatchStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceBatchStartData) context.Context {
	if q := d.Batch.QueuedQueries; len(q) > 0 {
		sql := q[0].SQL
		if sql == "BEGIN" && len(q) > 1 {
			sql = q[1].SQL
		}
		r.count(sql)
	}
	return ctx
}

// TraceBatchQuery does nothing.
func (r *RoundTrips) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}

// TraceBatchEnd does nothing.
func (r *RoundTrips) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}
