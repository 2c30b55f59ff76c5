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

-- Noting a key's last use changes nothing a cached principal holds: only
-- the changes that do are announced (see 000113), so that the once-a-minute
-- touch does not empty every instance's cache of the key.
DROP TRIGGER api_keys_changed ON api_keys;
CREATE TRIGGER api_keys_changed AFTER DELETE ON api_keys
    FOR EACH ROW EXECUTE FUNCTION tollgate_api_key_changed();
CREATE TRIGGER api_keys_updated AFTER UPDATE ON api_keys
    FOR EACH ROW
    WHEN ((OLD.id, OLD.owner_id, OLD.role, OLD.workload, OLD.key_hash, OLD.revoked_at, OLD.expires_at)
          IS DISTINCT FROM (NEW.id, NEW.owner_id, NEW.role, NEW.workload, NEW.key_hash, NEW.revoked_at, NEW.expires_at))
    EXECUTE FUNCTION tollgate_api_key_changed();
