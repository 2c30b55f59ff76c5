// Package tasks owns the life of a model task: its idempotent creation, the
// durable job that runs it, the journal of attempts, and the transactions
// that finish it.
//
// Creation is one transaction: the task row (whose UNIQUE (owner_id,
// idempotency_key) constraint decides every race between retries), the
// budget reservation and the River job commit together or not at all. A
// retry with the same key and request gets the same task back; the same key
// with a different request is refused and changes nothing.
//
// Running a task is three short transactions around the provider call:
// begin an attempt (journal row committed as "sent" before the call, so a
// later worker can tell that a call may already have run), call the provider
// outside any transaction, then record the outcome. A final outcome settles
// or releases the reservation, writes the replay record and completes the
// River job in the same transaction, so "finished", "settled" and "job done"
// can never disagree.
//
// This package orchestrates budget and replay and owns the transaction that
// spans them; it knows nothing of HTTP.
package tasks
