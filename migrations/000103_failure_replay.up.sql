-- Finds an owner's failed tasks of one request, for the failure replay
-- window (tasks/retrywindow.go). Partial on ended_unsucceeded, which a
-- succeeded finish leaves NULL: an index naming status or finished_at
-- would cost every succeeded finish its heap-only update. Built
-- concurrently, alone in its file (no transaction), so that tasks keep
-- being admitted and finished while it builds; should the build fail, drop
-- the invalid index left behind before migrating again.
CREATE INDEX CONCURRENTLY IF NOT EXISTS tasks_failed_requests ON public.tasks USING btree (owner_id, request_hash)
    WHERE (ended_unsucceeded = 'failed'::text);
