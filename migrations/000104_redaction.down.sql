DROP TABLE data_keys;
ALTER TABLE replay_records DROP COLUMN redactions;
DROP INDEX tasks_bodies_live;
ALTER TABLE tasks DROP COLUMN bodies_erased_reason, DROP COLUMN bodies_erased_by, DROP COLUMN bodies_erased_at,
    DROP COLUMN redaction_policy, DROP COLUMN output_sealed, DROP COLUMN payload;
ALTER TABLE owners DROP CONSTRAINT owners_retention;
ALTER TABLE owners DROP COLUMN metadata_retention_days, DROP COLUMN body_retention_days;
ALTER TABLE owners DROP CONSTRAINT owners_redaction_policy;
ALTER TABLE owners DROP COLUMN redaction_policy;
