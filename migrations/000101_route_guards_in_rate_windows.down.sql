-- The guards' counts go back to route_limits; rate_windows keeps the
-- owners' limits only.
INSERT INTO route_limits AS l (route, owner_id, user_id, kind, window_start, count)
SELECT split_part(workload, ':', 2), owner_id, regexp_replace(workload, '^route:[^:]*:[^:]*:', ''),
       split_part(workload, ':', 3), window_start, LEAST(requests, 2147483647)::integer
FROM rate_windows
WHERE workload LIKE 'route:%'
ON CONFLICT (route, owner_id, user_id, kind, window_start) DO UPDATE SET count = GREATEST(l.count, EXCLUDED.count);
DELETE FROM rate_windows WHERE workload LIKE 'route:%';
ALTER TABLE rate_windows DROP COLUMN span;
