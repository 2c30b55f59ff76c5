package testdb

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
)

// The template a run leaves behind is an ordinary database, one that an
// older run marked IS_TEMPLATE included: dropping it needs no ALTER
// DATABASE … IS_TEMPLATE false first.
func TestTemplateIsDroppable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, ServerURL())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	name, err := ensureTemplate(ctx, conn)
	if err != nil {
		t.Fatal(err)
	}
	// As an older version of this package left it.
	if _, err := conn.Exec(ctx, "ALTER DATABASE "+pgx.Identifier{name}.Sanitize()+" WITH IS_TEMPLATE true"); err != nil {
		t.Fatal(err)
	}
	if _, err := ensureTemplate(ctx, conn); err != nil {
		t.Fatal(err)
	}
	var marked bool
	if err := conn.QueryRow(ctx, `SELECT datistemplate FROM pg_database WHERE datname = $1`, name).Scan(&marked); err != nil {
		t.Fatal(err)
	}
	if marked {
		t.Fatalf("template %s is marked IS_TEMPLATE; DROP DATABASE would refuse it", name)
	}
	// Still a template to clone from.
	New(t)
}
