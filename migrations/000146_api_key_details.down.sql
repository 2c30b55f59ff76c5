ALTER TABLE api_keys
    DROP CONSTRAINT api_keys_actor,
    DROP CONSTRAINT api_keys_name,
    DROP COLUMN revoked_by,
    DROP COLUMN created_by,
    DROP COLUMN last_used_at,
    DROP COLUMN expires_at,
    DROP COLUMN name;
