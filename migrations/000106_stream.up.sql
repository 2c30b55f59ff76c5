-- Streamed attempts record what their client received.
ALTER TABLE replay_records ADD COLUMN stream jsonb;
