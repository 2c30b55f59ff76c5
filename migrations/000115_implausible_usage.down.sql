DROP INDEX IF EXISTS task_attempts_usage_implausible;
ALTER TABLE task_attempts
    DROP COLUMN IF EXISTS usage_implausible,
    DROP COLUMN IF EXISTS reported_input_tokens,
    DROP COLUMN IF EXISTS reported_output_tokens;
