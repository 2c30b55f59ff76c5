-- Redaction before storage.
--
-- Prompt and output text never reach the database in clear (unless the
-- owner opted into the "full" policy): tasks.request holds the redacted
-- request, the raw request needed to call the provider is sealed with
-- AES-256-GCM in tasks.payload, and the output the client polls for is
-- sealed in tasks.output_sealed. Retention purges the sealed and redacted
-- bodies and keeps the metadata finance needs.

ALTER TABLE owners ADD COLUMN redaction_policy text NOT NULL DEFAULT 'redact';
ALTER TABLE owners ADD CONSTRAINT owners_redaction_policy CHECK (redaction_policy IN ('redact', 'hash-only', 'full'));
ALTER TABLE owners ADD COLUMN body_retention_days integer NOT NULL DEFAULT 30;
ALTER TABLE owners ADD COLUMN metadata_retention_days integer NOT NULL DEFAULT 400;
ALTER TABLE owners ADD CONSTRAINT owners_retention CHECK (body_retention_days >= 1 AND metadata_retention_days >= body_retention_days);

ALTER TABLE tasks ADD COLUMN payload bytea;
ALTER TABLE tasks ADD COLUMN output_sealed bytea;
ALTER TABLE tasks ADD COLUMN redaction_policy text NOT NULL DEFAULT 'redact';
ALTER TABLE tasks ADD COLUMN bodies_erased_at timestamptz;
ALTER TABLE tasks ADD COLUMN bodies_erased_by text;
ALTER TABLE tasks ADD COLUMN bodies_erased_reason text;
CREATE INDEX tasks_bodies_live ON tasks (created_at) WHERE bodies_erased_at IS NULL;

ALTER TABLE replay_records ADD COLUMN redactions jsonb NOT NULL DEFAULT '{}';

-- The data key seals bodies when TOLLGATE_DATA_KEY is not set: generated
-- once, shared by every instance on this database. Setting
-- TOLLGATE_DATA_KEY keeps the key out of the database (and its dumps).
CREATE TABLE data_keys (
    id         smallint PRIMARY KEY,
    key        bytea NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT data_keys_length CHECK (length(key) = 32)
);
