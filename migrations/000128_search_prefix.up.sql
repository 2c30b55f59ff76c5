-- Support's word search indexes a bounded prefix of the stored request: its
-- first 65,536 characters as JSON text. to_tsvector refuses a document
-- whose lexemes and positions pass 1 MiB ("string is too long for
-- tsvector"), and a request the body limit admits can get there (840 KB of
-- distinct numbers, 2.4 bytes of tsvector per character; hyphenated CJK
-- words reach about 8), which failed the task's INSERT. Within 65,536
-- characters the worst case found stays under half the limit, so no stored
-- request can fail on its index, and the index's work per row is bounded.
-- tasks.searchSQL uses the same expression; README "Replay records for
-- support" documents the bound. Rebuilding the index takes a lock on
-- writes to tasks for as long as it takes to build.
DROP INDEX tasks_request_text;
CREATE INDEX tasks_request_text ON tasks USING gin (to_tsvector('simple', left(request::text, 65536)));
