-- Support finds records by owner, time, model, status, or by words of the
-- (redacted) request; reruns link to the task they repeat.
CREATE INDEX tasks_created ON tasks (created_at DESC, id DESC);
CREATE INDEX tasks_model_created ON tasks (model, created_at DESC);
CREATE INDEX tasks_request_text ON tasks USING gin (to_tsvector('simple', request::text));
ALTER TABLE tasks ADD COLUMN rerun_of uuid REFERENCES tasks (id);
CREATE INDEX replay_audit_accessed ON replay_audit (accessed_at DESC, id DESC);
