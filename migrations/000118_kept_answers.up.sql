-- A provider's answer whose recording transaction failed (a constraint, an
-- overflow, a lost connection): kept here, sealed, by a write of its own,
-- so that the next run of the task records it instead of calling the
-- provider again (tasks/kept.go). A row lives only until its answer is
-- recorded, or its task is found finished.
CREATE TABLE task_kept_answers (
    task_id       uuid NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
    -- The attempt number the run called with (the provider's
    -- Idempotency-Key is task_id:attempt); the key of a retried write.
    attempt       integer NOT NULL,
    -- The River run that made the call; its entry in river_job.errors is
    -- this answer, not an interrupted call. NULL for an inline run.
    river_attempt integer,
    -- The attempt's journal entry was committed "sent" before the call
    -- (inline runs): recording the answer completes that entry.
    sent          boolean NOT NULL,
    model         text NOT NULL,
    started_at    timestamptz NOT NULL,
    latency       interval NOT NULL,
    -- The answer (content, finish reason, reported model and usage, stream
    -- delivery) as JSON, sealed with the task's data key and bound to the
    -- task id; never stored in clear.
    answer_sealed bytea NOT NULL,
    kept_at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (task_id, attempt),
    CONSTRAINT task_kept_answers_attempt CHECK (attempt >= 1)
);
COMMENT ON TABLE task_kept_answers IS
    'Provider answers whose recording failed, sealed, waiting for a run of the task to record them without calling again';
