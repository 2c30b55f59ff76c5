-- Keys made over HTTP carry what the team that runs them needs: a name,
-- an expiry (an expired key is refused as a revoked one is), when the key
-- last authenticated (to the minute), and who created and who revoked it
-- (the CLI and the API write the same columns: one audit trail).
ALTER TABLE api_keys
    ADD COLUMN name text NOT NULL DEFAULT '',
    ADD COLUMN expires_at timestamptz,
    ADD COLUMN last_used_at timestamptz,
    ADD COLUMN created_by text NOT NULL DEFAULT '',
    ADD COLUMN revoked_by text,
    ADD CONSTRAINT api_keys_name CHECK (length(name) <= 200),
    ADD CONSTRAINT api_keys_actor CHECK (length(created_by) <= 300 AND length(COALESCE(revoked_by, '')) <= 300);
