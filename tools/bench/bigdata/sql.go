package bigdata

import (
	"fmt"
	"strings"
)

// The seed's SQL. A batch first computes its tasks' attributes into a
// temporary table: generate_series over the batch's positions j, mapped to
// task indexes i (spread), then laterals deriving each attribute from i
// through hashint8extended, one independent uniform draw per attribute
// (OFFSET 0 keeps Postgres from inlining, and so recomputing, an attribute
// wherever a later one uses it). The INSERTs then read that table.
//
// Parameters of batchTableSQL:
//
//	$1, $2  the batch's positions, lo and hi
//	$3      the subset's size n (positions 1..n)
//	$4      the universe u (indexes 1..u)
//	$5      the newest task's creation time
//	$6      the span in seconds
//	$7      the number of owners

// uniform is the k-th independent draw in [0, 1) for task x.i.
func uniform(k int) string {
	return fmt.Sprintf("((hashint8extended(x.i, %d) & 9007199254740991)::float8 / 9007199254740992.0)", k)
}

// taskIDSQL mirrors TaskID.
const taskIDSQL = `(substr(r.h, 1, 12) || '4' || substr(r.h, 14, 3)
	|| substr('89ab', (('x' || substr(r.h, 17, 1))::bit(4)::int % 4) + 1, 1) || substr(r.h, 18, 15))::uuid`

// sqlText quotes s as an SQL string literal. The seed quotes only its own
// constants, never input.
func sqlText(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

func textArray(list []string) string {
	q := make([]string, len(list))
	for i, s := range list {
		q[i] = sqlText(s)
	}
	return "ARRAY[" + strings.Join(q, ", ") + "]"
}

func intArray(list []int64) string {
	q := make([]string, len(list))
	for i, n := range list {
		q[i] = fmt.Sprint(n)
	}
	return "ARRAY[" + strings.Join(q, ", ") + "]::bigint[]"
}

// modelCase picks a model's 1-based position by its share.
func modelCase(u string) string {
	var b strings.Builder
	b.WriteString("CASE")
	cum := 0.0
	for i, m := range models[:len(models)-1] {
		cum += m.Share
		fmt.Fprintf(&b, " WHEN %s < %g THEN %d", u, cum, i+1)
	}
	fmt.Fprintf(&b, " ELSE %d END", len(models))
	return b.String()
}

func modelColumn(f func(model) string) string {
	list := make([]string, len(models))
	for i, m := range models {
		list[i] = f(m)
	}
	return textArray(list)
}

func modelPrices(f func(model) int64) string {
	list := make([]int64, len(models))
	for i, m := range models {
		list[i] = f(m)
	}
	return intArray(list)
}

// source is the FROM clause of a batch. With text it also derives the
// request and the answer, which only tasks and replay records store.
func source(text bool) string {
	inPrice := modelPrices(func(m model) int64 { return m.InPrice })
	outPrice := modelPrices(func(m model) int64 { return m.OutPrice })
	var b strings.Builder
	fmt.Fprintf(&b, `
	FROM generate_series($1::bigint, $2::bigint) AS g (j)
	CROSS JOIN LATERAL (SELECT (g.j * $4::bigint + $3::bigint - 1) / $3::bigint AS i) AS x
	CROSS JOIN LATERAL (SELECT md5(%[1]s || x.i) AS h,
		%[2]s AS u_owner, %[3]s AS u_workload, %[4]s AS u_model, %[5]s AS u_status, %[6]s AS u_retry,
		%[7]s AS u_time, %[8]s AS u_in, %[9]s AS u_out, %[10]s AS u_queue, %[11]s AS u_lat, %[12]s AS u_fail,
		%[13]s AS u_source OFFSET 0) AS r
	CROSS JOIN LATERAL (SELECT %[14]s AS id,
		'org-' || lpad(floor($7::int * r.u_owner * r.u_owner)::int::text, 3, '0') AS owner_id,
		CASE WHEN r.u_workload < 0.7 THEN '' WHEN r.u_workload < 0.9 THEN 'batch' ELSE 'chat' END AS workload,
		%[15]s AS mi,
		CASE WHEN r.u_status < %[16]g THEN 'succeeded' WHEN r.u_status < %[17]g THEN 'failed' ELSE 'canceled' END AS status,
		$5::timestamptz - make_interval(secs => $6::float8 * (($4::bigint - x.i) + r.u_time) / $4::bigint) AS created_at,
		50 + floor(4000 * r.u_in * r.u_in)::bigint AS input_tokens,
		16 + floor(600 * r.u_out)::bigint AS output_tokens,
		5 + floor(45 * r.u_queue)::int AS queue_ms,
		200 + floor(2800 * r.u_lat)::int AS latency_ms,
		30 + floor(150 * r.u_fail)::int AS fail_ms OFFSET 0) AS t
	CROSS JOIN LATERAL (SELECT (%[18]s)[t.mi] AS model, (%[19]s)[t.mi] AS provider, (%[20]s)[t.mi] AS provider_model,
		CASE WHEN t.output_tokens < 256 THEN 256 WHEN t.output_tokens < 512 THEN 512 ELSE 1024 END AS max_tokens,
		CASE WHEN t.status = 'canceled' THEN 0 WHEN r.u_retry < %[21]g THEN 2 ELSE 1 END AS attempts,
		(t.input_tokens * (%[22]s)[t.mi] + t.output_tokens * (%[23]s)[t.mi] + 999999) / 1000000 AS cost,
		t.created_at + make_interval(secs => t.queue_ms / 1000.0) AS a1_start,
		CASE WHEN r.u_source < %[24]g THEN 'estimated' ELSE 'reported' END AS source OFFSET 0) AS m
	CROSS JOIN LATERAL (SELECT (t.input_tokens * (%[22]s)[t.mi] + m.max_tokens * (%[23]s)[t.mi] + 999999) / 1000000 AS reserved,
		m.a1_start + make_interval(secs => t.fail_ms / 1000.0) AS a1_finish,
		CASE WHEN m.attempts = 2 THEN m.a1_start + make_interval(secs => (t.fail_ms + 1000) / 1000.0)
		     ELSE m.a1_start END AS final_start OFFSET 0) AS d
	CROSS JOIN LATERAL (SELECT d.final_start + make_interval(secs => t.latency_ms / 1000.0) AS final_finish,
		CASE WHEN t.status = 'canceled' THEN t.created_at + make_interval(secs => 1 + 30 * r.u_queue)
		     ELSE d.final_start + make_interval(secs => (t.latency_ms + 4) / 1000.0) END AS finished_at OFFSET 0) AS e`,
		sqlText(idPrefix),
		uniform(1), uniform(2), uniform(3), uniform(4), uniform(5),
		uniform(6), uniform(7), uniform(8), uniform(9), uniform(10), uniform(11),
		uniform(12),
		taskIDSQL, modelCase("r.u_model"), shareSucceeded, shareSucceeded+shareFailed,
		modelColumn(func(m model) string { return m.Name }),
		modelColumn(func(m model) string { return m.Provider }),
		modelColumn(func(m model) string { return m.ProviderModel }),
		shareRetried, inPrice, outPrice, shareEstimated)
	if !text {
		return b.String()
	}
	fmt.Fprintf(&b, `
	CROSS JOIN LATERAL (SELECT (%[1]s)[1 + floor(%[2]d * %[3]s)::int] AS word,
		(%[4]s)[1 + floor(%[5]d * %[6]s)::int] AS topic,
		'sku' || (10000 + floor(%[7]d * %[8]s)::int) AS sku,
		(100000 + x.i)::text AS order_no,
		'c-' || (1 + floor(%[9]d * %[10]s)::int) AS customer,
		%[11]s < %[12]g AS long,
		%[13]s < %[14]g AS erased,
		GREATEST(e.finished_at, LEAST(e.finished_at + interval '1 day', $5::timestamptz + interval '1 minute')) AS erased_at OFFSET 0) AS w
	CROSS JOIN LATERAL (SELECT jsonb_build_object(
			'messages', jsonb_build_array(
				jsonb_build_object('role', 'system', 'content', 'You are the support assistant of ' || t.owner_id || '. Answer briefly and politely.'),
				jsonb_build_object('role', 'user', 'content', format(
					'Summarise the %%s request from customer %%s about order %%s, item %%s; the %%s team flagged it. Reply to [EMAIL_1] in under %%s words.',
					w.word, w.customer, w.order_no, w.sku, w.topic, m.max_tokens / 4)))
				|| CASE WHEN w.long THEN jsonb_build_array(
					jsonb_build_object('role', 'assistant', 'content', 'Order ' || w.order_no || ' is on its way; the ' || w.word || ' is being processed.'),
					jsonb_build_object('role', 'user', 'content', 'Also check the ' || w.topic || ' status, and call me at [PHONE_1].'))
				   ELSE '[]'::jsonb END,
			'metadata', jsonb_build_object('customer', w.customer),
			'max_tokens', m.max_tokens) AS request,
		CASE WHEN w.long THEN '{"EMAIL": 1, "PHONE": 1}'::jsonb ELSE '{"EMAIL": 1}'::jsonb END AS redactions,
		left(repeat(format('About the %%s of order %%s: ', w.word, w.order_no)
			|| 'the item ships within two days and any refund follows once it is back with us. ', 24),
			4 * t.output_tokens::int) AS answer OFFSET 0) AS b`,
		textArray(commonWords), len(commonWords), uniform(13),
		textArray(topicWords), len(topicWords), uniform(14),
		skuCount, uniform(15), customerCount, uniform(16),
		uniform(17), shareLong, uniform(18), shareErased)
	return b.String()
}

// batchColumns are the attributes a batch's statements read.
const (
	batchColumns = `x.i, r.h, t.id, t.owner_id, t.workload, t.status, t.created_at, t.input_tokens, t.output_tokens,
		t.latency_ms, t.fail_ms, m.model, m.provider, m.provider_model, m.max_tokens, m.attempts, m.cost, m.a1_start,
		m.source, d.reserved, d.a1_finish, d.final_start, e.final_finish, e.finished_at`
	textColumns = `w.order_no, w.long, w.erased, w.erased_at, b.request, b.redactions, b.answer`
)

// batchTableSQL computes the attributes of a batch's tasks once, into a
// temporary table the batch's statements read and its commit drops.
func batchTableSQL(text bool) string {
	cols := batchColumns
	if text {
		cols += ", " + textColumns
	}
	return `CREATE TEMP TABLE bigdata_batch ON COMMIT DROP AS SELECT ` + cols + source(text)
}

// failedTaskError is what a task that the provider rejected stores.
const failedTaskError = `'{"code": "model_incompatible", "class": "rejected", "retryable": false, "message": "The model provider rejected this request (for example: too long for the model''s context, or an unsupported parameter); repeating it unchanged will fail again."}'::jsonb`

// insertTasksSQL writes a batch of finished tasks as the service stores
// them: the redacted request, the result without its (sealed) output, the
// failure, and for a few the tombstone of an erasure on request.
func insertTasksSQL() string {
	return `
	INSERT INTO tasks (id, owner_id, idempotency_key, request_hash, request, model, status, attempts, reserved_micros,
	                   result, error, created_at, updated_at, finished_at, deadline_at, workload, cancel_requested,
	                   payload, redaction_policy, bodies_erased_at, bodies_erased_by, bodies_erased_reason)
	SELECT t.id, t.owner_id, 'order-' || t.order_no || '-reply', sha256(convert_to('request/' || t.i, 'UTF8')),
	       CASE WHEN t.erased THEN '{"messages": [], "erased": true}'::jsonb ELSE t.request END,
	       t.model, t.status, t.attempts, t.reserved,
	       CASE WHEN t.status = 'succeeded' THEN jsonb_build_object('model', t.model, 'output', '', 'finish_reason', 'stop',
	            'cost_micros', t.cost, 'usage', jsonb_build_object('source', t.source, 'input_tokens', t.input_tokens,
	            'output_tokens', t.output_tokens)) END,
	       CASE WHEN t.status = 'failed' THEN ` + failedTaskError + ` END,
	       t.created_at, t.finished_at, t.finished_at, t.created_at + interval '1 hour', t.workload, t.status = 'canceled',
	       CASE WHEN NOT t.erased THEN decode(repeat(t.h, CASE WHEN t.long THEN 24 ELSE 16 END), 'hex') END,
	       'redact',
	       CASE WHEN t.erased THEN t.erased_at END,
	       CASE WHEN t.erased THEN 'bigdata-admin' END,
	       CASE WHEN t.erased THEN 'deleted' END
	FROM bigdata_batch t`
}

// attemptState and friends describe attempt a.n of a task: every attempt
// but the last failed transiently (a 503); the last one is the task's
// outcome.
const (
	attemptEarly = `a.n < t.attempts`
	attemptState = `CASE WHEN ` + attemptEarly + ` OR t.status = 'failed' THEN 'failed' ELSE 'succeeded' END`
)

// insertAttemptsSQL writes the attempt journal of a batch.
func insertAttemptsSQL() string {
	return `
	INSERT INTO task_attempts (task_id, attempt, state, provider_key, idempotency_key, class, provider_status, error_code,
	                           started_at, finished_at, model)
	SELECT t.id, a.n, ` + attemptState + `, split_part(t.provider, ':', 2), t.id::text || ':' || a.n,
	       CASE WHEN ` + attemptEarly + ` THEN 'transient' WHEN t.status = 'failed' THEN 'rejected' END,
	       CASE WHEN ` + attemptEarly + ` THEN 503 WHEN t.status = 'failed' THEN 400 END,
	       CASE WHEN ` + attemptEarly + ` THEN 'server_error' WHEN t.status = 'failed' THEN 'invalid_value' END,
	       CASE WHEN ` + attemptEarly + ` THEN t.a1_start ELSE t.final_start END,
	       CASE WHEN ` + attemptEarly + ` THEN t.a1_finish ELSE t.final_finish END + interval '3 milliseconds',
	       t.model
	FROM bigdata_batch t
	CROSS JOIN LATERAL generate_series(1, t.attempts) AS a (n)`
}

// insertReplaySQL writes the replay records of a batch, one per attempt.
func insertReplaySQL() string {
	return `
	INSERT INTO replay_records (task_id, attempt, owner_id, state, provider, provider_model, parameters, timeout_ms,
	                            response, error, started_at, finished_at, latency_ms, trace_id, build_version, redactions)
	SELECT t.id, a.n, t.owner_id, ` + attemptState + `, t.provider, t.provider_model,
	       jsonb_build_object('model', t.model, 'max_tokens', t.max_tokens), 30000,
	       CASE WHEN NOT ` + attemptEarly + ` AND t.status = 'succeeded' THEN jsonb_build_object('model', t.model,
	            'content', CASE WHEN t.erased THEN '' ELSE t.answer END, 'finish_reason', 'stop',
	            'usage', jsonb_build_object('input_tokens', t.input_tokens, 'output_tokens', t.output_tokens)) END,
	       CASE WHEN ` + attemptEarly + ` THEN '{"code": "server_error", "class": "transient", "provider_status": 503}'::jsonb
	            WHEN t.status = 'failed' THEN '{"code": "invalid_value", "class": "rejected", "provider_status": 400}'::jsonb END,
	       CASE WHEN ` + attemptEarly + ` THEN t.a1_start ELSE t.final_start END,
	       CASE WHEN ` + attemptEarly + ` THEN t.a1_finish ELSE t.final_finish END,
	       CASE WHEN ` + attemptEarly + ` THEN t.fail_ms ELSE t.latency_ms END,
	       md5('trace/' || t.i), 'v1.8.0', t.redactions
	FROM bigdata_batch t
	CROSS JOIN LATERAL generate_series(1, t.attempts) AS a (n)`
}

// periodJoin finds the monthly balance row of the owner's budget that the
// task's reservation held.
const periodJoin = `
	JOIN budget_periods p ON p.owner_id = t.owner_id AND p.workload = ''
	 AND p.period_start = date_trunc('month', t.created_at, 'UTC')`

// insertReservationsSQL writes a batch's closed reservations.
func insertReservationsSQL() string {
	return `
	INSERT INTO budget_reservations (task_id, owner_id, amount_micros, estimated, state, created_at, closed_at, budget_period_ids)
	SELECT t.id, t.owner_id, t.reserved, false, CASE WHEN t.status = 'succeeded' THEN 'settled' ELSE 'released' END,
	       t.created_at, t.finished_at, ARRAY[p.id]
	FROM bigdata_batch t` + periodJoin
}

// insertLedgerSQL writes a batch's ledger rows as QueueReserve, SettleTx and
// ReleaseTx do: reserve at admission; at the end release the reservation
// and, for a task that succeeded, settle its cost, both carrying the usage.
func insertLedgerSQL() string {
	return `
	INSERT INTO budget_ledger (owner_id, workload, budget_period_id, task_id, kind, amount_micros, created_at,
	                           usage_source, model, input_tokens, output_tokens)
	SELECT p.owner_id, p.workload, p.id, t.id, k.kind, k.amount, k.at,
	       CASE WHEN k.usage THEN t.source END, CASE WHEN k.usage THEN t.model END,
	       CASE WHEN k.usage THEN t.input_tokens END, CASE WHEN k.usage THEN t.output_tokens END
	FROM bigdata_batch t` + periodJoin + `
	CROSS JOIN LATERAL (VALUES ('reserve', t.reserved, t.created_at, false),
	                           ('release', t.reserved, t.finished_at, t.status = 'succeeded'),
	                           ('settle', t.cost, t.finished_at, true)) AS k (kind, amount, at, usage)
	WHERE k.kind <> 'settle' OR t.status = 'succeeded'`
}

// insertUsageSQL writes a batch's settled usage: budgets never run short,
// so everything is charged.
func insertUsageSQL() string {
	return `
	INSERT INTO usage_records (task_id, owner_id, workload, model, input_tokens, output_tokens, source,
	                           cost_micros, charged_micros, shortfall_micros, settled_at)
	SELECT t.id, t.owner_id, t.workload, t.model, t.input_tokens, t.output_tokens, t.source,
	       t.cost, t.cost, 0, t.finished_at
	FROM bigdata_batch t
	WHERE t.status = 'succeeded'`
}

// Setup statements; their parameters: $1 the oldest task's time, $2 the
// number of owners, and for budget periods $3 the newest task's time.
const (
	insertOwnersSQL = `
	INSERT INTO owners (id, created_at, redaction_policy, body_retention_days, metadata_retention_days)
	SELECT 'org-' || lpad(k::text, 3, '0'), $1::timestamptz - interval '30 days', 'redact', 365, 400
	FROM generate_series(0, $2::int - 1) AS k
	ON CONFLICT (id) DO NOTHING`

	// Every owner has a monthly cap far above what the seeded tasks spend.
	insertLimitsSQL = `
	INSERT INTO budget_limits (owner_id, workload, period, total_micros, updated_at, updated_by)
	SELECT 'org-' || lpad(k::text, 3, '0'), '', 'monthly', 10000000000000, $1::timestamptz - interval '1 day', 'bigdata-seed'
	FROM generate_series(0, $2::int - 1) AS k`

	insertPeriodsSQL = `
	INSERT INTO budget_periods (owner_id, workload, period, period_start, period_end, total_micros, updated_at)
	SELECT 'org-' || lpad(k::text, 3, '0'), '', 'monthly', ms, ms + interval '1 month', 10000000000000, $3::timestamptz
	FROM generate_series(0, $2::int - 1) AS k,
	     generate_series(date_trunc('month', $1::timestamptz, 'UTC'), date_trunc('month', $3::timestamptz, 'UTC'), interval '1 month') AS ms`

	// A period's row is opened by the first reservation in it, with an
	// adjust row for its total.
	insertOpeningsSQL = `
	INSERT INTO budget_ledger (owner_id, workload, budget_period_id, kind, amount_micros, created_at, actor, note)
	SELECT owner_id, workload, id, 'adjust', total_micros, GREATEST(period_start, $1::timestamptz), 'system', 'period opened'
	FROM budget_periods
	WHERE owner_id IN (SELECT 'org-' || lpad(k::text, 3, '0') FROM generate_series(0, $2::int - 1) AS k)
	ORDER BY period_start, owner_id`

	// spent = Σ settle, per balance row.
	updateSpentSQL = `
	UPDATE budget_periods p SET spent_micros = s.spent
	FROM (SELECT budget_period_id, sum(amount_micros) AS spent FROM budget_ledger WHERE kind = 'settle' GROUP BY 1) AS s
	WHERE s.budget_period_id = p.id`
)

// foreignKeysSQL counts the seeded rows whose foreign keys point nowhere:
// what the triggers a replica-mode session skips would have refused.
const foreignKeysSQL = `
	SELECT (SELECT count(*) FROM tasks x WHERE NOT EXISTS (SELECT 1 FROM owners o WHERE o.id = x.owner_id))
	     + (SELECT count(*) FROM task_attempts x WHERE NOT EXISTS (SELECT 1 FROM tasks t WHERE t.id = x.task_id))
	     + (SELECT count(*) FROM replay_records x WHERE NOT EXISTS (SELECT 1 FROM tasks t WHERE t.id = x.task_id)
	                                                 OR NOT EXISTS (SELECT 1 FROM owners o WHERE o.id = x.owner_id))
	     + (SELECT count(*) FROM budget_reservations x WHERE NOT EXISTS (SELECT 1 FROM owners o WHERE o.id = x.owner_id))
	     + (SELECT count(*) FROM budget_ledger x WHERE NOT EXISTS (SELECT 1 FROM owners o WHERE o.id = x.owner_id)
	                                                OR NOT EXISTS (SELECT 1 FROM budget_periods p WHERE p.id = x.budget_period_id))
	     + (SELECT count(*) FROM usage_records x WHERE NOT EXISTS (SELECT 1 FROM owners o WHERE o.id = x.owner_id))
	     + (SELECT count(*) FROM budget_periods x WHERE NOT EXISTS (SELECT 1 FROM owners o WHERE o.id = x.owner_id))
	     + (SELECT count(*) FROM budget_limits x WHERE NOT EXISTS (SELECT 1 FROM owners o WHERE o.id = x.owner_id))`
