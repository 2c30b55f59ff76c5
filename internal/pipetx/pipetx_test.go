package pipetx_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tollgate/tollgate/internal/pipetx"
	"github.com/tollgate/tollgate/internal/testdb"
)

func newPool(t *testing.T) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(testdb.New(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 1 // every Run reuses the one connection: a leaked transaction would show
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if _, err := pool.Exec(context.Background(), `CREATE TABLE t (v int PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	return pool
}

// hasCode matches a PostgreSQL error with SQLSTATE code.
func hasCode(code string) func(error) bool {
	return func(err error) bool {
		var pe *pgconn.PgError
		return errors.As(err, &pe) && pe.Code == code
	}
}

func count(t *testing.T, pool *pgxpool.Pool) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM t`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestRun covers how a transaction ends: committed with its last statements
// in the COMMIT's pipeline, committed plainly, rolled back by fn's error,
// and rolled back from inside SQL by tollgate_abort, with nothing after
// the aborting statement run. The pool's single connection must be clean
// after each.
func TestRun(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := newPool(t)
	errFn := errors.New("fn failed")
	cases := []struct {
		name    string
		fn      func(tx *pipetx.Tx) error
		wantErr func(error) bool
		added   int
	}{
		{"CommitWith commits the batch", func(tx *pipetx.Tx) error {
			if _, err := tx.Exec(ctx, `INSERT INTO t VALUES (1)`); err != nil {
				return err
			}
			b := &pgx.Batch{}
			b.Queue(`INSERT INTO t VALUES (2)`)
			var got int
			b.Queue(`SELECT count(*) FROM t`).QueryRow(func(r pgx.Row) error { return r.Scan(&got) })
			if err := tx.CommitWith(ctx, b); err != nil {
				return err
			}
			if got != 2 {
				t.Errorf("count inside the pipeline: %d, want 2", got)
			}
			return nil
		}, nil, 2},
		{"a nil fn commits", func(tx *pipetx.Tx) error {
			_, err := tx.Exec(ctx, `INSERT INTO t VALUES (3)`)
			return err
		}, nil, 1},
		{"fn's error rolls back", func(tx *pipetx.Tx) error {
			if _, err := tx.Exec(ctx, `INSERT INTO t VALUES (4)`); err != nil {
				return err
			}
			return errFn
		}, func(err error) bool { return errors.Is(err, errFn) }, 0},
		{"tollgate_abort skips the rest and the COMMIT", func(tx *pipetx.Tx) error {
			if _, err := tx.Exec(ctx, `INSERT INTO t VALUES (5)`); err != nil {
				return err
			}
			b := &pgx.Batch{}
			b.Queue(`SELECT tollgate_abort('TG999', 'refused')`)
			b.Queue(`INSERT INTO t VALUES (6)`)
			return tx.CommitWith(ctx, b)
		}, hasCode("TG999"), 0},
		{"a first batch carries BEGIN: what follows is the same transaction", func(tx *pipetx.Tx) error {
			b := &pgx.Batch{}
			b.Queue(`INSERT INTO t VALUES (8)`)
			var first, second int64
			b.Queue(`SELECT txid_current()`).QueryRow(func(r pgx.Row) error { return r.Scan(&first) })
			if err := tx.SendBatch(ctx, b).Close(); err != nil {
				return err
			}
			if err := tx.QueryRow(ctx, `SELECT txid_current()`).Scan(&second); err != nil {
				return err
			}
			if first != second {
				t.Errorf("the first batch ran in transaction %d, the next statement in %d", first, second)
			}
			_, err := tx.Exec(ctx, `INSERT INTO t VALUES (9)`)
			return err
		}, nil, 2},
		{"a failed first batch rolls back", func(tx *pipetx.Tx) error {
			b := &pgx.Batch{}
			b.Queue(`INSERT INTO t VALUES (10)`)
			b.Queue(`INSERT INTO t VALUES (10)`)
			return tx.SendBatch(ctx, b).Close()
		}, hasCode("23505"), 0},
		{"a transaction that is one CommitWith", func(tx *pipetx.Tx) error {
			b := &pgx.Batch{}
			b.Queue(`INSERT INTO t VALUES (11)`)
			b.Queue(`INSERT INTO t VALUES (12)`)
			return tx.CommitWith(ctx, b)
		}, nil, 2},
		{"one CommitWith aborted from SQL", func(tx *pipetx.Tx) error {
			b := &pgx.Batch{}
			b.Queue(`INSERT INTO t VALUES (13)`)
			b.Queue(`SELECT tollgate_abort('TG999', 'refused')`)
			return tx.CommitWith(ctx, b)
		}, hasCode("TG999"), 0},
		{"a first query carries BEGIN: what follows is the same transaction", func(tx *pipetx.Tx) error {
			rows, err := tx.Query(ctx, `INSERT INTO t VALUES ($1), ($2) RETURNING v, txid_current()`, 20, 21)
			if err != nil {
				return err
			}
			var got []int
			var first int64
			for rows.Next() {
				var v int
				if err := rows.Scan(&v, &first); err != nil {
					return err
				}
				got = append(got, v)
			}
			if err := rows.Err(); err != nil {
				return err
			}
			if len(got) != 2 {
				t.Errorf("first query returned %v, want two rows", got)
			}
			var second int64
			if err := tx.QueryRow(ctx, `SELECT txid_current()`).Scan(&second); err != nil {
				return err
			}
			if first != second {
				t.Errorf("the first query ran in transaction %d, the next statement in %d", first, second)
			}
			return nil
		}, nil, 2},
		{"a first query that fails rolls back", func(tx *pipetx.Tx) error {
			rows, err := tx.Query(ctx, `INSERT INTO t VALUES ($1), ($1) RETURNING v`, 22)
			if err != nil {
				return err
			}
			rows.Close()
			return rows.Err()
		}, hasCode("23505"), 0},
		{"a first QueryRow that finds nothing leaves the transaction usable", func(tx *pipetx.Tx) error {
			var v int
			if err := tx.QueryRow(ctx, `SELECT v FROM t WHERE v = $1`, -1).Scan(&v); !errors.Is(err, pgx.ErrNoRows) {
				t.Errorf("QueryRow of no row: %v, want pgx.ErrNoRows", err)
			}
			_, err := tx.Exec(ctx, `INSERT INTO t VALUES (23)`)
			return err
		}, nil, 1},
		{"a first Exec with arguments", func(tx *pipetx.Tx) error {
			tag, err := tx.Exec(ctx, `INSERT INTO t VALUES ($1), ($2)`, 24, 25)
			if err != nil {
				return err
			}
			if tag.RowsAffected() != 2 {
				t.Errorf("first Exec: %d rows affected, want 2", tag.RowsAffected())
			}
			return nil
		}, nil, 2},
		{"a first Exec without arguments may hold several statements", func(tx *pipetx.Tx) error {
			_, err := tx.Exec(ctx, `INSERT INTO t VALUES (26); INSERT INTO t VALUES (27)`)
			return err
		}, nil, 2},
		{"nothing sent, nothing to commit", func(*pipetx.Tx) error { return nil }, nil, 0},
		{"a used Tx says so", func(tx *pipetx.Tx) error {
			if err := tx.Commit(ctx); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, `INSERT INTO t VALUES (7)`)
			return err
		}, func(err error) bool { return errors.Is(err, pipetx.ErrDone) }, 0},
	}
	for _, c := range cases {
		before := count(t, pool)
		err := pipetx.Run(ctx, pool, c.fn)
		switch {
		case c.wantErr == nil && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.wantErr != nil && !c.wantErr(err):
			t.Errorf("%s: error %v is not the one expected", c.name, err)
		}
		if got := count(t, pool) - before; got != c.added {
			t.Errorf("%s: %d rows added, want %d", c.name, got, c.added)
		}
		conn, err := pool.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if st := conn.Conn().PgConn().TxStatus(); st != 'I' {
			t.Errorf("%s: the connection was left in transaction status %c, want I (idle)", c.name, st)
		}
		conn.Release()
	}
}

// TestBeginTravelsWithTheFirstStatement counts the round trips of
// transactions by how they open: BEGIN never costs one of its own, but
// before a multi-statement Exec (simple protocol) or a statement with
// pgx's per-query options.
func TestBeginTravelsWithTheFirstStatement(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cfg, err := pgxpool.ParseConfig(testdb.New(t))
	if err != nil {
		t.Fatal(err)
	}
	trips := &testdb.RoundTrips{}
	cfg.ConnConfig.Tracer = trips
	cfg.MaxConns = 1
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if _, err := pool.Exec(ctx, `CREATE TABLE t (v int PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	commit := func(tx *pipetx.Tx, v int) error {
		b := &pgx.Batch{}
		b.Queue(`INSERT INTO t VALUES ($1)`, v)
		return tx.CommitWith(ctx, b)
	}
	cases := []struct {
		name string
		fn   func(tx *pipetx.Tx) error
		want int64
	}{
		{"query, then CommitWith", func(tx *pipetx.Tx) error {
			var n int
			if err := tx.QueryRow(ctx, `SELECT count(*) FROM t WHERE v > $1`, 0).Scan(&n); err != nil {
				return err
			}
			return commit(tx, 1)
		}, 2},
		{"rows read to the end, then CommitWith", func(tx *pipetx.Tx) error {
			rows, err := tx.Query(ctx, `SELECT v FROM t WHERE v > $1`, 0)
			if err != nil {
				return err
			}
			if _, err := pgx.CollectRows(rows, pgx.RowTo[int]); err != nil {
				return err
			}
			return commit(tx, 2)
		}, 2},
		{"Exec with arguments, then Commit", func(tx *pipetx.Tx) error {
			_, err := tx.Exec(ctx, `INSERT INTO t VALUES ($1)`, 3)
			return err
		}, 2},
		{"one CommitWith", func(tx *pipetx.Tx) error { return commit(tx, 4) }, 1},
		{"Exec without arguments: BEGIN first", func(tx *pipetx.Tx) error {
			_, err := tx.Exec(ctx, `INSERT INTO t VALUES (5)`)
			return err
		}, 3},
		{"a per-query exec mode: BEGIN first", func(tx *pipetx.Tx) error {
			_, err := tx.Exec(ctx, `INSERT INTO t VALUES ($1)`, pgx.QueryExecModeExec, 6)
			if err != nil {
				return err
			}
			return commit(tx, 7)
		}, 3},
	}
	for _, c := range cases {
		before := trips.N()
		if err := pipetx.Run(ctx, pool, c.fn); err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if got := trips.N() - before; got != c.want {
			t.Errorf("%s: %d round trips, want %d", c.name, got, c.want)
		}
	}
	if got := count(t, pool); got != 7 {
		t.Errorf("%d rows committed, want 7", got)
	}
}
