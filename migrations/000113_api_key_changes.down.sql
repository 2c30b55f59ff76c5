DROP TRIGGER IF EXISTS api_keys_changed ON api_keys;
DROP FUNCTION IF EXISTS tollgate_api_key_changed();
