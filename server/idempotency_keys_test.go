package server_test

import (
	"testing"

	"github.com/tollgate/tollgate/accounts"
)

// TestRouteRetryUnderAKeyStoredInClearSkipsTheGuards: a route call retried
// under a key its task holds in clear (stored before keys were digested)
// is a retry like any other: it costs nothing, so the per-user guards do
// not count it again.
func TestRouteRetryUnderAKeyStoredInClearSkipsTheGuards(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	key := e.owner("acme", accounts.RoleClient, 1_000_000)
	e.fake.Script(workersAnswer(`{"label":"ok","confidence":1}`))
	first := routeCall(e, key, "classify-ticket", "route-legacy-1", map[string]any{"ticket": "x"}).route(t)
	if first.Fallback != nil || first.TaskID == nil {
		t.Fatalf("first call: fallback %+v task %v", first.Fallback, first.TaskID)
	}
	if _, err := e.pool.Exec(t.Context(), `UPDATE tasks SET idempotency_key = 'route-legacy-1' WHERE id = $1::uuid`, *first.TaskID); err != nil {
		t.Fatal(err)
	}
	again := routeCall(e, key, "classify-ticket", "route-legacy-1", map[string]any{"ticket": "x"}).route(t)
	if again.TaskID == nil || *again.TaskID != *first.TaskID {
		t.Errorf("retry answered task %v, want %s", again.TaskID, *first.TaskID)
	}
	if n := e.scalar(`SELECT coalesce(sum(count), 0) FROM route_limits WHERE kind = 'day'`); n != 1 {
		t.Errorf("daily cap counted %d calls, want 1: the retry went through the guards again", n)
	}
	if n := e.fake.CallCount(); n != 1 {
		t.Errorf("%d provider calls, want 1", n)
	}
}
