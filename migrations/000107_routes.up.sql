-- Routes: named, versioned prompts answered synchronously.
ALTER TABLE tasks ADD COLUMN route text;
ALTER TABLE tasks ADD COLUMN prompt_version text;
ALTER TABLE tasks ADD COLUMN max_attempts integer;
ALTER TABLE tasks ADD COLUMN call_timeout_ms integer;

-- Per-user route guards: requests per window and calls per UTC day, keyed
-- by the window's start so that a new window starts clean.
CREATE TABLE route_limits (
    route        text NOT NULL,
    owner_id     text NOT NULL,
    user_id      text NOT NULL,
    kind         text NOT NULL,
    window_start timestamptz NOT NULL,
    count        integer NOT NULL DEFAULT 0,
    PRIMARY KEY (route, owner_id, user_id, kind, window_start),
    CONSTRAINT route_limits_kind CHECK (kind IN ('window', 'day'))
);

-- The last good answer per route and input, for useful fallbacks: the task
-- that produced it (whose output is sealed), never the text itself.
-- Bounded per route by pruning the oldest.
CREATE TABLE route_answers (
    route      text NOT NULL,
    owner_id   text NOT NULL,
    input_hash bytea NOT NULL,
    task_id    uuid NOT NULL REFERENCES tasks (id),
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (route, owner_id, input_hash)
);
CREATE INDEX route_answers_age ON route_answers (route, created_at);
