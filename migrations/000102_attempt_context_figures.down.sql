ALTER TABLE task_attempts
    DROP COLUMN IF EXISTS context_window,
    DROP COLUMN IF EXISTS context_tokens;
