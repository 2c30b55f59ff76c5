DELETE FROM usage_records WHERE source = 'possibly_charged';
ALTER TABLE usage_records DROP CONSTRAINT usage_records_source;
ALTER TABLE usage_records ADD CONSTRAINT usage_records_source CHECK (source IN ('reported', 'estimated'));
ALTER TABLE tasks DROP COLUMN deadline_at;
DROP TABLE provider_keys;
