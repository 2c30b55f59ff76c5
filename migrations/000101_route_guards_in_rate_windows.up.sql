-- rate_windows counts the routes' per-user guards beside the owners'
-- limits: one counter table (package limits). A guard's window is keyed
-- 'route:<route>:<kind>:<user digest>' in workload, which no workload's
-- name can be (no ':'). span is how long a window lasts, for the purge:
-- a minute for a limit's (the default, which the v0.1.0 binary's inserts
-- get), the route's window or a day for a guard's.
ALTER TABLE rate_windows ADD COLUMN span interval NOT NULL DEFAULT interval '1 minute';

-- The guards' counts carry over. A 'window' row's length is not recorded:
-- it is kept as long as the longest a route may set (366 days).
-- route_limits stays for v0.1.0 instances during a rolling deploy.
INSERT INTO rate_windows (owner_id, workload, window_start, span, requests)
SELECT owner_id, 'route:' || route || ':' || kind || ':' || user_id, window_start,
       CASE kind WHEN 'day' THEN interval '1 day' ELSE interval '366 days' END, count
FROM route_limits
WHERE window_start > now() - interval '366 days'
ON CONFLICT (owner_id, workload, window_start) DO NOTHING;
