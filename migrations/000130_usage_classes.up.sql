-- Usage by class: the parts of a settled task's input read from and
-- written to the provider's prompt cache, and the part of its output spent
-- reasoning, each priced apart (budget.Price.CostOf). The classes are parts
-- of the totals, never more: the check compares by subtraction, which
-- cannot overflow a bigint for non-negative figures.
ALTER TABLE usage_records
    ADD COLUMN cached_input_tokens bigint NOT NULL DEFAULT 0,
    ADD COLUMN cache_write_tokens bigint NOT NULL DEFAULT 0,
    ADD COLUMN reasoning_tokens bigint NOT NULL DEFAULT 0;
-- Added NOT VALID, then validated: the scan of existing rows holds only a
-- lock that lets settlements go on.
ALTER TABLE usage_records ADD CONSTRAINT usage_records_classes CHECK (
    cached_input_tokens >= 0 AND cache_write_tokens >= 0 AND reasoning_tokens >= 0
    AND cached_input_tokens <= input_tokens - cache_write_tokens
    AND reasoning_tokens <= output_tokens
) NOT VALID;
ALTER TABLE usage_records VALIDATE CONSTRAINT usage_records_classes;
