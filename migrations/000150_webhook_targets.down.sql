ALTER TABLE webhook_endpoints DROP COLUMN accepted_at, DROP COLUMN allow_private;
