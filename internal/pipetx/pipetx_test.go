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
		}, func(err error) bool {
			var pe *pgconn.PgError
			return errors.As(err, &pe) && pe.Code == "TG999"
		}, 0},
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
		}, func(err error) bool {
			var pe *pgconn.PgError
			return errors.As(err, &pe) && pe.Code == "23505"
		}, 0},
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
		}, func(err error) bool {
			var pe *pgconn.PgError
			return errors.As(err, &pe) && pe.Code == "TG999"
		}, 0},
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
