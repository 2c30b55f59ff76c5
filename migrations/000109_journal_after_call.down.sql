ALTER TABLE tasks DROP COLUMN job_id;
ALTER TABLE task_attempts DROP COLUMN river_error_attempt;
