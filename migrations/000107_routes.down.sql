DROP TABLE route_answers;
DROP TABLE route_limits;
ALTER TABLE tasks DROP COLUMN call_timeout_ms, DROP COLUMN max_attempts, DROP COLUMN prompt_version, DROP COLUMN route;
