ALTER TABLE usage_records
    DROP CONSTRAINT usage_records_classes,
    DROP COLUMN cached_input_tokens,
    DROP COLUMN cache_write_tokens,
    DROP COLUMN reasoning_tokens;
