package status_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tollgate/tollgate/internal/testdb"
	"github.com/tollgate/tollgate/status"
)

// An open breaker whose probe is due reports idle when nothing waits on its
// key, and its probe as due now (never in the past) when a task waits;
// keys outside the catalog are dropped and keys without rows reported
// empty and closed.
func TestCollectProvidersGatesAndCatalogKeys(t *testing.T) {
	t.Parallel()
	pool, _ := testdb.NewPool(t)
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `
		INSERT INTO provider_keys (key, state, next_probe_at, reason_class, reason_code, opened_at) VALUES
		  ('lonely',  'open', now() - interval '1 hour', 'exhausted', 'insufficient_quota', now() - interval '2 hours'),
		  ('busy',    'open', now() - interval '1 hour', 'exhausted', 'insufficient_quota', now() - interval '2 hours'),
		  ('ahead',   'open', now() + interval '1 hour', 'exhausted', 'insufficient_quota', now() - interval '2 hours'),
		  ('removed', 'open', now() + interval '1 hour', 'exhausted', 'insufficient_quota', now() - interval '2 hours');
		INSERT INTO river_job (kind, max_attempts, args, queue, state, created_at, scheduled_at, finalized_at) VALUES
		  ('tollgate_task', 25, '{}', 'provider_busy', 'scheduled', now(), now() + interval '1 hour', NULL),
		  ('tollgate_task', 25, '{}', 'provider_lonely', 'completed', now(), now(), now()),
		  ('tollgate_task', 25, '{}', 'provider_removed', 'available', now(), now(), NULL);
		INSERT INTO river_queue (name, updated_at) VALUES ('provider_removed', now()), ('maintenance', now());`); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name       string
		keys       []string
		wantStates map[string]string
		wantQueues []string
	}{
		{"catalog keys", []string{"lonely", "busy", "ahead", "fresh"},
			map[string]string{"lonely": "idle", "busy": "open", "ahead": "open", "fresh": "closed"},
			[]string{"maintenance", "provider_ahead", "provider_busy", "provider_fresh", "provider_lonely"}},
		{"no catalog: every key stored", nil,
			map[string]string{"lonely": "idle", "busy": "open", "ahead": "open", "removed": "open"},
			[]string{"maintenance", "provider_busy", "provider_removed"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, err := status.CollectProviders(ctx, pool, c.keys)
			if err != nil {
				t.Fatal(err)
			}
			states := map[string]string{}
			for _, g := range p.Gates {
				states[g.ProviderKey] = g.State
				switch {
				case g.State == "idle" && g.NextProbeAt != nil:
					t.Errorf("%s: idle with a next probe at %v", g.ProviderKey, g.NextProbeAt)
				case g.State == "open" && (g.NextProbeAt == nil || g.NextProbeAt.Before(p.At)):
					t.Errorf("%s: open with next probe %v, before the report's %v", g.ProviderKey, g.NextProbeAt, p.At)
				}
			}
			if diff := cmp.Diff(c.wantStates, states); diff != "" {
				t.Errorf("gate states mismatch (-want +got):\n%s", diff)
			}
			var queues []string
			for _, q := range p.Queues {
				queues = append(queues, q.Name)
				if q.Name == "provider_fresh" && q.Depth() != 0 {
					t.Errorf("a key without jobs has depth %d", q.Depth())
				}
			}
			if diff := cmp.Diff(c.wantQueues, queues); diff != "" {
				t.Errorf("queues mismatch (-want +got):\n%s", diff)
			}
		})
	}
	for _, g := range mustCollect(t, pool, []string{"busy"}).Gates {
		if g.ProviderKey == "busy" && (g.NextProbeAt == nil || time.Since(*g.NextProbeAt) > time.Minute) {
			t.Errorf("busy's probe, due an hour ago, shows as %v; want due now", g.NextProbeAt)
		}
	}
}

func mustCollect(t *testing.T, q status.Querier, keys []string) status.Report {
	t.Helper()
	r, err := status.Collect(context.Background(), q, keys)
	if err != nil {
		t.Fatal(err)
	}
	return r
}
