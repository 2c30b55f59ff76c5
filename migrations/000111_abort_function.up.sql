-- tollgate_abort raises an error with SQLSTATE code. A statement that finds
-- it must not take effect (a budget that cannot cover a reservation) calls
-- it to abort its transaction from inside SQL: the statements pipelined
-- behind it, COMMIT included, are then skipped (internal/pipetx). It
-- returns bigint only so that it can stand in a CASE beside a count; it
-- never returns. Codes are Tollgate's own class TG, mapped to domain errors
-- by the package that owns the statement (budget: TG402).
CREATE FUNCTION tollgate_abort(code text, message text) RETURNS bigint
    LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    RAISE EXCEPTION USING ERRCODE = code, MESSAGE = message;
END;
$$;
