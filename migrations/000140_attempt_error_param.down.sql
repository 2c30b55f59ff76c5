ALTER TABLE task_attempts DROP COLUMN IF EXISTS error_param;
