-- A reservation released (the task charged nothing: cancelled, refused or
-- failed before a call) writes no usage record, so the usage trigger never
-- corrects its windows: its estimate would stay counted for the minute.
-- Releasing it returns the estimate, as a settlement of zero tokens would.
CREATE FUNCTION tollgate_rate_released() RETURNS trigger
    LANGUAGE plpgsql AS $$
BEGIN
    WITH c AS (
        DELETE FROM rate_charges WHERE task_id = NEW.task_id RETURNING *
    )
    INSERT INTO rate_corrections (owner_id, workload, window_start, tokens)
    SELECT c.owner_id, s.workload, c.window_start, -c.tokens
    FROM c, LATERAL (SELECT '' UNION SELECT c.workload) AS s (workload)
    WHERE c.tokens <> 0;
    RETURN NULL;
END;
$$;

CREATE TRIGGER budget_reservations_rate_released AFTER UPDATE OF state ON budget_reservations
    FOR EACH ROW WHEN (NEW.state = 'released' AND OLD.state = 'held')
    EXECUTE FUNCTION tollgate_rate_released();
