-- Each attempt records the model it ran on: with fallbacks a task's
-- attempts may span several models and provider keys, and the attempt
-- limit counts per model.
ALTER TABLE task_attempts ADD COLUMN model text NOT NULL DEFAULT '';
UPDATE task_attempts a SET model = t.model FROM tasks t WHERE t.id = a.task_id;
ALTER TABLE task_attempts ALTER COLUMN model DROP DEFAULT;
