ALTER TABLE task_attempts
    DROP COLUMN IF EXISTS error_param,
    DROP COLUMN IF EXISTS error_retry_at;
