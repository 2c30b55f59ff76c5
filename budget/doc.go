// Package budget owns money: each owner's budget, the reservations tasks hold
// while they run, settlement of actual cost, the append-only ledger and the
// settled-usage report finance reconciles.
//
// All amounts are integer micro-units (1 unit = 1,000,000 micros); no float
// ever touches money. Admission is one conditional UPDATE, so no interleaving
// of concurrent requests can reserve more than the budget holds, and the
// budgets table's CHECK constraint backs that up. Every change to reserved or
// spent money also appends a ledger row, so for every owner
//
//	reserved = Σ reserve − Σ release   and   spent = Σ spend.
//
// Functions ending in Tx take the caller's transaction: the tasks package
// creates a task, its reservation and its job atomically, and settles in the
// transaction that finishes the task.
package budget
