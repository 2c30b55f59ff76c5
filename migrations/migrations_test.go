package migrations_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/tollgate/tollgate/internal/testdb"
	"github.com/tollgate/tollgate/migrations"
)

// Every migration can be reverted and re-applied: down to nothing, then up
// to the latest, leaving a current, clean schema.
func TestDownAndUpRoundTrip(t *testing.T) {
	t.Parallel()
	url := testdb.New(t)
	m, err := migrations.New(url)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if v, dirty, err := m.Version(); err != nil || dirty || v != migrations.Latest() {
		t.Fatalf("fresh database at version %d dirty=%v err=%v; want %d", v, dirty, err, migrations.Latest())
	}
	// Step down one migration at a time: each down file runs on its own.
	for steps := 0; ; steps++ {
		v, dirty, err := m.Version()
		if err != nil || dirty {
			t.Fatalf("after %d steps down: version %d dirty=%v err=%v", steps, v, dirty, err)
		}
		if v == 0 {
			break
		}
		if steps > 1000 {
			t.Fatal("down never reached version 0")
		}
		if err := m.Down(1); err != nil {
			t.Fatalf("down from %d: %v", v, err)
		}
	}
	if err := m.Up(); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	ok, err := migrations.Current(context.Background(), conn)
	if err != nil || !ok {
		t.Errorf("Current after round trip = %v, %v; want true", ok, err)
	}
	var riverVersions int
	if err := conn.QueryRow(context.Background(), `SELECT count(*) FROM river_migration WHERE line = 'main'`).Scan(&riverVersions); err != nil {
		t.Fatal(err)
	}
	if riverVersions != 8 {
		t.Errorf("river_migration records %d versions, want 8", riverVersions)
	}
}
