-- Usage reports group settled rows by owner, workload, model and UTC day or
-- month. Without statistics on those together (and on the day and month
-- expressions, which plain column statistics do not cover) the planner
-- takes every row for its own group, so it sorts the whole window, on disk
-- past work_mem, instead of hashing a few thousand groups in parallel.
-- The expressions must match budget/usage.go (utcDay, utcMonth) exactly.
CREATE STATISTICS usage_records_groups (ndistinct) ON
    owner_id, workload, model,
    (date_trunc('day', settled_at AT TIME ZONE 'UTC') AT TIME ZONE 'UTC'),
    (date_trunc('month', settled_at AT TIME ZONE 'UTC') AT TIME ZONE 'UTC')
FROM usage_records;
