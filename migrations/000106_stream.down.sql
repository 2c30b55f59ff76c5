ALTER TABLE replay_records DROP COLUMN stream;
