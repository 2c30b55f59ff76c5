-- Rate limits: requests and tokens per minute, per owner ('' workload) and
-- per workload of an owner. NULL is unlimited.
CREATE TABLE rate_limits (
    owner_id            text NOT NULL REFERENCES owners (id) ON DELETE CASCADE,
    workload            text NOT NULL DEFAULT '',
    requests_per_minute bigint,
    tokens_per_minute   bigint,
    updated_at          timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (owner_id, workload),
    CONSTRAINT rate_limits_values CHECK (requests_per_minute >= 0 AND tokens_per_minute >= 0)
);

-- One counter row per limited scope and minute. Admission increments it in
-- its own transaction (ON CONFLICT DO UPDATE): the row lock orders the
-- admissions of every instance, so the count is exact.
CREATE TABLE rate_windows (
    owner_id     text NOT NULL,
    workload     text NOT NULL,
    window_start timestamptz NOT NULL,
    requests     bigint NOT NULL DEFAULT 0,
    tokens       bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (owner_id, workload, window_start)
);

-- The tokens an admission counted on its window, from the reservation's
-- estimate: settlement replaces them with the usage it records.
CREATE TABLE rate_charges (
    task_id      uuid PRIMARY KEY,
    owner_id     text NOT NULL,
    workload     text NOT NULL,
    window_start timestamptz NOT NULL,
    tokens       bigint NOT NULL
);

-- Corrections a settlement owes a window's token count: actual minus
-- estimate. The next admission on the window folds them into the count,
-- under the window's row lock it takes anyway. Settlement only inserts
-- here: it never waits for a window's lock, which an admission holds while
-- it waits for the owner's budget rows that a settlement holds.
CREATE TABLE rate_corrections (
    owner_id     text NOT NULL,
    workload     text NOT NULL,
    window_start timestamptz NOT NULL,
    tokens       bigint NOT NULL
);
CREATE INDEX rate_corrections_window ON rate_corrections (owner_id, window_start, workload);

-- Every settlement path writes exactly one usage record per task in the
-- transaction that settles it; this trigger records there, once, the
-- correction of the task's windows (its owner's and its workload's).
CREATE FUNCTION tollgate_rate_settled() RETURNS trigger
    LANGUAGE plpgsql AS $$
BEGIN
    WITH c AS (
        DELETE FROM rate_charges WHERE task_id = NEW.task_id RETURNING *
    )
    INSERT INTO rate_corrections (owner_id, workload, window_start, tokens)
    SELECT c.owner_id, s.workload, c.window_start,
           LEAST(GREATEST(NEW.input_tokens::numeric + NEW.output_tokens - c.tokens, -9e18), 9e18)::bigint
    FROM c, LATERAL (SELECT '' UNION SELECT c.workload) AS s (workload)
    WHERE NEW.input_tokens::numeric + NEW.output_tokens <> c.tokens;
    RETURN NULL;
END;
$$;

CREATE TRIGGER usage_records_rate_settled AFTER INSERT ON usage_records
    FOR EACH ROW EXECUTE FUNCTION tollgate_rate_settled();
