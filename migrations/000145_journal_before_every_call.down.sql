-- Every kept answer's call has its entry journalled "sent": the columns
-- come back as the earlier schema had them, each kept answer marked so.
ALTER TABLE task_kept_answers
    ADD COLUMN river_attempt integer,
    ADD COLUMN sent boolean NOT NULL DEFAULT true;
ALTER TABLE task_kept_answers ALTER COLUMN sent DROP DEFAULT;

ALTER TABLE task_attempts ADD COLUMN river_error_attempt integer;
COMMENT ON COLUMN task_attempts.river_error_attempt IS
    'River attempt number of the run that recorded this attempt and then returned its error to River (a retry); NULL otherwise';
