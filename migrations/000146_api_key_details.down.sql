DROP TRIGGER api_keys_updated ON api_keys;
DROP TRIGGER api_keys_changed ON api_keys;
CREATE TRIGGER api_keys_changed AFTER UPDATE OR DELETE ON api_keys
    FOR EACH ROW EXECUTE FUNCTION tollgate_api_key_changed();
ALTER TABLE api_keys
    DROP CONSTRAINT api_keys_actor,
    DROP CONSTRAINT api_keys_name,
    DROP COLUMN revoked_by,
    DROP COLUMN created_by,
    DROP COLUMN last_used_at,
    DROP COLUMN expires_at,
    DROP COLUMN name;
