-- Provider-key gates (throttle pauses and circuit breakers), task deadlines
-- and possibly-charged settlements.

-- One row per provider key. Every instance reads it before calling the
-- provider, so a pause or an open breaker applies to the whole fleet.
--   closed: calls flow.
--   paused: throttled; no calls until paused_until.
--   open:   the account is exhausted; no calls, except one probe at a time
--           once next_probe_at has passed.
CREATE TABLE provider_keys (
    key           text PRIMARY KEY,
    state         text NOT NULL DEFAULT 'closed',
    paused_until  timestamptz,
    next_probe_at timestamptz,
    reason_class  text,
    reason_code   text,
    opened_at     timestamptz,
    updated_at    timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT provider_keys_state CHECK (state IN ('closed', 'paused', 'open')),
    CONSTRAINT provider_keys_paused CHECK (state <> 'paused' OR paused_until IS NOT NULL),
    CONSTRAINT provider_keys_open CHECK (state <> 'open' OR next_probe_at IS NOT NULL)
);

ALTER TABLE tasks ADD COLUMN deadline_at timestamptz;
UPDATE tasks SET deadline_at = created_at + interval '1 hour';
ALTER TABLE tasks ALTER COLUMN deadline_at SET NOT NULL;

ALTER TABLE usage_records DROP CONSTRAINT usage_records_source;
ALTER TABLE usage_records ADD CONSTRAINT usage_records_source
    CHECK (source IN ('reported', 'estimated', 'possibly_charged'));
