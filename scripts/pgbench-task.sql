-- pgbench-task.sql: one Tollgate task's happy path as plain SQL, the
-- ceiling `make bench` compares Tollgate with (see tools/bench/ceiling.go).
--
-- One run of this script is one task: the writes Tollgate must commit for
-- it, in the two transactions it uses, with the statements of the code
-- (tasks/service.go, budget/reserve.go, tasks/worker.go, replay/replay.go)
-- and rows of the sizes it writes. What it leaves out is what Tollgate does
-- beyond that minimum: the reads (API key, owner policy, budget limit,
-- journal and gate before the call, the task's lock, journal counts), the
-- task's job id, the queue's fetch, and the batched announcement of
-- finished tasks. The gap between Tollgate and this script is the price of
-- those, plus HTTP, Go and River.
--
-- pgbench passes: -D owner=OWNER -D period=ID (the owner's budget_periods
-- row), and runs it with -M prepared, as pgx runs statements. Every client
-- reserves on the same budget row, as every task of one owner does.
--
-- The rows' contents are variables too, so that one script measures the
-- ceiling of each scenario's requests with rows of their size (tollbench
-- sets them, see bench.CeilingRows): -D request=JSON (tasks.request),
-- payload=\xHEX (tasks.payload, the sealed raw request), parameters=JSON
-- and response=JSON (replay_records), result=JSON and output=\xHEX
-- (tasks.result and output_sealed). With -M prepared each is sent as a
-- parameter, as Tollgate sends them.
\set amount 20
\set cost 14

-- Admission (POST /v1/tasks): task, reservation, ledger row, job.
BEGIN;
INSERT INTO tasks (owner_id, idempotency_key, request_hash, request, model, reserved_micros, deadline_at,
                   payload, redaction_policy)
VALUES (:owner, gen_random_uuid()::text, sha256(gen_random_uuid()::text::bytea),
        :request, 'gpt-4o-mini', :amount, now() + interval '1 hour', :payload, 'redact')
RETURNING id::text AS task_id \gset
UPDATE budget_periods SET reserved_micros = reserved_micros + :amount, updated_at = now()
WHERE id = :period AND total_micros - reserved_micros - spent_micros >= :amount;
WITH res AS (
    INSERT INTO budget_reservations (task_id, owner_id, amount_micros, estimated, budget_period_ids)
    VALUES (:task_id::uuid, :owner, :amount, false, ARRAY[:period::bigint])
)
INSERT INTO budget_ledger (owner_id, workload, budget_period_id, task_id, kind, amount_micros)
SELECT owner_id, workload, id, :task_id::uuid, 'reserve', :amount FROM budget_periods WHERE id = :period;
INSERT INTO river_job (args, kind, max_attempts, priority, queue, state, scheduled_at, tags, metadata)
VALUES (jsonb_build_object('task_id', :task_id::text), 'tollgate_task', 9, 1, 'provider_default', 'available',
        now(), '{}', '{}')
RETURNING id AS job_id \gset
COMMIT;

-- Completion (the worker, after the model answered): journal entry, job
-- done, replay record, settlement (reservation closed, balance, two ledger
-- rows, usage row), task finished.
BEGIN;
INSERT INTO task_attempts (task_id, attempt, state, provider_key, model, idempotency_key, started_at, finished_at)
VALUES (:task_id::uuid, 1, 'succeeded', 'default', 'gpt-4o-mini', :task_id || ':1', now(), now());
UPDATE river_job SET state = 'completed', attempt = 1, attempted_at = now(), finalized_at = now()
WHERE id = :job_id;
INSERT INTO replay_records (task_id, attempt, owner_id, state, provider, provider_model, parameters, timeout_ms,
                            response, started_at, finished_at, latency_ms, redactions)
VALUES (:task_id::uuid, 1, :owner, 'succeeded', 'openai' || ':' || 'default', 'gpt-4o-mini',
        :parameters, 30000, :response, now(), now(), 1, '{}');
UPDATE budget_reservations SET state = 'settled', closed_at = now()
WHERE task_id = :task_id::uuid AND state = 'held';
WITH p AS (
    UPDATE budget_periods SET reserved_micros = reserved_micros - :amount, spent_micros = spent_micros + :cost,
                              updated_at = now()
    WHERE id = :period RETURNING id, owner_id, workload
), l AS (
    INSERT INTO budget_ledger (owner_id, workload, budget_period_id, task_id, kind, amount_micros,
                               usage_source, model, input_tokens, output_tokens)
    SELECT owner_id, workload, id, :task_id::uuid, k.kind, k.amount, 'reported', 'gpt-4o-mini', 14, 16
    FROM p, (VALUES ('release', :amount::bigint), ('settle', :cost::bigint)) AS k (kind, amount)
)
INSERT INTO usage_records (task_id, owner_id, workload, model, input_tokens, output_tokens, source,
                           cost_micros, charged_micros, shortfall_micros)
VALUES (:task_id::uuid, :owner, '', 'gpt-4o-mini', 14, 16, 'reported', :cost, :cost, 0);
UPDATE tasks SET status = 'succeeded', attempts = 1,
       result = :result, output_sealed = :output, finished_at = now(), updated_at = now()
WHERE id = :task_id::uuid;
COMMIT;
