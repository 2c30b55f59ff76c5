-- A River-run attempt is journalled once, when its outcome is recorded,
-- instead of "sent" before the call and updated after it: one write
-- transaction per task fewer. What the "sent" row proved (a run may have
-- called the provider and died) is read off River's own job row instead:
-- every run that ends without recording its outcome leaves an entry in
-- river_job.errors (the worker's error, a timeout, or the rescuer's "stuck
-- job"), and a recorded attempt whose run went on to fail the job names that
-- run here. An entry no attempt names is a run that may have called.
ALTER TABLE task_attempts ADD COLUMN river_error_attempt integer;
COMMENT ON COLUMN task_attempts.river_error_attempt IS
    'River attempt number of the run that recorded this attempt and then returned its error to River (a retry); NULL otherwise';

-- The task's current River job: "running" is read off it (the worker no
-- longer writes it), and a cancel locks it to know whether a call may be in
-- flight.
ALTER TABLE tasks ADD COLUMN job_id bigint;
