-- Tollgate's core schema: owners and keys, budgets with an append-only
-- ledger, tasks with their attempt journal, settled usage and replay records.
--
-- The River migrations before this one were applied by golang-migrate, not
-- by River's own migrator; record them in river_migration so River's tooling
-- sees the schema as current.
INSERT INTO river_migration (line, version)
SELECT 'main', v FROM generate_series(1, 8) AS v
ON CONFLICT DO NOTHING;

CREATE TABLE owners (
    id         text PRIMARY KEY,
    created_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT owners_id_format CHECK (id ~ '^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$')
);

-- API keys are stored only as a SHA-256 digest: keys are 256-bit random
-- tokens, so a fast hash is enough and lookups stay one index probe.
CREATE TABLE api_keys (
    id         uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    owner_id   text NOT NULL REFERENCES owners (id),
    role       text NOT NULL,
    key_hash   bytea NOT NULL,
    key_prefix text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    revoked_at timestamptz,
    CONSTRAINT api_keys_role CHECK (role IN ('client', 'support', 'finance', 'admin')),
    CONSTRAINT api_keys_key_hash UNIQUE (key_hash)
);

-- One row per owner. Admission is one conditional UPDATE on this row; the
-- CHECK is the last line of defence against overspend.
CREATE TABLE budgets (
    owner_id        text PRIMARY KEY REFERENCES owners (id),
    total_micros    bigint NOT NULL,
    reserved_micros bigint NOT NULL DEFAULT 0,
    spent_micros    bigint NOT NULL DEFAULT 0,
    updated_at      timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT budgets_amounts CHECK (
        total_micros >= 0 AND reserved_micros >= 0 AND spent_micros >= 0
        AND reserved_micros + spent_micros <= total_micros
    )
);

-- A reservation is held by one task until it is settled or released.
CREATE TABLE budget_reservations (
    task_id       uuid PRIMARY KEY,
    owner_id      text NOT NULL REFERENCES owners (id),
    amount_micros bigint NOT NULL,
    estimated     boolean NOT NULL,
    state         text NOT NULL DEFAULT 'held',
    created_at    timestamptz NOT NULL DEFAULT now(),
    closed_at     timestamptz,
    CONSTRAINT budget_reservations_amount CHECK (amount_micros > 0),
    CONSTRAINT budget_reservations_state CHECK (state IN ('held', 'settled', 'released')),
    CONSTRAINT budget_reservations_closed CHECK ((state = 'held') = (closed_at IS NULL))
);
CREATE INDEX budget_reservations_held ON budget_reservations (owner_id) WHERE state = 'held';

-- Append-only: every movement of reserved or spent money. For every owner,
-- reserved = sum(reserve) - sum(release) and spent = sum(spend).
CREATE TABLE budget_ledger (
    id            bigserial PRIMARY KEY,
    owner_id      text NOT NULL REFERENCES owners (id),
    task_id       uuid,
    kind          text NOT NULL,
    amount_micros bigint NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT budget_ledger_kind CHECK (kind IN ('reserve', 'release', 'spend')),
    CONSTRAINT budget_ledger_amount CHECK (amount_micros >= 0)
);
CREATE INDEX budget_ledger_owner ON budget_ledger (owner_id, id);

CREATE FUNCTION budget_ledger_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'budget_ledger is append-only';
END;
$$;
CREATE TRIGGER budget_ledger_append_only
    BEFORE UPDATE OR DELETE ON budget_ledger
    FOR EACH ROW EXECUTE FUNCTION budget_ledger_append_only();

-- Settled usage, one row per finished task that spent money: what finance
-- reconciles. cost = charged + shortfall, always.
CREATE TABLE usage_records (
    task_id          uuid PRIMARY KEY,
    owner_id         text NOT NULL REFERENCES owners (id),
    model            text NOT NULL,
    input_tokens     bigint NOT NULL,
    output_tokens    bigint NOT NULL,
    source           text NOT NULL,
    cost_micros      bigint NOT NULL,
    charged_micros   bigint NOT NULL,
    shortfall_micros bigint NOT NULL DEFAULT 0,
    settled_at       timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT usage_records_source CHECK (source IN ('reported', 'estimated')),
    CONSTRAINT usage_records_amounts CHECK (
        input_tokens >= 0 AND output_tokens >= 0 AND charged_micros >= 0
        AND shortfall_micros >= 0 AND cost_micros = charged_micros + shortfall_micros
    )
);
CREATE INDEX usage_records_settled ON usage_records (settled_at, task_id);
CREATE INDEX usage_records_owner_settled ON usage_records (owner_id, settled_at);

-- The idempotency record: the unique (owner_id, idempotency_key) constraint
-- decides races between concurrent submissions, never a read-then-insert.
CREATE TABLE tasks (
    id              uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    owner_id        text NOT NULL REFERENCES owners (id),
    idempotency_key text NOT NULL,
    request_hash    bytea NOT NULL,
    request         jsonb NOT NULL,
    model           text NOT NULL,
    status          text NOT NULL DEFAULT 'queued',
    attempts        integer NOT NULL DEFAULT 0,
    reserved_micros bigint NOT NULL DEFAULT 0,
    result          jsonb,
    error           jsonb,
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    finished_at     timestamptz,
    CONSTRAINT tasks_owner_idempotency_key UNIQUE (owner_id, idempotency_key),
    CONSTRAINT tasks_status CHECK (status IN ('queued', 'running', 'succeeded', 'failed', 'canceled')),
    CONSTRAINT tasks_finished CHECK ((status IN ('succeeded', 'failed', 'canceled')) = (finished_at IS NOT NULL)),
    CONSTRAINT tasks_result CHECK ((status = 'succeeded') = (result IS NOT NULL)),
    CONSTRAINT tasks_error CHECK (status <> 'failed' OR error IS NOT NULL),
    CONSTRAINT tasks_attempts CHECK (attempts >= 0)
);
CREATE INDEX tasks_owner_created ON tasks (owner_id, created_at DESC, id DESC);

-- The attempt journal. An attempt is committed as 'sent' before the provider
-- is called, so a worker that finds a 'sent' attempt knows an earlier call may
-- already have run (ambiguous) and must not silently repeat it.
CREATE TABLE task_attempts (
    task_id         uuid NOT NULL REFERENCES tasks (id),
    attempt         integer NOT NULL,
    state           text NOT NULL DEFAULT 'sent',
    provider_key    text NOT NULL,
    idempotency_key text NOT NULL,
    class           text,
    provider_status integer,
    error_code      text,
    started_at      timestamptz NOT NULL DEFAULT now(),
    finished_at     timestamptz,
    PRIMARY KEY (task_id, attempt),
    CONSTRAINT task_attempts_attempt CHECK (attempt >= 1),
    CONSTRAINT task_attempts_state CHECK (state IN ('sent', 'succeeded', 'failed', 'ambiguous'))
);

-- What support replays: one record per attempt, written in the transaction
-- that finishes the attempt. Served from here only, never by calling a model.
CREATE TABLE replay_records (
    task_id         uuid NOT NULL REFERENCES tasks (id),
    attempt         integer NOT NULL,
    owner_id        text NOT NULL REFERENCES owners (id),
    state           text NOT NULL,
    provider        text NOT NULL,
    provider_model  text NOT NULL,
    parameters      jsonb NOT NULL,
    timeout_ms      integer NOT NULL,
    response        jsonb,
    error           jsonb,
    started_at      timestamptz NOT NULL,
    finished_at     timestamptz,
    latency_ms      integer,
    trace_id        text NOT NULL DEFAULT '',
    build_version   text NOT NULL DEFAULT '',
    PRIMARY KEY (task_id, attempt),
    CONSTRAINT replay_records_state CHECK (state IN ('sent', 'succeeded', 'failed', 'ambiguous'))
);

-- Every replay read is audited: who read which owner's record, and why.
CREATE TABLE replay_audit (
    id           bigserial PRIMARY KEY,
    task_id      uuid NOT NULL,
    owner_id     text NOT NULL,
    actor_owner  text NOT NULL,
    actor_key_id uuid NOT NULL,
    actor_role   text NOT NULL,
    reason       text NOT NULL DEFAULT '',
    accessed_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX replay_audit_task ON replay_audit (task_id);
