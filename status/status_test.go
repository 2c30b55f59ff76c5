package status_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/tollgate/tollgate/internal/testdb"
	"github.com/tollgate/tollgate/status"
)

// seed is a fleet in a known state. Every moment is fixed, so the expected
// ages are the report's own moment minus these.
const seed = `
INSERT INTO owners (id) VALUES ('acme'), ('beta'), ('gamma'), ('delta'), ('epsilon');

-- Budgets: acme's own cap at 80 % (in), its batch workload at 95 % but in
-- a daily period that has ended (out); beta at 99 % last month but 10 % in
-- its current period (out); gamma capped at 0 (in, 100 %); delta exactly at
-- 70 % (in); epsilon just under (out).
INSERT INTO budget_periods (owner_id, workload, period, period_start, period_end, total_micros, reserved_micros, spent_micros) VALUES
  ('acme',    '',      'none',    'epoch',                NULL,                   1000, 300, 500),
  ('acme',    'batch', 'daily',   '2020-01-01T00:00:00Z', '2020-01-02T00:00:00Z',  100,   0,  95),
  ('beta',    '',      'monthly', '2020-01-01T00:00:00Z', '2020-02-01T00:00:00Z',  100,   0,  99),
  ('beta',    '',      'monthly', '2020-02-01T00:00:00Z', '2100-01-01T00:00:00Z',  100,   0,  10),
  ('gamma',   '',      'none',    'epoch',                NULL,                      0,   0,   0),
  ('delta',   '',      'none',    'epoch',                NULL,                   1000, 200, 500),
  ('epsilon', '',      'none',    'epoch',                NULL,                   1000, 199, 500);

INSERT INTO provider_keys (key, state, paused_until, next_probe_at, reason_class, reason_code, opened_at) VALUES
  ('openai',    'open',   NULL,                   '2030-01-01T00:00:30Z', 'exhausted', 'insufficient_quota', '2020-01-01T00:00:00Z'),
  ('anthropic', 'paused', '2030-01-01T00:00:05Z', NULL,                   'throttled', 'rate_limit_exceeded', NULL),
  ('workers',   'closed', NULL,                   NULL,                   NULL,        NULL,                  NULL);

INSERT INTO river_job (kind, max_attempts, args, queue, state, created_at, scheduled_at, attempted_at, finalized_at) VALUES
  ('task', 25, '{}', 'provider_openai',    'available', '2020-01-01T00:05:00Z', '2020-01-01T00:08:00Z', NULL, NULL),
  ('task', 25, '{}', 'provider_openai',    'scheduled', '2020-01-01T00:00:00Z', now(), NULL, NULL),
  ('task', 25, '{}', 'provider_openai',    'retryable', '2020-01-01T00:06:00Z', now(), NULL, NULL),
  ('task', 25, '{}', 'provider_anthropic', 'running',   '2020-01-01T00:07:00Z', now(), now(), NULL),
  ('task', 25, '{}', 'provider_anthropic', 'completed', '2019-01-01T00:00:00Z', now(), now(), now());
-- Two task jobs scheduled: one the safety net of task 2, stored running on
-- arrival (running inline); the other task 3's, stored queued (a retry
-- waiting for its time: scheduled).
INSERT INTO river_job (id, kind, max_attempts, args, queue, state, created_at) VALUES
  (9001, 'tollgate_task', 25, '{"task_id": "00000000-0000-0000-0000-000000000002"}', 'provider_openai', 'scheduled', '2020-01-01T00:02:00Z'),
  (9002, 'tollgate_task', 25, '{"task_id": "00000000-0000-0000-0000-000000000003"}', 'provider_openai', 'scheduled', '2020-01-01T00:03:00Z');
INSERT INTO river_queue (name, updated_at) VALUES ('provider_workers', now()), ('provider_openai', now());

-- Twelve unfinished tasks, a minute apart, and an older finished one.
INSERT INTO tasks (id, owner_id, idempotency_key, request_hash, request, model, status, error, created_at, deadline_at, finished_at, result, job_id)
SELECT ('00000000-0000-0000-0000-0000000000' || lpad(i::text, 2, '0'))::uuid, 'acme', 'k' || i, '\x00', '{}', 'gpt-4o-mini',
       CASE WHEN i = 2 THEN 'running' ELSE 'queued' END,
       CASE WHEN i = 1 THEN '{"code": "insufficient_quota", "class": "exhausted", "retryable": true, "message": "Waiting"}'::jsonb
            WHEN i = 2 THEN '{"class": "transient"}'::jsonb END,
       '2020-01-01T00:00:00Z'::timestamptz + i * interval '1 minute', '2100-01-01T00:00:00Z', NULL, NULL,
       CASE i WHEN 2 THEN 9001 WHEN 3 THEN 9002 END
FROM generate_series(1, 12) AS i;
-- Each holds its reservation, made in its admission's transaction (so at
-- the same moment), as every unfinished task does.
INSERT INTO budget_reservations (task_id, owner_id, amount_micros, estimated, created_at, budget_period_ids)
SELECT id, owner_id, 25, true, created_at, ARRAY(SELECT id FROM budget_periods WHERE owner_id = 'acme' AND workload = '')
FROM tasks WHERE finished_at IS NULL;
INSERT INTO tasks (owner_id, idempotency_key, request_hash, request, model, status, created_at, deadline_at, finished_at, result)
VALUES ('acme', 'done', '\x00', '{}', 'gpt-4o-mini', 'succeeded', '2019-01-01T00:00:00Z', '2100-01-01T00:00:00Z', now(), '{}');
-- A run on arrival, newer than the twelve: stored running with no job (its
-- net is written only if needed), its attempt journalled on openai's key.
INSERT INTO tasks (id, owner_id, idempotency_key, request_hash, request, model, status, attempts, created_at, deadline_at)
VALUES ('00000000-0000-0000-0000-000000000013', 'acme', 'k13', '\x00', '{}', 'gpt-4o-mini', 'running', 1, '2020-01-01T00:13:00Z', '2100-01-01T00:00:00Z');
INSERT INTO task_attempts (task_id, attempt, provider_key, model, idempotency_key)
VALUES ('00000000-0000-0000-0000-000000000013', 1, 'openai', 'gpt-4o-mini', '00000000-0000-0000-0000-000000000013:1');
INSERT INTO budget_reservations (task_id, owner_id, amount_micros, estimated, created_at, budget_period_ids)
SELECT id, owner_id, 25, true, created_at, '{}' FROM tasks WHERE id = '00000000-0000-0000-0000-000000000013';
`

func TestCollect(t *testing.T) {
	t.Parallel()
	pool, _ := testdb.NewPool(t)
	ctx := context.Background()
	if _, err := pool.Exec(ctx, seed); err != nil {
		t.Fatalf("seed: %v", err)
	}
	got, err := status.Collect(ctx, pool, nil)
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(got.At); d < -time.Minute || d > time.Minute {
		t.Errorf("At = %v, want the database's now", got.At)
	}
	at := func(s string) time.Time {
		tm, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return tm
	}
	ptr := func(s string) *string { return &s }
	tptr := func(s string) *time.Time { tm := at(s); return &tm }
	age := func(s string) float64 { return got.At.Sub(at(s)).Seconds() }

	oldest := make([]status.Waiting, 0, status.MaxWaiting)
	for i := 1; i <= status.MaxWaiting; i++ {
		created := at("2020-01-01T00:00:00Z").Add(time.Duration(i) * time.Minute)
		w := status.Waiting{
			TaskID: "00000000-0000-0000-0000-0000000000" + twoDigits(i), OwnerID: "acme", Model: "gpt-4o-mini",
			Status: "queued", CreatedAt: created, AgeSeconds: got.At.Sub(created).Seconds(),
		}
		switch i {
		case 1:
			w.WaitingFor = ptr("exhausted")
		case 2:
			w.Status = "running" // its error is from the last attempt, not a wait
		}
		oldest = append(oldest, w)
	}
	want := status.Report{
		At: got.At,
		Queues: []status.Queue{
			{Name: "provider_anthropic", Running: 1, OldestSeconds: age("2020-01-01T00:07:00Z")},
			{Name: "provider_openai", Available: 1, Scheduled: 2, RunningInline: 2, Retryable: 1, OldestSeconds: age("2020-01-01T00:00:00Z"),
				DueWaitSeconds: age("2020-01-01T00:08:00Z")},
			{Name: "provider_workers"},
		},
		Gates: []status.Gate{
			{ProviderKey: "anthropic", State: "paused", PausedUntil: tptr("2030-01-01T00:00:05Z"), ReasonClass: ptr("throttled"), ReasonCode: ptr("rate_limit_exceeded")},
			{ProviderKey: "openai", State: "open", NextProbeAt: tptr("2030-01-01T00:00:30Z"), OpenedAt: tptr("2020-01-01T00:00:00Z"), ReasonClass: ptr("exhausted"), ReasonCode: ptr("insufficient_quota")},
			{ProviderKey: "workers", State: "closed"},
		},
		Budgets: []status.Budget{
			{OwnerID: "gamma", Period: "none", PeriodStart: time.Unix(0, 0), UsedPct: 100},
			{OwnerID: "acme", Period: "none", PeriodStart: time.Unix(0, 0), TotalMicros: 1000, ReservedMicros: 300, SpentMicros: 500, UsedPct: 80},
			{OwnerID: "delta", Period: "none", PeriodStart: time.Unix(0, 0), TotalMicros: 1000, ReservedMicros: 200, SpentMicros: 500, UsedPct: 70},
		},
		Oldest: oldest,
	}
	opts := cmp.Options{
		cmpopts.EquateApprox(0, 0.001), // ages: float seconds from microsecond timestamps
		cmp.Comparer(func(a, b time.Time) bool { return a.Equal(b) }),
	}
	if diff := cmp.Diff(want, got, opts); diff != "" {
		t.Errorf("report mismatch (-want +got):\n%s", diff)
	}
}

func TestCollectEmpty(t *testing.T) {
	t.Parallel()
	pool, _ := testdb.NewPool(t)
	got, err := status.Collect(context.Background(), pool, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Empty sections are empty lists, never nil: JSON clients get [], not
	// null.
	if got.Queues == nil || got.Gates == nil || got.Budgets == nil || got.Oldest == nil {
		t.Errorf("empty report has nil sections: %+v", got)
	}
	if n := len(got.Queues) + len(got.Gates) + len(got.Budgets) + len(got.Oldest); n != 0 {
		t.Errorf("empty database reports %d rows: %+v", n, got)
	}
}

func TestCollectError(t *testing.T) {
	t.Parallel()
	pool, _ := testdb.NewPool(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := status.Collect(ctx, pool, nil); err == nil {
		t.Fatal("Collect on a canceled context succeeded")
	}
}

func twoDigits(i int) string {
	return string(rune('0'+i/10)) + string(rune('0'+i%10))
}
