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
// and Verify proves it.
//
// Money moves by three verbs, each for one to n tasks: QueueReserve holds
// a reservation, Settlements and SettleTx settle it at its actual cost,
// ReleaseTx returns it whole. BalanceRows is the rare fourth, the period
// opener: QueueReserve never opens a period, so the first reservation of a
// day or month opens it first. Functions ending in Tx take the caller's
// transaction, and Queue functions queue on the caller's batch, to send
// with its COMMIT: the tasks package creates a task, its reservation and
// its job atomically, and settles in the transaction that finishes the
// task.
//
// Reservations and settlements of one owner go in batches: one statement
// that updates every balance row once, with the batch's total, instead of
// once per task. Every reservation and settlement of an owner updates the
// owner's balance row, and a transaction that updates one row n times
// writes n versions of it, each while holding the row's lock, which every
// other admission and settlement of the owner waits for. The sum is exact
// because a batch is all or nothing: its caller commits every member or
// none, and on an abort writes each member on its own, which tells the
// cases apart. Reservations are positive, so a balance row covers every
// reservation of a batch taken one after the other if and only if it
// covers their sum. A batch of settlements charges every member its full
// cost, and settles only if every row can take the batch's totals
// (reserved minus what it releases, plus spent plus what it charges,
// within the total), checked by the UPDATE itself on the row as locked;
// otherwise each member is settled alone, where a cost above the headroom
// is charged up to it and the shortfall recorded. The caps hold at the
// commit, the only moment another transaction can see the rows.
package budget
