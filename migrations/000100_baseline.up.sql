-- Tollgate's schema at v0.1.0, after River's migrations (000001-000008):
-- owners and keys, budgets with their periods and an append-only ledger,
-- tasks with their attempt journal and kept answers, settled usage, replay
-- records, routes, rate limits and webhooks. Later versions change it by
-- migrations numbered from 000101. Written from the migrated schema by
-- pg_dump (docs/development.md, "Migrations").
--
-- River's migrations above were applied by golang-migrate, not by River's
-- own migrator; they are recorded in river_migration so that River's
-- tooling sees them.
INSERT INTO river_migration (line, version)
SELECT 'main', v FROM generate_series(1, 8) AS v
ON CONFLICT DO NOTHING;

--

-- function budget_ledger_append_only()

CREATE FUNCTION public.budget_ledger_append_only() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    RAISE EXCEPTION 'budget_ledger is append-only';
END;
$$;

-- function tollgate_abort(text, text)

CREATE FUNCTION public.tollgate_abort(code text, message text) RETURNS bigint
    LANGUAGE plpgsql
    AS $$
BEGIN
    RAISE EXCEPTION USING ERRCODE = code, MESSAGE = message;
END;
$$;

-- function tollgate_api_key_changed()

CREATE FUNCTION public.tollgate_api_key_changed() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    PERFORM pg_notify('tollgate_api_key_changed', OLD.id::text);
    RETURN NULL;
END;
$$;

-- function tollgate_rate_released()

CREATE FUNCTION public.tollgate_rate_released() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    WITH c AS (
        DELETE FROM rate_charges WHERE task_id = NEW.task_id RETURNING *
    )
    INSERT INTO rate_corrections (owner_id, workload, window_start, tokens)
    SELECT c.owner_id, s.workload, c.window_start, -c.tokens
    FROM c, LATERAL (SELECT '' UNION SELECT c.workload) AS s (workload)
    WHERE c.tokens <> 0;
    RETURN NULL;
END;
$$;

-- function tollgate_rate_settled()

CREATE FUNCTION public.tollgate_rate_settled() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    WITH c AS (
        DELETE FROM rate_charges WHERE task_id = NEW.task_id RETURNING *
    )
    INSERT INTO rate_corrections (owner_id, workload, window_start, tokens)
    SELECT c.owner_id, s.workload, c.window_start,
           LEAST(GREATEST(NEW.input_tokens::numeric + NEW.output_tokens - c.tokens, -9e18), 9e18)::bigint
    FROM c, LATERAL (SELECT '' UNION SELECT c.workload) AS s (workload)
    WHERE NEW.input_tokens::numeric + NEW.output_tokens <> c.tokens;
    RETURN NULL;
END;
$$;

-- function tollgate_task_ended()

CREATE FUNCTION public.tollgate_task_ended() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    NEW.ended_unsucceeded := CASE WHEN NEW.status IN ('failed', 'canceled') THEN NEW.status END;
    RETURN NEW;
END
$$;

-- table api_keys

CREATE TABLE public.api_keys (
    id uuid DEFAULT gen_random_uuid() NOT NULL,
    owner_id text NOT NULL,
    role text NOT NULL,
    key_hash bytea NOT NULL,
    key_prefix text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    revoked_at timestamp with time zone,
    workload text DEFAULT ''::text NOT NULL,
    name text DEFAULT ''::text NOT NULL,
    expires_at timestamp with time zone,
    last_used_at timestamp with time zone,
    created_by text DEFAULT ''::text NOT NULL,
    revoked_by text,
    CONSTRAINT api_keys_actor CHECK (((length(created_by) <= 300) AND (length(COALESCE(revoked_by, ''::text)) <= 300))),
    CONSTRAINT api_keys_name CHECK ((length(name) <= 200)),
    CONSTRAINT api_keys_role CHECK ((role = ANY (ARRAY['client'::text, 'support'::text, 'finance'::text, 'admin'::text]))),
    CONSTRAINT api_keys_workload CHECK ((workload ~ '^([A-Za-z0-9][A-Za-z0-9._-]{0,63})?$'::text))
);

-- table budget_alerts

CREATE TABLE public.budget_alerts (
    budget_period_id bigint NOT NULL,
    threshold_pct integer NOT NULL,
    fired_at timestamp with time zone DEFAULT now() NOT NULL,
    delivered_at timestamp with time zone,
    attempts integer DEFAULT 0 NOT NULL
);

-- table budget_ledger

CREATE TABLE public.budget_ledger (
    id bigint NOT NULL,
    owner_id text NOT NULL,
    task_id uuid,
    kind text NOT NULL,
    amount_micros bigint NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    budget_period_id bigint NOT NULL,
    workload text DEFAULT ''::text NOT NULL,
    usage_source text,
    model text,
    input_tokens bigint,
    output_tokens bigint,
    actor text DEFAULT 'system'::text NOT NULL,
    note text DEFAULT ''::text NOT NULL,
    CONSTRAINT budget_ledger_amount CHECK (((kind = 'adjust'::text) OR (amount_micros >= 0))),
    CONSTRAINT budget_ledger_kind CHECK ((kind = ANY (ARRAY['reserve'::text, 'release'::text, 'settle'::text, 'adjust'::text, 'topup'::text])))
);

-- sequence budget_ledger_id_seq

CREATE SEQUENCE public.budget_ledger_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

-- sequence owned by budget_ledger_id_seq

ALTER SEQUENCE public.budget_ledger_id_seq OWNED BY public.budget_ledger.id;

-- table budget_limits

CREATE TABLE public.budget_limits (
    owner_id text NOT NULL,
    workload text DEFAULT ''::text NOT NULL,
    period text DEFAULT 'none'::text NOT NULL,
    total_micros bigint NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_by text DEFAULT ''::text NOT NULL,
    CONSTRAINT budget_limits_period CHECK ((period = ANY (ARRAY['none'::text, 'daily'::text, 'monthly'::text]))),
    CONSTRAINT budget_limits_total CHECK ((total_micros >= 0))
);

-- table budget_periods

CREATE TABLE public.budget_periods (
    id bigint NOT NULL,
    owner_id text NOT NULL,
    workload text DEFAULT ''::text NOT NULL,
    period text NOT NULL,
    period_start timestamp with time zone NOT NULL,
    period_end timestamp with time zone,
    total_micros bigint NOT NULL,
    reserved_micros bigint DEFAULT 0 NOT NULL,
    spent_micros bigint DEFAULT 0 NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT budget_periods_amounts CHECK (((total_micros >= 0) AND (reserved_micros >= 0) AND (spent_micros >= 0) AND ((reserved_micros + spent_micros) <= total_micros)))
);

-- sequence budget_periods_id_seq

CREATE SEQUENCE public.budget_periods_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

-- sequence owned by budget_periods_id_seq

ALTER SEQUENCE public.budget_periods_id_seq OWNED BY public.budget_periods.id;

-- table budget_reservations

CREATE TABLE public.budget_reservations (
    task_id uuid NOT NULL,
    owner_id text NOT NULL,
    amount_micros bigint NOT NULL,
    estimated boolean NOT NULL,
    state text DEFAULT 'held'::text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    closed_at timestamp with time zone,
    budget_period_ids bigint[] DEFAULT '{}'::bigint[] NOT NULL,
    CONSTRAINT budget_reservations_amount CHECK ((amount_micros > 0)),
    CONSTRAINT budget_reservations_closed CHECK (((state = 'held'::text) = (closed_at IS NULL))),
    CONSTRAINT budget_reservations_state CHECK ((state = ANY (ARRAY['held'::text, 'settled'::text, 'released'::text])))
);

-- table data_keys

CREATE TABLE public.data_keys (
    id smallint NOT NULL,
    key bytea NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT data_keys_length CHECK ((length(key) = 32))
);

-- table owners

CREATE TABLE public.owners (
    id text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    redaction_policy text DEFAULT 'redact'::text NOT NULL,
    body_retention_days integer DEFAULT 30 NOT NULL,
    metadata_retention_days integer DEFAULT 400 NOT NULL,
    CONSTRAINT owners_id_format CHECK ((id ~ '^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$'::text)),
    CONSTRAINT owners_redaction_policy CHECK ((redaction_policy = ANY (ARRAY['redact'::text, 'hash-only'::text, 'full'::text]))),
    CONSTRAINT owners_retention CHECK (((body_retention_days >= 1) AND (metadata_retention_days >= body_retention_days)))
);

-- table provider_keys

CREATE TABLE public.provider_keys (
    key text NOT NULL,
    state text DEFAULT 'closed'::text NOT NULL,
    paused_until timestamp with time zone,
    next_probe_at timestamp with time zone,
    reason_class text,
    reason_code text,
    opened_at timestamp with time zone,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT provider_keys_open CHECK (((state <> 'open'::text) OR (next_probe_at IS NOT NULL))),
    CONSTRAINT provider_keys_paused CHECK (((state <> 'paused'::text) OR (paused_until IS NOT NULL))),
    CONSTRAINT provider_keys_state CHECK ((state = ANY (ARRAY['closed'::text, 'paused'::text, 'open'::text])))
);

-- table rate_charges

CREATE TABLE public.rate_charges (
    task_id uuid NOT NULL,
    owner_id text NOT NULL,
    workload text NOT NULL,
    window_start timestamp with time zone NOT NULL,
    tokens bigint NOT NULL
);

-- table rate_corrections

CREATE TABLE public.rate_corrections (
    owner_id text NOT NULL,
    workload text NOT NULL,
    window_start timestamp with time zone NOT NULL,
    tokens bigint NOT NULL
);

-- table rate_limits

CREATE TABLE public.rate_limits (
    owner_id text NOT NULL,
    workload text DEFAULT ''::text NOT NULL,
    requests_per_minute bigint,
    tokens_per_minute bigint,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT rate_limits_values CHECK (((requests_per_minute >= 0) AND (tokens_per_minute >= 0)))
);

-- table rate_windows

CREATE TABLE public.rate_windows (
    owner_id text NOT NULL,
    workload text NOT NULL,
    window_start timestamp with time zone NOT NULL,
    requests bigint DEFAULT 0 NOT NULL,
    tokens bigint DEFAULT 0 NOT NULL
);

-- table replay_audit

CREATE TABLE public.replay_audit (
    id bigint NOT NULL,
    task_id uuid NOT NULL,
    owner_id text NOT NULL,
    actor_owner text NOT NULL,
    actor_key_id uuid NOT NULL,
    actor_role text NOT NULL,
    reason text DEFAULT ''::text NOT NULL,
    accessed_at timestamp with time zone DEFAULT now() NOT NULL
);

-- sequence replay_audit_id_seq

CREATE SEQUENCE public.replay_audit_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

-- sequence owned by replay_audit_id_seq

ALTER SEQUENCE public.replay_audit_id_seq OWNED BY public.replay_audit.id;

-- table replay_records

CREATE TABLE public.replay_records (
    task_id uuid NOT NULL,
    attempt integer NOT NULL,
    owner_id text NOT NULL,
    state text NOT NULL,
    provider text NOT NULL,
    provider_model text NOT NULL,
    parameters jsonb NOT NULL,
    timeout_ms integer NOT NULL,
    response jsonb,
    error jsonb,
    started_at timestamp with time zone NOT NULL,
    finished_at timestamp with time zone,
    latency_ms integer,
    trace_id text DEFAULT ''::text NOT NULL,
    build_version text DEFAULT ''::text NOT NULL,
    redactions jsonb DEFAULT '{}'::jsonb NOT NULL,
    stream jsonb,
    CONSTRAINT replay_records_state CHECK ((state = ANY (ARRAY['sent'::text, 'succeeded'::text, 'failed'::text, 'ambiguous'::text])))
);

-- table route_answers

CREATE TABLE public.route_answers (
    route text NOT NULL,
    owner_id text NOT NULL,
    input_hash bytea NOT NULL,
    task_id uuid NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL
);

-- table route_limits

CREATE TABLE public.route_limits (
    route text NOT NULL,
    owner_id text NOT NULL,
    user_id text NOT NULL,
    kind text NOT NULL,
    window_start timestamp with time zone NOT NULL,
    count integer DEFAULT 0 NOT NULL,
    CONSTRAINT route_limits_kind CHECK ((kind = ANY (ARRAY['window'::text, 'day'::text])))
);

-- table task_attempts

CREATE TABLE public.task_attempts (
    task_id uuid NOT NULL,
    attempt integer NOT NULL,
    state text DEFAULT 'sent'::text NOT NULL,
    provider_key text NOT NULL,
    idempotency_key text NOT NULL,
    class text,
    provider_status integer,
    error_code text,
    started_at timestamp with time zone DEFAULT now() NOT NULL,
    finished_at timestamp with time zone,
    model text NOT NULL,
    usage_implausible boolean DEFAULT false NOT NULL,
    reported_input_tokens bigint,
    reported_output_tokens bigint,
    error_param text,
    error_retry_at timestamp with time zone,
    CONSTRAINT task_attempts_attempt CHECK ((attempt >= 1)),
    CONSTRAINT task_attempts_state CHECK ((state = ANY (ARRAY['sent'::text, 'succeeded'::text, 'failed'::text, 'ambiguous'::text])))
);

-- table task_kept_answers

CREATE TABLE public.task_kept_answers (
    task_id uuid NOT NULL,
    attempt integer NOT NULL,
    model text NOT NULL,
    started_at timestamp with time zone NOT NULL,
    latency interval NOT NULL,
    answer_sealed bytea NOT NULL,
    kept_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT task_kept_answers_attempt CHECK ((attempt >= 1))
);

-- comment TABLE task_kept_answers

COMMENT ON TABLE public.task_kept_answers IS 'Provider answers whose recording failed, sealed, waiting for a run of the task to record them without calling again';

-- table tasks

CREATE TABLE public.tasks (
    id uuid DEFAULT gen_random_uuid() NOT NULL,
    owner_id text NOT NULL,
    idempotency_key text NOT NULL,
    request_hash bytea NOT NULL,
    request jsonb NOT NULL,
    model text NOT NULL,
    status text DEFAULT 'queued'::text NOT NULL,
    attempts integer DEFAULT 0 NOT NULL,
    reserved_micros bigint DEFAULT 0 NOT NULL,
    result jsonb,
    error jsonb,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    finished_at timestamp with time zone,
    deadline_at timestamp with time zone NOT NULL,
    workload text DEFAULT ''::text NOT NULL,
    cancel_requested boolean DEFAULT false NOT NULL,
    payload bytea,
    output_sealed bytea,
    redaction_policy text DEFAULT 'redact'::text NOT NULL,
    bodies_erased_at timestamp with time zone,
    bodies_erased_by text,
    bodies_erased_reason text,
    rerun_of uuid,
    route text,
    prompt_version text,
    max_attempts integer,
    call_timeout_ms integer,
    job_id bigint,
    ended_unsucceeded text,
    answer_sealed bytea,
    CONSTRAINT tasks_attempts CHECK ((attempts >= 0)),
    CONSTRAINT tasks_error CHECK (((status <> 'failed'::text) OR (error IS NOT NULL))),
    CONSTRAINT tasks_finished CHECK (((status = ANY (ARRAY['succeeded'::text, 'failed'::text, 'canceled'::text])) = (finished_at IS NOT NULL))),
    CONSTRAINT tasks_result CHECK (((status = 'succeeded'::text) = (result IS NOT NULL))),
    CONSTRAINT tasks_status CHECK ((status = ANY (ARRAY['queued'::text, 'running'::text, 'succeeded'::text, 'failed'::text, 'canceled'::text])))
)
WITH (fillfactor='75');

-- comment COLUMN tasks.answer_sealed

COMMENT ON COLUMN public.tasks.answer_sealed IS 'The answer''s tool calls, refusal, choices and logprobs, sealed; NULL for a text-only answer';

-- table usage_records

CREATE TABLE public.usage_records (
    task_id uuid NOT NULL,
    owner_id text NOT NULL,
    model text NOT NULL,
    input_tokens bigint NOT NULL,
    output_tokens bigint NOT NULL,
    source text NOT NULL,
    cost_micros bigint NOT NULL,
    charged_micros bigint NOT NULL,
    shortfall_micros bigint DEFAULT 0 NOT NULL,
    settled_at timestamp with time zone DEFAULT now() NOT NULL,
    workload text DEFAULT ''::text NOT NULL,
    cached_input_tokens bigint DEFAULT 0 NOT NULL,
    cache_write_tokens bigint DEFAULT 0 NOT NULL,
    reasoning_tokens bigint DEFAULT 0 NOT NULL,
    CONSTRAINT usage_records_amounts CHECK (((input_tokens >= 0) AND (output_tokens >= 0) AND (charged_micros >= 0) AND (shortfall_micros >= 0) AND (cost_micros = (charged_micros + shortfall_micros)))),
    CONSTRAINT usage_records_classes CHECK (((cached_input_tokens >= 0) AND (cache_write_tokens >= 0) AND (reasoning_tokens >= 0) AND (cached_input_tokens <= (input_tokens - cache_write_tokens)) AND (reasoning_tokens <= output_tokens))),
    CONSTRAINT usage_records_source CHECK ((source = ANY (ARRAY['reported'::text, 'estimated'::text, 'possibly_charged'::text])))
);

-- table webhook_endpoints

CREATE TABLE public.webhook_endpoints (
    owner_id text NOT NULL,
    url text NOT NULL,
    events text[] NOT NULL,
    secret_sealed bytea NOT NULL,
    previous_sealed bytea,
    previous_until timestamp with time zone,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    allow_private boolean DEFAULT false NOT NULL,
    accepted_at timestamp with time zone,
    CONSTRAINT webhook_endpoints_url_check CHECK ((length(url) <= 2048))
);

-- table webhook_events

CREATE TABLE public.webhook_events (
    id uuid DEFAULT gen_random_uuid() NOT NULL,
    owner_id text NOT NULL,
    task_id uuid NOT NULL,
    type text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    state text DEFAULT 'pending'::text NOT NULL,
    tries integer DEFAULT 0 NOT NULL,
    last_status integer,
    last_error text,
    last_try_at timestamp with time zone,
    next_try_at timestamp with time zone,
    CONSTRAINT webhook_events_state_check CHECK ((state = ANY (ARRAY['pending'::text, 'delivered'::text, 'failed'::text, 'dropped'::text])))
);

-- default budget_ledger id

ALTER TABLE ONLY public.budget_ledger ALTER COLUMN id SET DEFAULT nextval('public.budget_ledger_id_seq'::regclass);

-- default budget_periods id

ALTER TABLE ONLY public.budget_periods ALTER COLUMN id SET DEFAULT nextval('public.budget_periods_id_seq'::regclass);

-- default replay_audit id

ALTER TABLE ONLY public.replay_audit ALTER COLUMN id SET DEFAULT nextval('public.replay_audit_id_seq'::regclass);

-- constraint api_keys api_keys_key_hash

ALTER TABLE ONLY public.api_keys
    ADD CONSTRAINT api_keys_key_hash UNIQUE (key_hash);

-- constraint api_keys api_keys_pkey

ALTER TABLE ONLY public.api_keys
    ADD CONSTRAINT api_keys_pkey PRIMARY KEY (id);

-- constraint budget_alerts budget_alerts_pkey

ALTER TABLE ONLY public.budget_alerts
    ADD CONSTRAINT budget_alerts_pkey PRIMARY KEY (budget_period_id, threshold_pct);

-- constraint budget_ledger budget_ledger_pkey

ALTER TABLE ONLY public.budget_ledger
    ADD CONSTRAINT budget_ledger_pkey PRIMARY KEY (id);

-- constraint budget_limits budget_limits_pkey

ALTER TABLE ONLY public.budget_limits
    ADD CONSTRAINT budget_limits_pkey PRIMARY KEY (owner_id, workload);

-- constraint budget_periods budget_periods_key

ALTER TABLE ONLY public.budget_periods
    ADD CONSTRAINT budget_periods_key UNIQUE (owner_id, workload, period_start);

-- constraint budget_periods budget_periods_pkey

ALTER TABLE ONLY public.budget_periods
    ADD CONSTRAINT budget_periods_pkey PRIMARY KEY (id);

-- constraint budget_reservations budget_reservations_pkey

ALTER TABLE ONLY public.budget_reservations
    ADD CONSTRAINT budget_reservations_pkey PRIMARY KEY (task_id);

-- constraint data_keys data_keys_pkey

ALTER TABLE ONLY public.data_keys
    ADD CONSTRAINT data_keys_pkey PRIMARY KEY (id);

-- constraint owners owners_pkey

ALTER TABLE ONLY public.owners
    ADD CONSTRAINT owners_pkey PRIMARY KEY (id);

-- constraint provider_keys provider_keys_pkey

ALTER TABLE ONLY public.provider_keys
    ADD CONSTRAINT provider_keys_pkey PRIMARY KEY (key);

-- constraint rate_charges rate_charges_pkey

ALTER TABLE ONLY public.rate_charges
    ADD CONSTRAINT rate_charges_pkey PRIMARY KEY (task_id);

-- constraint rate_limits rate_limits_pkey

ALTER TABLE ONLY public.rate_limits
    ADD CONSTRAINT rate_limits_pkey PRIMARY KEY (owner_id, workload);

-- constraint rate_windows rate_windows_pkey

ALTER TABLE ONLY public.rate_windows
    ADD CONSTRAINT rate_windows_pkey PRIMARY KEY (owner_id, workload, window_start);

-- constraint replay_audit replay_audit_pkey

ALTER TABLE ONLY public.replay_audit
    ADD CONSTRAINT replay_audit_pkey PRIMARY KEY (id);

-- constraint replay_records replay_records_pkey

ALTER TABLE ONLY public.replay_records
    ADD CONSTRAINT replay_records_pkey PRIMARY KEY (task_id, attempt);

-- constraint route_answers route_answers_pkey

ALTER TABLE ONLY public.route_answers
    ADD CONSTRAINT route_answers_pkey PRIMARY KEY (route, owner_id, input_hash);

-- constraint route_limits route_limits_pkey

ALTER TABLE ONLY public.route_limits
    ADD CONSTRAINT route_limits_pkey PRIMARY KEY (route, owner_id, user_id, kind, window_start);

-- constraint task_attempts task_attempts_pkey

ALTER TABLE ONLY public.task_attempts
    ADD CONSTRAINT task_attempts_pkey PRIMARY KEY (task_id, attempt);

-- constraint task_kept_answers task_kept_answers_pkey

ALTER TABLE ONLY public.task_kept_answers
    ADD CONSTRAINT task_kept_answers_pkey PRIMARY KEY (task_id, attempt);

-- constraint tasks tasks_owner_idempotency_key

ALTER TABLE ONLY public.tasks
    ADD CONSTRAINT tasks_owner_idempotency_key UNIQUE (owner_id, idempotency_key);

-- constraint tasks tasks_pkey

ALTER TABLE ONLY public.tasks
    ADD CONSTRAINT tasks_pkey PRIMARY KEY (id);

-- constraint usage_records usage_records_pkey

ALTER TABLE ONLY public.usage_records
    ADD CONSTRAINT usage_records_pkey PRIMARY KEY (task_id);

-- constraint webhook_endpoints webhook_endpoints_pkey

ALTER TABLE ONLY public.webhook_endpoints
    ADD CONSTRAINT webhook_endpoints_pkey PRIMARY KEY (owner_id);

-- constraint webhook_events webhook_events_pkey

ALTER TABLE ONLY public.webhook_events
    ADD CONSTRAINT webhook_events_pkey PRIMARY KEY (id);

-- constraint webhook_events webhook_events_task_id_type_key

ALTER TABLE ONLY public.webhook_events
    ADD CONSTRAINT webhook_events_task_id_type_key UNIQUE (task_id, type);

-- index budget_ledger_owner

CREATE INDEX budget_ledger_owner ON public.budget_ledger USING btree (owner_id, id);

-- index budget_ledger_period

CREATE INDEX budget_ledger_period ON public.budget_ledger USING btree (budget_period_id);

-- index budget_reservations_held

CREATE INDEX budget_reservations_held ON public.budget_reservations USING btree (owner_id) WHERE (state = 'held'::text);

-- index budget_reservations_held_created

CREATE INDEX budget_reservations_held_created ON public.budget_reservations USING btree (created_at, task_id) WHERE (state = 'held'::text);

-- index rate_corrections_window

CREATE INDEX rate_corrections_window ON public.rate_corrections USING btree (owner_id, window_start, workload);

-- index replay_audit_accessed

CREATE INDEX replay_audit_accessed ON public.replay_audit USING btree (accessed_at DESC, id DESC);

-- index replay_audit_task

CREATE INDEX replay_audit_task ON public.replay_audit USING btree (task_id);

-- index route_answers_age

CREATE INDEX route_answers_age ON public.route_answers USING btree (route, created_at);

-- index task_attempts_usage_implausible

CREATE INDEX task_attempts_usage_implausible ON public.task_attempts USING btree (task_id) WHERE usage_implausible;

-- index tasks_bodies_live

CREATE INDEX tasks_bodies_live ON public.tasks USING btree (created_at) WHERE (bodies_erased_at IS NULL);

-- index tasks_created

CREATE INDEX tasks_created ON public.tasks USING btree (created_at DESC, id DESC);

-- index tasks_model_created

CREATE INDEX tasks_model_created ON public.tasks USING btree (model, created_at DESC);

-- index tasks_owner_created

CREATE INDEX tasks_owner_created ON public.tasks USING btree (owner_id, created_at DESC, id DESC);

-- index tasks_request_text

CREATE INDEX tasks_request_text ON public.tasks USING gin (to_tsvector('simple'::regconfig, "left"((request)::text, 65536)));

-- index tasks_unsucceeded_created

CREATE INDEX tasks_unsucceeded_created ON public.tasks USING btree (ended_unsucceeded, created_at DESC, id DESC) WHERE (ended_unsucceeded IS NOT NULL);

-- index usage_records_owner_settled

CREATE INDEX usage_records_owner_settled ON public.usage_records USING btree (owner_id, settled_at);

-- index usage_records_settled

CREATE INDEX usage_records_settled ON public.usage_records USING btree (settled_at, task_id);

-- index webhook_events_ended

CREATE INDEX webhook_events_ended ON public.webhook_events USING btree (created_at) WHERE (state <> 'pending'::text);

-- index webhook_events_owner

CREATE INDEX webhook_events_owner ON public.webhook_events USING btree (owner_id, created_at DESC, id DESC);

-- statistics usage_records_groups

CREATE STATISTICS public.usage_records_groups (ndistinct) ON owner_id, model, workload, ((date_trunc('day'::text, (settled_at AT TIME ZONE 'UTC'::text)) AT TIME ZONE 'UTC'::text)), ((date_trunc('month'::text, (settled_at AT TIME ZONE 'UTC'::text)) AT TIME ZONE 'UTC'::text)) FROM public.usage_records;

-- trigger api_keys api_keys_changed

CREATE TRIGGER api_keys_changed AFTER DELETE ON public.api_keys FOR EACH ROW EXECUTE FUNCTION public.tollgate_api_key_changed();

-- trigger api_keys api_keys_updated

CREATE TRIGGER api_keys_updated AFTER UPDATE ON public.api_keys FOR EACH ROW WHEN ((((((((old.id IS DISTINCT FROM new.id) OR (old.owner_id IS DISTINCT FROM new.owner_id)) OR (old.role IS DISTINCT FROM new.role)) OR (old.workload IS DISTINCT FROM new.workload)) OR (old.key_hash IS DISTINCT FROM new.key_hash)) OR (old.revoked_at IS DISTINCT FROM new.revoked_at)) OR (old.expires_at IS DISTINCT FROM new.expires_at))) EXECUTE FUNCTION public.tollgate_api_key_changed();

-- trigger budget_ledger budget_ledger_append_only

CREATE TRIGGER budget_ledger_append_only BEFORE DELETE OR UPDATE ON public.budget_ledger FOR EACH ROW EXECUTE FUNCTION public.budget_ledger_append_only();

-- trigger budget_reservations budget_reservations_rate_released

CREATE TRIGGER budget_reservations_rate_released AFTER UPDATE OF state ON public.budget_reservations FOR EACH ROW WHEN (((new.state = 'released'::text) AND (old.state = 'held'::text))) EXECUTE FUNCTION public.tollgate_rate_released();

-- trigger tasks tasks_ended_unsucceeded

CREATE TRIGGER tasks_ended_unsucceeded BEFORE INSERT OR UPDATE OF status ON public.tasks FOR EACH ROW EXECUTE FUNCTION public.tollgate_task_ended();

-- trigger usage_records usage_records_rate_settled

CREATE TRIGGER usage_records_rate_settled AFTER INSERT ON public.usage_records FOR EACH ROW EXECUTE FUNCTION public.tollgate_rate_settled();

-- fk constraint api_keys api_keys_owner_id_fkey

ALTER TABLE ONLY public.api_keys
    ADD CONSTRAINT api_keys_owner_id_fkey FOREIGN KEY (owner_id) REFERENCES public.owners(id);

-- fk constraint budget_alerts budget_alerts_budget_period_id_fkey

ALTER TABLE ONLY public.budget_alerts
    ADD CONSTRAINT budget_alerts_budget_period_id_fkey FOREIGN KEY (budget_period_id) REFERENCES public.budget_periods(id);

-- fk constraint budget_ledger budget_ledger_budget_period_id_fkey

ALTER TABLE ONLY public.budget_ledger
    ADD CONSTRAINT budget_ledger_budget_period_id_fkey FOREIGN KEY (budget_period_id) REFERENCES public.budget_periods(id);

-- fk constraint budget_ledger budget_ledger_owner_id_fkey

ALTER TABLE ONLY public.budget_ledger
    ADD CONSTRAINT budget_ledger_owner_id_fkey FOREIGN KEY (owner_id) REFERENCES public.owners(id);

-- fk constraint budget_limits budget_limits_owner_id_fkey

ALTER TABLE ONLY public.budget_limits
    ADD CONSTRAINT budget_limits_owner_id_fkey FOREIGN KEY (owner_id) REFERENCES public.owners(id);

-- fk constraint budget_periods budget_periods_owner_id_fkey

ALTER TABLE ONLY public.budget_periods
    ADD CONSTRAINT budget_periods_owner_id_fkey FOREIGN KEY (owner_id) REFERENCES public.owners(id);

-- fk constraint budget_reservations budget_reservations_owner_id_fkey

ALTER TABLE ONLY public.budget_reservations
    ADD CONSTRAINT budget_reservations_owner_id_fkey FOREIGN KEY (owner_id) REFERENCES public.owners(id);

-- fk constraint rate_limits rate_limits_owner_id_fkey

ALTER TABLE ONLY public.rate_limits
    ADD CONSTRAINT rate_limits_owner_id_fkey FOREIGN KEY (owner_id) REFERENCES public.owners(id) ON DELETE CASCADE;

-- fk constraint replay_records replay_records_owner_id_fkey

ALTER TABLE ONLY public.replay_records
    ADD CONSTRAINT replay_records_owner_id_fkey FOREIGN KEY (owner_id) REFERENCES public.owners(id);

-- fk constraint replay_records replay_records_task_id_fkey

ALTER TABLE ONLY public.replay_records
    ADD CONSTRAINT replay_records_task_id_fkey FOREIGN KEY (task_id) REFERENCES public.tasks(id);

-- fk constraint route_answers route_answers_task_id_fkey

ALTER TABLE ONLY public.route_answers
    ADD CONSTRAINT route_answers_task_id_fkey FOREIGN KEY (task_id) REFERENCES public.tasks(id);

-- fk constraint task_attempts task_attempts_task_id_fkey

ALTER TABLE ONLY public.task_attempts
    ADD CONSTRAINT task_attempts_task_id_fkey FOREIGN KEY (task_id) REFERENCES public.tasks(id);

-- fk constraint task_kept_answers task_kept_answers_task_id_fkey

ALTER TABLE ONLY public.task_kept_answers
    ADD CONSTRAINT task_kept_answers_task_id_fkey FOREIGN KEY (task_id) REFERENCES public.tasks(id) ON DELETE CASCADE;

-- fk constraint tasks tasks_owner_id_fkey

ALTER TABLE ONLY public.tasks
    ADD CONSTRAINT tasks_owner_id_fkey FOREIGN KEY (owner_id) REFERENCES public.owners(id);

-- fk constraint tasks tasks_rerun_of_fkey

ALTER TABLE ONLY public.tasks
    ADD CONSTRAINT tasks_rerun_of_fkey FOREIGN KEY (rerun_of) REFERENCES public.tasks(id);

-- fk constraint usage_records usage_records_owner_id_fkey

ALTER TABLE ONLY public.usage_records
    ADD CONSTRAINT usage_records_owner_id_fkey FOREIGN KEY (owner_id) REFERENCES public.owners(id);

--

