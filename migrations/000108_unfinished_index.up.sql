-- The oldest waiting tasks (status, metrics) in one index lookup.
CREATE INDEX tasks_unfinished ON tasks (created_at, id) WHERE finished_at IS NULL;
