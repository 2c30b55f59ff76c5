package testdb

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
)

// A template is an ordinary database: it clones, and a leftover one drops
// with a plain DROP DATABASE, no ALTER DATABASE … IS_TEMPLATE false first.
// Built under a name of its own, so the shared template is left alone.
func TestTemplateClonesAndDrops(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, ServerURL())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	name := "tollgate_template_test_" + randomHex(6)
	if err := buildTemplate(ctx, conn, name); err != nil {
		t.Fatal(err)
	}
	var marked bool
	if err := conn.QueryRow(ctx, `SELECT datistemplate FROM pg_database WHERE datname = $1`, name).Scan(&marked); err != nil {
		t.Fatal(err)
	}
	if marked {
		t.Errorf("template %s is marked IS_TEMPLATE", name)
	}
	clone := "tollgate_test_" + randomHex(8)
	if err := createFrom(ctx, conn, clone, name); err != nil {
		t.Fatalf("clone: %v", err)
	}
	if _, err := conn.Exec(ctx, "DROP DATABASE "+pgx.Identifier{clone}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "DROP DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		t.Fatalf("DROP DATABASE %s: %v, want it dropped", name, err)
	}
}
