// Package pipetx runs a transaction whose last statements and COMMIT reach
// PostgreSQL in one round trip.
//
// Why: every task of an owner updates the owner's budget row, at admission
// and at settlement. A row lock is held until commit, and with pgx's own
// transactions the COMMIT is sent only after the locking statement's result
// has come back to Go: the lock is held across a client round trip, and on a
// busy host that round trip (the goroutine waiting to be scheduled, the
// backend waiting for a core) is most of the hold. Every other task of the
// owner queues behind it, so the round trip, not PostgreSQL, sets the
// owner's throughput. Sending the locking statement and COMMIT in one
// pipeline holds the lock only while PostgreSQL executes and commits.
//
// A statement in the final batch that must not take effect (a budget that
// cannot cover a reservation) aborts the transaction from inside SQL by
// raising an error (the tollgate_abort function of the migrations): the
// pipeline skips everything after the failed statement, COMMIT included, and
// Run rolls back.
//
// Tx implements pgx.Tx, so code written for a pgx.Tx (River's InsertTx, the
// domain packages' ...Tx functions) runs inside it unchanged.
//
// BEGIN is sent with the transaction's first statement, in the same
// pipeline: a transaction that is one CommitWith is one round trip, and one
// that opens with a query (River's job insert, a task's lock) saves the
// round trip a separate BEGIN would cost. Only a first Exec without
// arguments, which pgx sends with the simple protocol (it may hold several
// statements, which a pipeline cannot), or a first statement carrying pgx's
// per-query options, is preceded by a BEGIN of its own.
package pipetx

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Tx is a transaction on one pooled connection. It is not safe for
// concurrent use, like any pgx.Tx.
type Tx struct {
	conn  *pgxpool.Conn
	begun bool // BEGIN sent
	done  bool // committed or rolled back
}

var _ pgx.Tx = (*Tx)(nil)

// ErrDone is returned by a Tx used after it committed or rolled back.
var ErrDone = errors.New("pipetx: transaction already ended")

// Run begins a transaction on a connection of pool and calls fn with it.
// When fn returns nil the transaction commits, unless fn already committed
// it with CommitWith; when fn returns an error, or panics, it rolls back.
// It returns fn's error, or the error of BEGIN or COMMIT.
func Run(ctx context.Context, pool *pgxpool.Pool, fn func(tx *Tx) error) (err error) {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return err
	}
	tx := &Tx{conn: conn}
	defer func() {
		if !tx.done {
			// A rollback that cannot be sent leaves the connection in a
			// transaction; the pool closes such connections on release
			// rather than reuse them.
			_ = tx.Rollback(context.WithoutCancel(ctx))
		}
		conn.Release()
	}()
	if err := fn(tx); err != nil {
		return err
	}
	if tx.done {
		return nil
	}
	return tx.Commit(ctx)
}

// CommitWith sends the statements queued on b followed by COMMIT in one
// pipeline, runs b's callbacks, and ends the transaction. If a statement
// fails, the ones after it and the COMMIT are skipped and the transaction
// is rolled back; the first error (a callback's, or the statement's) is
// returned.
func (tx *Tx) CommitWith(ctx context.Context, b *pgx.Batch) error {
	if tx.done {
		return ErrDone
	}
	b.Queue("COMMIT")
	err := tx.conn.SendBatch(ctx, tx.withBegin(b)).Close()
	if tx.conn.Conn().PgConn().TxStatus() == 'I' {
		// COMMIT ran: the transaction is over whatever a callback said.
		tx.done = true
		return err
	}
	if err == nil {
		err = fmt.Errorf("pipetx: COMMIT did not end the transaction (status %c)", tx.conn.Conn().PgConn().TxStatus())
	}
	if rerr := tx.Rollback(context.WithoutCancel(ctx)); rerr != nil {
		return errors.Join(err, rerr)
	}
	return err
}

// Commit commits the transaction.
func (tx *Tx) Commit(ctx context.Context) error {
	if tx.done {
		return ErrDone
	}
	if !tx.begun {
		tx.done = true // nothing was sent: nothing to commit
		return nil
	}
	tag, err := tx.conn.Exec(ctx, "COMMIT")
	tx.done = true
	if err != nil {
		return err
	}
	if tag.String() == "ROLLBACK" {
		// COMMIT of a failed transaction rolls it back.
		return pgx.ErrTxCommitRollback
	}
	return nil
}

// Rollback rolls the transaction back; it is a no-op once it has ended.
func (tx *Tx) Rollback(ctx context.Context) error {
	if tx.done {
		return nil
	}
	tx.done = true
	if !tx.begun {
		return nil
	}
	_, err := tx.conn.Exec(ctx, "ROLLBACK")
	return err
}

// begin sends BEGIN if the transaction has not begun: before a statement
// that is not a batch.
func (tx *Tx) begin(ctx context.Context) error {
	if tx.begun {
		return nil
	}
	tx.begun = true
	_, err := tx.conn.Exec(ctx, "BEGIN")
	return err
}

// withBegin returns b, preceded by BEGIN if the transaction has not begun.
func (tx *Tx) withBegin(b *pgx.Batch) *pgx.Batch {
	if tx.begun {
		return b
	}
	tx.begun = true
	first := &pgx.Batch{}
	first.Queue("BEGIN")
	first.QueuedQueries = append(first.QueuedQueries, b.QueuedQueries...)
	return first
}

// Begin is not supported: no code run inside a Tx needs a savepoint.
func (tx *Tx) Begin(context.Context) (pgx.Tx, error) {
	return nil, errors.New("pipetx: savepoints are not supported")
}

// Exec runs sql in the transaction.
func (tx *Tx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if tx.done {
		return pgconn.CommandTag{}, ErrDone
	}
	if !tx.begun && len(args) > 0 && pipelinable(args) {
		br := tx.sendWithBegin(ctx, sql, args)
		tag, err := br.Exec()
		if cerr := br.Close(); err == nil {
			err = cerr
		}
		return tag, err
	}
	if err := tx.begin(ctx); err != nil {
		return pgconn.CommandTag{}, err
	}
	return tx.conn.Exec(ctx, sql, args...)
}

// Query runs sql in the transaction.
func (tx *Tx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if tx.done {
		return nil, ErrDone
	}
	if !tx.begun && pipelinable(args) {
		br := tx.sendWithBegin(ctx, sql, args)
		rows, err := br.Query()
		if err != nil {
			if rows != nil {
				rows.Close()
			}
			if cerr := br.Close(); cerr != nil && !errors.Is(cerr, err) {
				err = errors.Join(err, cerr)
			}
			return rows, err
		}
		return &firstRows{Rows: rows, br: br}, nil
	}
	if err := tx.begin(ctx); err != nil {
		return nil, err
	}
	return tx.conn.Query(ctx, sql, args...)
}

// QueryRow runs sql in the transaction.
func (tx *Tx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	if tx.done {
		return errRow{ErrDone}
	}
	if !tx.begun && pipelinable(args) {
		rows, err := tx.Query(ctx, sql, args...)
		if err != nil {
			return errRow{err}
		}
		return firstRow{rows}
	}
	if err := tx.begin(ctx); err != nil {
		return errRow{err}
	}
	return tx.conn.QueryRow(ctx, sql, args...)
}

// sendWithBegin sends BEGIN and sql in one pipeline and reads BEGIN's
// result: the caller reads sql's and closes the results.
func (tx *Tx) sendWithBegin(ctx context.Context, sql string, args []any) pgx.BatchResults {
	b := &pgx.Batch{}
	b.Queue(sql, args...)
	br := tx.conn.SendBatch(ctx, tx.withBegin(b))
	if _, err := br.Exec(); err != nil {
		_ = br.Close()
		return errBatch{err}
	}
	return br
}

// pipelinable reports whether a statement with args can travel in a batch
// as it would run alone: pgx honours per-query options (an exec mode,
// result formats) only outside batches.
func pipelinable(args []any) bool {
	if len(args) == 0 {
		return true
	}
	switch args[0].(type) {
	case pgx.QueryExecMode, pgx.QueryResultFormats, pgx.QueryResultFormatsByOID:
		return false
	}
	return true
}

// SendBatch sends b in the transaction, in one round trip, without
// committing.
func (tx *Tx) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	if tx.done {
		return errBatch{ErrDone}
	}
	return tx.conn.SendBatch(ctx, tx.withBegin(b))
}

// CopyFrom copies rows in the transaction.
func (tx *Tx) CopyFrom(ctx context.Context, table pgx.Identifier, cols []string, src pgx.CopyFromSource) (int64, error) {
	if tx.done {
		return 0, ErrDone
	}
	if err := tx.begin(ctx); err != nil {
		return 0, err
	}
	return tx.conn.CopyFrom(ctx, table, cols, src)
}

// Prepare prepares a statement on the transaction's connection.
func (tx *Tx) Prepare(ctx context.Context, name, sql string) (*pgconn.StatementDescription, error) {
	if tx.done {
		return nil, ErrDone
	}
	return tx.conn.Conn().Prepare(ctx, name, sql)
}

// LargeObjects is not supported; its zero value must not be used.
func (tx *Tx) LargeObjects() pgx.LargeObjects { return pgx.LargeObjects{} }

// Conn returns the transaction's connection.
func (tx *Tx) Conn() *pgx.Conn { return tx.conn.Conn() }

// firstRows are the rows of a transaction's first statement, sent in one
// pipeline with BEGIN: closing them, or reading past the last, also reads
// the pipeline's end, so the connection is free for the next statement.
type firstRows struct {
	pgx.Rows
	br     pgx.BatchResults
	err    error // the pipeline's, once closed
	closed bool
}

func (r *firstRows) Next() bool {
	if r.Rows.Next() {
		return true
	}
	r.Close()
	return false
}

func (r *firstRows) Close() {
	if r.closed {
		return
	}
	r.closed = true
	r.Rows.Close()
	r.err = r.br.Close()
}

func (r *firstRows) Err() error {
	if err := r.Rows.Err(); err != nil {
		return err
	}
	return r.err
}

// firstRow is QueryRow's row on firstRows, read as pgx reads a row: the
// first one, pgx.ErrNoRows when there is none.
type firstRow struct{ rows pgx.Rows }

func (r firstRow) Scan(dest ...any) error {
	defer r.rows.Close()
	if !r.rows.Next() {
		if err := r.rows.Err(); err != nil {
			return err
		}
		return pgx.ErrNoRows
	}
	if err := r.rows.Scan(dest...); err != nil {
		return err
	}
	r.rows.Close()
	return r.rows.Err()
}

type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }

type errBatch struct{ err error }

func (b errBatch) Exec() (pgconn.CommandTag, error) { return pgconn.CommandTag{}, b.err }
func (b errBatch) Query() (pgx.Rows, error)         { return nil, b.err }
func (b errBatch) QueryRow() pgx.Row                { return errRow(b) }
func (b errBatch) Close() error                     { return b.err }
func (b errBatch) Tx() pgx.Tx                       { return nil }
