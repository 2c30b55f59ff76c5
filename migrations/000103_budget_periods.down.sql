CREATE TABLE budgets (
    owner_id        text PRIMARY KEY REFERENCES owners (id),
    total_micros    bigint NOT NULL,
    reserved_micros bigint NOT NULL DEFAULT 0,
    spent_micros    bigint NOT NULL DEFAULT 0,
    updated_at      timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT budgets_amounts CHECK (
        total_micros >= 0 AND reserved_micros >= 0 AND spent_micros >= 0
        AND reserved_micros + spent_micros <= total_micros
    )
);
INSERT INTO budgets (owner_id, total_micros, reserved_micros, spent_micros)
SELECT owner_id, sum(total_micros), sum(reserved_micros), sum(spent_micros)
FROM budget_periods WHERE workload = '' GROUP BY owner_id;
ALTER TABLE usage_records DROP COLUMN workload;
ALTER TABLE budget_ledger DISABLE TRIGGER budget_ledger_append_only;
DELETE FROM budget_ledger WHERE kind IN ('adjust', 'topup') OR workload <> '';
UPDATE budget_ledger SET kind = 'spend' WHERE kind = 'settle';
ALTER TABLE budget_ledger ENABLE TRIGGER budget_ledger_append_only;
DROP INDEX budget_ledger_period;
ALTER TABLE budget_ledger DROP CONSTRAINT budget_ledger_kind;
ALTER TABLE budget_ledger DROP CONSTRAINT budget_ledger_amount;
ALTER TABLE budget_ledger DROP COLUMN budget_period_id, DROP COLUMN workload, DROP COLUMN usage_source,
    DROP COLUMN model, DROP COLUMN input_tokens, DROP COLUMN output_tokens, DROP COLUMN actor, DROP COLUMN note;
ALTER TABLE budget_ledger ADD CONSTRAINT budget_ledger_kind CHECK (kind IN ('reserve', 'release', 'spend'));
ALTER TABLE budget_ledger ADD CONSTRAINT budget_ledger_amount CHECK (amount_micros >= 0);
ALTER TABLE budget_reservations DROP COLUMN budget_period_ids;
DROP TABLE budget_alerts;
DROP TABLE budget_periods;
DROP TABLE budget_limits;
ALTER TABLE tasks DROP COLUMN cancel_requested;
ALTER TABLE tasks DROP COLUMN workload;
ALTER TABLE api_keys DROP CONSTRAINT api_keys_workload;
ALTER TABLE api_keys DROP COLUMN workload;
