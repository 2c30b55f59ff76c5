-- A task's finish can be a HOT update (heap-only tuple: no new index entry
-- anywhere). PostgreSQL allows one only when no column that an index keys
-- on, computes from or filters on changes, and when the new version fits
-- on the row's page. Before this migration every finish changed `status`
-- and `finished_at`, both in partial-index predicates, so each finish added
-- an entry to all of the table's indexes, the request words' GIN index
-- included (measured back to back: no HOT finish before; after, 95-100 % of
-- the task updates HOT at 100-200 tasks/s and about half past 300/s, the
-- finishing UPDATE 0.29-0.46 ms -> 0.12-0.30 ms a call, WAL per task
-- 8.1 -> 7.0 KiB; docs/BENCHMARKS.md).

-- Failed and canceled tasks, for support searches by status, are marked by
-- a column that a succeeded finish leaves NULL, so it does not change. A
-- trigger keeps it, not each writer: instances of the previous release,
-- which do not know the column, go on finishing tasks during a rolling
-- deploy, and so do hand edits.
ALTER TABLE tasks ADD COLUMN ended_unsucceeded text;
CREATE FUNCTION tollgate_task_ended() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.ended_unsucceeded := CASE WHEN NEW.status IN ('failed', 'canceled') THEN NEW.status END;
    RETURN NEW;
END
$$;
CREATE TRIGGER tasks_ended_unsucceeded BEFORE INSERT OR UPDATE OF status ON tasks
    FOR EACH ROW EXECUTE FUNCTION tollgate_task_ended();
UPDATE tasks SET ended_unsucceeded = status WHERE status IN ('failed', 'canceled');
CREATE INDEX tasks_unsucceeded_created ON tasks (ended_unsucceeded, created_at DESC, id DESC)
    WHERE ended_unsucceeded IS NOT NULL;
DROP INDEX tasks_failed_created;
DROP INDEX tasks_canceled_created;

-- Unfinished tasks are those whose reservation is held: a task reserves in
-- its admission's transaction and settles or releases in its finishing
-- one (the reaper closes any other, as an alarm). Their reservation rows
-- change state at the finish anyway, so the index costs nothing more there.
CREATE INDEX budget_reservations_held_created ON budget_reservations (created_at, task_id) WHERE state = 'held';
DROP INDEX tasks_unfinished;

-- Room on each page for the finished versions of its tasks (a finish adds
-- the result and the sealed output); older pages keep their fill until
-- rewritten.
ALTER TABLE tasks SET (fillfactor = 75);
