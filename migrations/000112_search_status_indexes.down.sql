DROP INDEX IF EXISTS tasks_canceled_created;
DROP INDEX IF EXISTS tasks_failed_created;
