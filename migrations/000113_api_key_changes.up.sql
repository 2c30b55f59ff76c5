-- Every change to an API key (revoked, or its row edited or deleted by
-- hand) is announced on tollgate_api_key_changed with the key's id, once
-- its transaction commits: each instance caches authenticated keys and
-- drops a key from its cache when it hears of it (accounts.Store.CacheKeys).
-- A trigger rather than the application's own NOTIFY, so that no path that
-- changes a key, psql included, leaves a revoked key answering.
CREATE FUNCTION tollgate_api_key_changed() RETURNS trigger
    LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('tollgate_api_key_changed', OLD.id::text);
    RETURN NULL;
END;
$$;

CREATE TRIGGER api_keys_changed AFTER UPDATE OR DELETE ON api_keys
    FOR EACH ROW EXECUTE FUNCTION tollgate_api_key_changed();
