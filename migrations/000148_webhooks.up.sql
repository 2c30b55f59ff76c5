-- Signed webhooks (package webhooks). One endpoint per owner; its secret
-- is stored sealed (seal.Sealer, bound to the owner), and after a rotation
-- the previous secret is kept, sealed, until previous_until, for
-- deliveries to be signed with both.
CREATE TABLE webhook_endpoints (
    owner_id        text PRIMARY KEY,
    url             text NOT NULL CHECK (length(url) <= 2048),
    events          text[] NOT NULL,
    secret_sealed   bytea NOT NULL,
    previous_sealed bytea,
    previous_until  timestamptz,
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now()
);

-- The outbox: one row per task end an endpoint asked for, written in the
-- transaction that finishes the task, with the River job that delivers
-- it. A task ends once, so (task_id, type) is unique: a repeated finish
-- writes no second event. The row records the delivery's progress for
-- GET /v1/owners/{owner}/webhook/deliveries.
CREATE TABLE webhook_events (
    id              uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    owner_id        text NOT NULL,
    task_id         uuid NOT NULL,
    type            text NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    state           text NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'delivered', 'failed', 'dropped')),
    tries           integer NOT NULL DEFAULT 0,
    last_status     integer,
    last_error      text,
    last_try_at     timestamptz,
    next_try_at     timestamptz,
    UNIQUE (task_id, type)
);
CREATE INDEX webhook_events_owner ON webhook_events (owner_id, created_at DESC, id DESC);
-- Retention (webhooks.PurgeEvents) deletes ended events by age.
CREATE INDEX webhook_events_ended ON webhook_events (created_at) WHERE state <> 'pending';
