package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/tollgate/tollgate/internal/testdb"
)

// TestStatusCmd seeds an open breaker, a budget at 90 %, a job on its
// provider queue and a task waiting behind the breaker, and checks that
// `tollgate status` shows each where an operator looks for it.
func TestStatusCmd(t *testing.T) {
	t.Parallel()
	dbURL := testdb.New(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, `
		INSERT INTO owners (id) VALUES ('acme');
		INSERT INTO budget_limits (owner_id, period, total_micros) VALUES ('acme', 'none', 1000000);
		INSERT INTO budget_periods (owner_id, period, period_start, total_micros, reserved_micros, spent_micros)
		VALUES ('acme', 'none', 'epoch', 1000000, 100000, 800000);
		INSERT INTO provider_keys (key, state, next_probe_at, reason_class, reason_code, opened_at)
		VALUES ('openai-main', 'open', now() + interval '30 seconds', 'exhausted', 'insufficient_quota', now() - interval '5 minutes');
		INSERT INTO river_job (kind, max_attempts, args, queue, state, created_at)
		VALUES ('task', 25, '{}', 'provider_openai-main', 'scheduled', now() - interval '12 minutes');
		INSERT INTO tasks (id, owner_id, idempotency_key, request_hash, request, model, status, error, created_at, deadline_at)
		VALUES ('7d3c6a8e-0000-4000-8000-000000000001', 'acme', 'k1', '\x00', '{}', 'gpt-4o-mini', 'queued',
		        '{"code": "insufficient_quota", "class": "exhausted", "retryable": true, "message": "Waiting"}',
		        now() - interval '12 minutes', now() + interval '1 hour');
		INSERT INTO budget_reservations (task_id, owner_id, amount_micros, estimated, created_at, budget_period_ids)
		SELECT id, owner_id, 100000, true, created_at, ARRAY(SELECT id FROM budget_periods) FROM tasks;`)
	if err != nil {
		t.Fatalf("seed: %v", err)
	}

	var out bytes.Buffer
	if err := statusCmd(ctx, envFunc(map[string]string{"DATABASE_URL": dbURL}), &out); err != nil {
		t.Fatalf("status: %v", err)
	}
	got := out.String()
	for _, want := range []string{
		"Tollgate status at ",
		"\nQueues\nQUEUE ",
		"\nprovider_openai-main  0          1          0        0       0          12m",
		"\nProvider keys (throttle pauses and circuit breakers)\nKEY ",
		"\nopenai-main  open ",
		"exhausted / insufficient_quota\n",
		"\nBudgets near their limit",
		"\nacme   -         none    1970-01-01T00:00:00Z  90.0%  100000    800000  1000000\n",
		"\nOldest unfinished tasks\nTASK ",
		"\n7d3c6a8e-0000-4000-8000-000000000001  acme   gpt-4o-mini  queued  12m",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("status output lacks %q\noutput:\n%s", want, got)
		}
	}
	// The probe is 30 s ahead and the breaker opened 5 minutes ago, less or
	// more the test's own time.
	if !regexp.MustCompile(`\(in [23][0-9]s\)  \S+ \(5m[0-9]+s ago\)  exhausted`).MatchString(got) {
		t.Errorf("the open breaker's next probe and opening time are not shown relative to now; output:\n%s", got)
	}
	if !strings.HasSuffix(got, "exhausted\n") {
		t.Errorf("the waiting task should end the output, waiting for exhausted; output:\n%s", got)
	}
}

// With TOLLGATE_CONFIG, status shows the catalog's provider keys only: a
// key removed from the catalog is gone, a key never used is closed.
func TestStatusCmdFollowsTheCatalog(t *testing.T) {
	t.Parallel()
	dbURL := testdb.New(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `
		INSERT INTO provider_keys (key, state, next_probe_at, reason_class, reason_code, opened_at)
		VALUES ('retired', 'open', now() + interval '30 seconds', 'exhausted', 'insufficient_quota', now());
		INSERT INTO river_queue (name, updated_at) VALUES ('provider_retired', now());`); err != nil {
		t.Fatalf("seed: %v", err)
	}
	cfgPath := filepath.Join(t.TempDir(), "tollgate.yaml")
	yml := "providers:\n  - {key: main, kind: openai, base_url: fake}\n" +
		"models:\n  - {name: chat, provider: main, provider_model: gpt-test, input_micros_per_mtok: 1000, output_micros_per_mtok: 2000}\n"
	if err := os.WriteFile(cfgPath, []byte(yml), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name        string
		env         map[string]string
		want, tossd string
	}{
		{"with the catalog", map[string]string{"DATABASE_URL": dbURL, "TOLLGATE_CONFIG": cfgPath}, "\nmain  closed ", "retired"},
		{"without", map[string]string{"DATABASE_URL": dbURL}, "\nretired  open ", "provider_main"},
	} {
		var out bytes.Buffer
		if err := statusCmd(ctx, envFunc(c.env), &out); err != nil {
			t.Fatalf("%s: status: %v", c.name, err)
		}
		if got := out.String(); !strings.Contains(got, c.want) || strings.Contains(got, c.tossd) {
			t.Errorf("%s: output should show %q and not %q:\n%s", c.name, c.want, c.tossd, got)
		}
	}
}

// TestStatusCmdNoDatabase: the command reports an unreachable database as
// an error, with the password masked, and does not try to create it.
func TestStatusCmdNoDatabase(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	err := statusCmd(context.Background(), envFunc(map[string]string{
		"DATABASE_URL": "postgres://tollgate:s3cret-canary@127.0.0.1:1/tollgate?sslmode=disable&connect_timeout=2",
	}), &out)
	if err == nil {
		t.Fatal("status against a closed port succeeded")
	}
	if strings.Contains(err.Error(), "s3cret-canary") {
		t.Errorf("error shows the password: %v", err)
	}
	if out.Len() != 0 {
		t.Errorf("status printed %q before failing", out.String())
	}
}
