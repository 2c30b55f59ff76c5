DROP INDEX replay_audit_accessed;
ALTER TABLE tasks DROP COLUMN rerun_of;
DROP INDEX tasks_request_text;
DROP INDEX tasks_model_created;
DROP INDEX tasks_created;
