package testdb_test

import (
	"context"
	"testing"

	"github.com/tollgate/tollgate/internal/testdb"
	"github.com/tollgate/tollgate/migrations"
)

func TestNewGivesMigratedIsolatedDatabases(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, _ := testdb.NewPool(t)
	b, _ := testdb.NewPool(t)

	ok, err := migrations.Current(ctx, a)
	if err != nil || !ok {
		t.Fatalf("Current(a) = %v, %v; want true, nil", ok, err)
	}
	if _, err := a.Exec(ctx, `INSERT INTO owners (id) VALUES ('only-in-a')`); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := b.QueryRow(ctx, `SELECT count(*) FROM owners`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("database b sees %d owners written to a; want 0", n)
	}
}
