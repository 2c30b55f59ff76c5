package server_test

import (
	"context"
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tollgate/tollgate/accounts"
	"github.com/tollgate/tollgate/status"
)

// TestAdminStatus: GET /v1/admin/status is the admin's view of the fleet,
// the same report `tollgate status` prints, as JSON.
func TestAdminStatus(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{noWorkers: true})
	admin := e.owner("ops", accounts.RoleAdmin, 0)
	client := e.owner("acme", accounts.RoleClient, 30)

	// With no workers the task stays queued; its reservation (6 input
	// tokens at 1 micro, 10 output at 2) is 26 of acme's 30 micros.
	r := e.post(client, "status-1", taskBody("abcdabcd", 10), nil)
	if r.status != http.StatusAccepted {
		t.Fatalf("POST /v1/tasks: %d %s", r.status, r.body)
	}
	taskID := r.task(t).ID
	if _, err := e.pool.Exec(context.Background(), `
		INSERT INTO provider_keys (key, state, next_probe_at, reason_class, reason_code, opened_at)
		VALUES ('default', 'open', now() + interval '30 seconds', 'exhausted', 'insufficient_quota', now()),
		       ('retired', 'open', now() + interval '30 seconds', 'exhausted', 'insufficient_quota', now());
		INSERT INTO river_queue (name, updated_at) VALUES ('provider_retired', now())`); err != nil {
		t.Fatal(err)
	}

	// Not through e.do: its contract check needs the path in openapi.yaml.
	get := func(key string) (int, string, []byte) {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, e.url+"/v1/admin/status", nil)
		if err != nil {
			t.Fatal(err)
		}
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		body, err := io.ReadAll(res.Body)
		if err != nil {
			t.Fatal(err)
		}
		return res.StatusCode, res.Header.Get("Content-Type"), body
	}

	for _, tc := range []struct {
		name, key string
		want      int
	}{
		{"no key", "", http.StatusUnauthorized},
		{"client key", client, http.StatusForbidden},
	} {
		if code, ct, body := get(tc.key); code != tc.want || ct != "application/problem+json" {
			t.Errorf("%s: %d %s %s, want %d problem+json", tc.name, code, ct, body, tc.want)
		}
	}

	code, ct, body := get(admin)
	if code != http.StatusOK || ct != "application/json" {
		t.Fatalf("admin: %d %s %s, want 200 application/json", code, ct, body)
	}
	checkStatusShape(t, body)

	var got status.Report
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatal(err)
	}
	var queue *status.Queue
	for i := range got.Queues {
		if got.Queues[i].Name == "provider_default" {
			queue = &got.Queues[i]
		}
	}
	if queue == nil || queue.Available != 1 {
		t.Errorf("queues = %+v, want provider_default with the task's job available", got.Queues)
	}
	for _, q := range got.Queues {
		if q.Name == "provider_retired" {
			t.Errorf("queues = %+v: a key no longer in the catalog is listed", got.Queues)
		}
	}
	// Every catalog key, the ones never paused or opened as closed; the
	// key the catalog no longer lists (retired) is not shown.
	var keys []string
	for _, g := range got.Gates {
		keys = append(keys, g.ProviderKey+" "+g.State)
		if g.ProviderKey == "default" && (g.NextProbeAt == nil || g.PausedUntil != nil) {
			t.Errorf("gate = %+v, want default open with a next probe", g)
		}
	}
	if diff := cmp.Diff([]string{"backup closed", "default open", "workers closed"}, keys); diff != "" {
		t.Errorf("gates mismatch (-want +got):\n%s", diff)
	}
	wantBudgets := []status.Budget{
		{OwnerID: "ops", Period: "none", UsedPct: 100},
		{OwnerID: "acme", Period: "none", TotalMicros: 30, ReservedMicros: 26, UsedPct: 100 * 26.0 / 30},
	}
	for i := range got.Budgets {
		got.Budgets[i].PeriodStart = wantBudgets[0].PeriodStart // the start is the balance's business
	}
	if diff := cmp.Diff(wantBudgets, got.Budgets); diff != "" {
		t.Errorf("budgets mismatch (-want +got):\n%s", diff)
	}
	if len(got.Oldest) != 1 || got.Oldest[0].TaskID != taskID || got.Oldest[0].OwnerID != "acme" ||
		got.Oldest[0].Status != "queued" || got.Oldest[0].WaitingFor != nil {
		t.Errorf("oldest = %+v, want only task %s, queued", got.Oldest, taskID)
	}
}

// checkStatusShape holds the JSON to the field names the OpenAPI schemas
// declare (additionalProperties: false): a field added to package status
// must be added there too.
func checkStatusShape(t *testing.T, body []byte) {
	t.Helper()
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(body, &raw); err != nil {
		t.Fatal(err)
	}
	keys := func(what string, m map[string]json.RawMessage, want ...string) {
		t.Helper()
		if got := slices.Sorted(maps.Keys(m)); !slices.Equal(got, slices.Sorted(slices.Values(want))) {
			t.Errorf("%s fields = %v, want %v", what, got, want)
		}
	}
	keys("report", raw, "at", "queues", "gates", "budgets", "oldest")
	items := map[string][]string{
		"queues":  {"name", "available", "scheduled", "running", "running_inline", "retryable", "oldest_seconds", "due_wait_seconds"},
		"gates":   {"provider_key", "state", "paused_until", "next_probe_at", "opened_at", "reason_class", "reason_code"},
		"budgets": {"owner_id", "workload", "period", "period_start", "total_micros", "reserved_micros", "spent_micros", "used_pct"},
		"oldest":  {"task_id", "owner_id", "model", "status", "created_at", "age_seconds", "waiting_for"},
	}
	for section, want := range items {
		var list []map[string]json.RawMessage
		if err := json.Unmarshal(raw[section], &list); err != nil {
			t.Fatalf("%s: %v", section, err)
		}
		if len(list) == 0 {
			t.Errorf("%s is empty; the test seeds one of each", section)
		}
		for _, item := range list {
			keys(section, item, want...)
		}
	}
}
