// Package budget owns money: budgets per owner and per workload, their
// periods, the reservations tasks hold while they run, settlement of actual
// cost, the append-only ledger, threshold alerts and the settled-usage
// reports finance reconciles.
//
// All amounts are integer micro-units (1 unit = 1,000,000 micros); no float
// ever touches money. Every amount is bounded where it enters (money.go:
// totals and top-ups at MaxTotalMicros, which stands for unlimited; prices
// at MaxPricePerMTok; usage at MaxUsageTokens), costs are exact and
// saturate, and SQL compares and sums in numeric, so no computation on
// money overflows.
//
// A budget is a limit (budget_limits: owner, workload, period, total) and,
// per period, a balance row (budget_periods: total, reserved, spent) keyed
// by the period's UTC start. An owner's cap has workload ""; a workload (a
// named group of API keys) may have its own cap, and a task must pass both.
// A new day or month finds no row and opens one from the limit, so periods
// roll over without a job racing requests at midnight.
//
// Admission is one conditional UPDATE over the balance rows a task needs,
// so no interleaving of concurrent requests can reserve more than a budget
// holds; the CHECK constraint backs that up. Every change to total,
// reserved or spent money also appends a ledger row on the balance row it
// changed, so for every balance row
//
//	total    = Σ adjust + Σ topup
//	reserved = Σ reserve − Σ release
//	spent    = Σ settle
//
// and Verify proves it. Functions ending in Tx take the caller's
// transaction: the tasks package creates a task, its reservation and its job
// atomically, and settles in the transaction that finishes the task.
package budget
