package budget

// The ledger rows, by what they record: a task's reservation or release;
// a settlement's release and charge, with the usage charged; a change of
// a total (a period opened, a limit changed, a top-up), with who made it.
// Each is followed by the SELECT of its values.
const (
	ledgerTaskRow  = `INSERT INTO budget_ledger (owner_id, workload, budget_period_id, task_id, kind, amount_micros)`
	ledgerUsageRow = `INSERT INTO budget_ledger (owner_id, workload, budget_period_id, task_id, kind, amount_micros,
	                           usage_source, model, input_tokens, output_tokens)`
	ledgerAdjustRow = `INSERT INTO budget_ledger (owner_id, workload, budget_period_id, kind, amount_micros, actor, note)`
)

// usageRow is the settled usage of a task, which finance reports read,
// followed by the SELECT of its values.
const usageRow = `INSERT INTO usage_records (task_id, owner_id, workload, model, input_tokens, output_tokens, source,
	                           cost_micros, charged_micros, shortfall_micros,
	                           cached_input_tokens, cache_write_tokens, reasoning_tokens)`
