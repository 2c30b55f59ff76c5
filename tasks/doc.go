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
// Running an attempt takes two transactions. The first, with the task
// locked, reads its journal, its kept answers and its provider key's gate
// and commits the attempt's journal entry as "sent" (a run on arrival's
// admission commits it instead). The worker then calls the provider
// outside any transaction and records the outcome: the entry's state, the
// replay record, and for a final outcome the task's end and its
// settlement, all together, so "finished" and "settled" can never
// disagree. A succeeded task's River job is completed by River once the
// worker returns, batched with other jobs' completions; a job run again
// after a crash finds its task finished and makes no call.
//
// Admission and settlement both update the owner's budget row, the one row
// every task of the owner shares. Their locking statement is the last of
// the transaction and is sent with COMMIT in one pipeline (internal/pipetx),
// so the row is held only while PostgreSQL runs the statement and commits.
// What queues behind a commit travels together (ownerbatch.go): an owner's
// waiting admissions in one transaction (two such batches may run at once,
// admissionLanes, so that one slow batch does not hold the owner's next
// admissions), its waiting successes in another,
// each batch falling back to one transaction per task when it cannot
// commit (an admission batch that meets keys a concurrent request took
// first answers those from the taker's task and writes the rest together
// once more). A batch of admissions sends its task rows, its reservations
// (which find their balance rows themselves, budget.QueueReserve) and
// COMMIT in one round trip; settlements and lone admissions first read
// what they lock, then queue per owner within the process
// (internal/keylock) to send it with COMMIT.
// A batch of successes sends its records with the reads that lock its
// tasks (each attempt was journalled before its call, so its number is
// known), and keeps them only if those reads find the tasks as the records
// assumed.
//
// The journal must tell, before a call is repeated, whether an earlier run
// may have made it. Every run, River's or inline (a run on arrival, a
// stream), commits its attempt's entry as "sent" before the call, and the
// outcome's recording updates that entry. An entry a later run finds still
// "sent" is a call whose run died, timed out or failed to record: it is
// journalled as an ambiguous attempt (interrupted) before anything else
// happens.
//
// A recording that fails after the provider answered (a constraint, an
// overflow, a lost connection) does not lose the answer: the run keeps it,
// sealed, by a write of its own, and the task's next run records it
// instead of calling again (kept.go).
//
// A request that waits for a task (Wait) is woken by the
// announcement of its end: at once by the process that finished it, by
// LISTEN/NOTIFY from any other instance. A synchronous caller subscribes
// before its task is admitted (Submission.Await), so its wait begins
// without a read; a finish in the caller's process returns the row from
// its UPDATE when someone waits, and the waiter takes that: no read at all.
//
// A task's finish changes no indexed column (the baseline migration), so it is a
// HOT update; keep status, result, error, output_sealed, finished_at and
// updated_at out of every index of tasks.
//
// The Service is built from phases (phases.go): intake admits, runner
// makes attempts, recording records them and applier carries out the
// decision on each outcome, outcomes tells metrics and waiters of an end,
// reader reads, maintenance reaps, sweeps and purges. The rules of a tool
// loop, which every API surface follows, are ToolLoop's (toolloop.go).
//
// This package orchestrates budget and replay and owns the transaction that
// spans them; it knows nothing of HTTP.
package tasks
