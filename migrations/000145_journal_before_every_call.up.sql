-- Every run, River's or inline, commits its attempt's journal entry as
-- "sent" before calling the provider, and the outcome's recording updates
-- that entry; a run that finds an entry still "sent" counts the call as
-- ambiguous. Nothing is read from River's job rows to tell whether a call
-- was made, nor from the columns that tied attempts and kept answers to
-- River's runs.
--
-- A kept answer completes the entry of its attempt number. One kept by a
-- run that journalled its call only with its outcome (sent = false) gets
-- that entry here, so that the next run records it as any other.
INSERT INTO task_attempts (task_id, attempt, provider_key, model, idempotency_key, started_at)
SELECT k.task_id, k.attempt, COALESCE(substring(j.queue FROM '^provider_(.*)$'), ''), k.model,
       k.task_id::text || ':' || k.attempt, k.started_at
FROM task_kept_answers k
JOIN tasks t ON t.id = k.task_id
LEFT JOIN river_job j ON j.id = t.job_id
WHERE NOT k.sent
ON CONFLICT (task_id, attempt) DO NOTHING;

UPDATE tasks t SET attempts = k.attempt
FROM (SELECT task_id, max(attempt) AS attempt FROM task_kept_answers WHERE NOT sent GROUP BY task_id) k
WHERE t.id = k.task_id AND t.attempts < k.attempt;

-- The columns stay one release (deploy/README.md, "Migrations: once per
-- release"): instances of the previous release still write them while the
-- next one takes over. This release neither reads nor writes them; a kept
-- answer's call always has its "sent" entry, which the default says for an
-- insert that no longer names the column. A later migration drops them.
ALTER TABLE task_kept_answers ALTER COLUMN sent SET DEFAULT true;
