DROP INDEX tasks_request_text;
CREATE INDEX tasks_request_text ON tasks USING gin (to_tsvector('simple', request::text));
