ALTER TABLE task_attempts DROP COLUMN model;
