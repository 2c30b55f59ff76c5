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

-- Every settlement path writes exactly one usage record per task in the
-- transaction that settles it; this trigger corrects the task's window
-- there, by actual minus estimate, never below zero, once.
CREATE FUNCTION tollgate_rate_settled() RETURNS trigger
    LANGUAGE plpgsql AS $$
BEGIN
    WITH c AS (
        DELETE FROM rate_charges WHERE task_id = NEW.task_id RETURNING *
    )
    UPDATE rate_windows w
    SET tokens = GREATEST(0, w.tokens + NEW.input_tokens + NEW.output_tokens - c.tokens)
    FROM c
    WHERE w.owner_id = c.owner_id AND w.window_start = c.window_start AND w.workload IN ('', c.workload);
    RETURN NULL;
END;
$$;

CREATE TRIGGER usage_records_rate_settled AFTER INSERT ON usage_records
    FOR EACH ROW EXECUTE FUNCTION tollgate_rate_settled();
