package metrics

import (
	"context"
	"log/slog"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/tollgate/tollgate/internal/testdb"
)

// The database gauges have a series for every catalog key, 0 when idle,
// count a run on arrival (a running task without a job), and have none for
// a key the catalog no longer lists.
func TestDatabaseGaugesFollowTheCatalog(t *testing.T) {
	t.Parallel()
	pool, _ := testdb.NewPool(t)
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `
		INSERT INTO owners (id) VALUES ('acme');
		INSERT INTO provider_keys (key, state, next_probe_at, opened_at) VALUES
		  ('gone', 'open', now() + interval '1 hour', now()),
		  ('quiet', 'open', now() - interval '1 hour', now());
		INSERT INTO river_job (kind, max_attempts, args, queue, state) VALUES ('tollgate_task', 25, '{}', 'provider_gone', 'available');
		INSERT INTO river_queue (name, updated_at) VALUES ('provider_gone', now());
		INSERT INTO tasks (id, owner_id, idempotency_key, request_hash, request, model, status, attempts, created_at, deadline_at)
		VALUES ('00000000-0000-0000-0000-000000000013', 'acme', 'k13', '\x00', '{}', 'm', 'running', 1, now(), '2100-01-01T00:00:00Z');
		INSERT INTO task_attempts (task_id, attempt, provider_key, model, idempotency_key)
		VALUES ('00000000-0000-0000-0000-000000000013', 1, 'busy', 'm', 'x:1');
		INSERT INTO budget_reservations (task_id, owner_id, amount_micros, estimated, created_at, budget_period_ids)
		VALUES ('00000000-0000-0000-0000-000000000013', 'acme', 25, true, now(), '{}');`); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(&dbCollector{pool: pool, log: slog.New(slog.DiscardHandler), keys: []string{"idle", "busy", "quiet"}})
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			name := mf.GetName()
			for _, l := range m.GetLabel() {
				name += "," + l.GetValue()
			}
			if mf.GetName() == "tollgate_provider_key_state" && m.GetGauge().GetValue() == 0 {
				continue
			}
			got[name] = m.GetGauge().GetValue()
		}
	}
	want := map[string]float64{
		"tollgate_queue_depth,busy": 1, "tollgate_queue_depth,idle": 0, "tollgate_queue_depth,quiet": 0,
		"tollgate_queue_oldest_seconds,idle": 0, "tollgate_queue_oldest_seconds,quiet": 0,
		"tollgate_provider_key_state,busy,closed": 1, "tollgate_provider_key_state,idle,closed": 1,
		"tollgate_provider_key_state,quiet,idle": 1,
	}
	oldest, ok := got["tollgate_queue_oldest_seconds,busy"]
	if !ok || oldest < 0 || oldest > 60 {
		t.Errorf("tollgate_queue_oldest_seconds{busy} = %v (present %v), want the run's age", oldest, ok)
	}
	delete(got, "tollgate_queue_oldest_seconds,busy")
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("series mismatch (-want +got):\n%s", diff)
	}
}
