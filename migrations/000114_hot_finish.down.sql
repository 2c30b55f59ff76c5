ALTER TABLE tasks RESET (fillfactor);
CREATE INDEX IF NOT EXISTS tasks_unfinished ON tasks (created_at, id) WHERE finished_at IS NULL;
DROP INDEX IF EXISTS budget_reservations_held_created;
CREATE INDEX IF NOT EXISTS tasks_failed_created ON tasks (created_at DESC, id DESC) WHERE status = 'failed';
CREATE INDEX IF NOT EXISTS tasks_canceled_created ON tasks (created_at DESC, id DESC) WHERE status = 'canceled';
DROP INDEX IF EXISTS tasks_unsucceeded_created;
DROP TRIGGER IF EXISTS tasks_ended_unsucceeded ON tasks;
DROP FUNCTION IF EXISTS tollgate_task_ended();
ALTER TABLE tasks DROP COLUMN IF EXISTS ended_unsucceeded;
