-- A provider's usage report beyond any sane bound (budget.MaxUsageTokens per
-- figure) is treated as a lie: the charge is capped at the reservation, the
-- rest recorded as shortfall, and the attempt flagged here with the figures
-- as reported, so that an operator sees which call and what it claimed.
ALTER TABLE task_attempts
    ADD COLUMN usage_implausible boolean NOT NULL DEFAULT false,
    ADD COLUMN reported_input_tokens bigint,
    ADD COLUMN reported_output_tokens bigint;
CREATE INDEX task_attempts_usage_implausible ON task_attempts (task_id) WHERE usage_implausible;
