-- Budgets with workloads and periods.
--
-- budget_limits is what an admin configured: a cap per owner (workload '')
-- and optionally per workload (a named group of API keys), with a period.
-- budget_periods holds the balances, one row per budget and period, keyed
-- by the period's start: a new day or month simply finds no row and opens
-- one from the limit, so no job has to race requests at midnight.

ALTER TABLE api_keys ADD COLUMN workload text NOT NULL DEFAULT '';
ALTER TABLE api_keys ADD CONSTRAINT api_keys_workload CHECK (workload ~ '^([A-Za-z0-9][A-Za-z0-9._-]{0,63})?$');

ALTER TABLE tasks ADD COLUMN workload text NOT NULL DEFAULT '';
ALTER TABLE tasks ADD COLUMN cancel_requested boolean NOT NULL DEFAULT false;

CREATE TABLE budget_limits (
    owner_id     text NOT NULL REFERENCES owners (id),
    workload     text NOT NULL DEFAULT '',
    period       text NOT NULL DEFAULT 'none',
    total_micros bigint NOT NULL,
    updated_at   timestamptz NOT NULL DEFAULT now(),
    updated_by   text NOT NULL DEFAULT '',
    PRIMARY KEY (owner_id, workload),
    CONSTRAINT budget_limits_period CHECK (period IN ('none', 'daily', 'monthly')),
    CONSTRAINT budget_limits_total CHECK (total_micros >= 0)
);

CREATE TABLE budget_periods (
    id              bigserial PRIMARY KEY,
    owner_id        text NOT NULL REFERENCES owners (id),
    workload        text NOT NULL DEFAULT '',
    period          text NOT NULL,
    period_start    timestamptz NOT NULL,
    period_end      timestamptz,
    total_micros    bigint NOT NULL,
    reserved_micros bigint NOT NULL DEFAULT 0,
    spent_micros    bigint NOT NULL DEFAULT 0,
    updated_at      timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT budget_periods_key UNIQUE (owner_id, workload, period_start),
    CONSTRAINT budget_periods_amounts CHECK (
        total_micros >= 0 AND reserved_micros >= 0 AND spent_micros >= 0
        AND reserved_micros + spent_micros <= total_micros
    )
);

-- Alerts fire once per threshold per budget period: the unique key is the
-- "once".
CREATE TABLE budget_alerts (
    budget_period_id bigint NOT NULL REFERENCES budget_periods (id),
    threshold_pct    integer NOT NULL,
    fired_at         timestamptz NOT NULL DEFAULT now(),
    delivered_at     timestamptz,
    attempts         integer NOT NULL DEFAULT 0,
    PRIMARY KEY (budget_period_id, threshold_pct)
);

-- Carry existing budgets over as period-less owner budgets.
INSERT INTO budget_limits (owner_id, workload, period, total_micros)
SELECT owner_id, '', 'none', total_micros FROM budgets;
INSERT INTO budget_periods (owner_id, workload, period, period_start, total_micros, reserved_micros, spent_micros)
SELECT owner_id, '', 'none', 'epoch', total_micros, reserved_micros, spent_micros FROM budgets;

-- Reservations now name the balance rows they hold.
ALTER TABLE budget_reservations ADD COLUMN budget_period_ids bigint[] NOT NULL DEFAULT '{}';
UPDATE budget_reservations r SET budget_period_ids = ARRAY[p.id]
FROM budget_periods p WHERE p.owner_id = r.owner_id AND p.workload = '';

-- The ledger gains the balance row, workload, usage detail and who acted.
-- kinds: reserve, release, settle (money moved to spent), adjust (a total
-- set or changed; signed), topup (money added to a period's total).
ALTER TABLE budget_ledger DROP CONSTRAINT budget_ledger_kind;
ALTER TABLE budget_ledger DROP CONSTRAINT budget_ledger_amount;
ALTER TABLE budget_ledger DISABLE TRIGGER budget_ledger_append_only;
ALTER TABLE budget_ledger ADD COLUMN budget_period_id bigint REFERENCES budget_periods (id);
ALTER TABLE budget_ledger ADD COLUMN workload text NOT NULL DEFAULT '';
ALTER TABLE budget_ledger ADD COLUMN usage_source text;
ALTER TABLE budget_ledger ADD COLUMN model text;
ALTER TABLE budget_ledger ADD COLUMN input_tokens bigint;
ALTER TABLE budget_ledger ADD COLUMN output_tokens bigint;
ALTER TABLE budget_ledger ADD COLUMN actor text NOT NULL DEFAULT 'system';
ALTER TABLE budget_ledger ADD COLUMN note text NOT NULL DEFAULT '';
UPDATE budget_ledger SET kind = 'settle' WHERE kind = 'spend';
UPDATE budget_ledger l SET budget_period_id = p.id
FROM budget_periods p WHERE p.owner_id = l.owner_id AND p.workload = '';
INSERT INTO budget_ledger (owner_id, budget_period_id, kind, amount_micros, note)
SELECT owner_id, id, 'adjust', total_micros, 'carried over' FROM budget_periods;
ALTER TABLE budget_ledger ENABLE TRIGGER budget_ledger_append_only;
ALTER TABLE budget_ledger ALTER COLUMN budget_period_id SET NOT NULL;
ALTER TABLE budget_ledger ADD CONSTRAINT budget_ledger_kind
    CHECK (kind IN ('reserve', 'release', 'settle', 'adjust', 'topup'));
ALTER TABLE budget_ledger ADD CONSTRAINT budget_ledger_amount
    CHECK (kind = 'adjust' OR amount_micros >= 0);
CREATE INDEX budget_ledger_period ON budget_ledger (budget_period_id);

ALTER TABLE usage_records ADD COLUMN workload text NOT NULL DEFAULT '';

DROP TABLE budgets;
