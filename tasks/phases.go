package tasks

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"

	"github.com/tollgate/tollgate/internal/keylock"
	"github.com/tollgate/tollgate/internal/pipetx"
)

// A Service is built from phases, one per part of a task's life, each
// holding only what it uses: Service keeps the exported API and hands each
// call to the phase it belongs to. Dependencies point one way:
//
//	intake      ──► runner
//	runner      ──► recording, applier, outcomes, reader
//	recording   ──► applier, outcomes
//	applier     ──► outcomes
//	maintenance ──► recording, outcomes, reader
//
// Every phase may use guard (redaction, digests, sealing) and the
// service's Config. The decide/apply split, the admitter and the recorder
// seams live inside the phases: intake hands admissions to its admitter,
// recording hands successes to its recorder, and applier carries out what
// decide returned.

// intake admits tasks (create.go, admit.go, arrival.go): it plans a
// submission from the catalog, answers retries from one round trip, sheds
// under load, hands the admission to the admitter, and starts a run on
// arrival when one may start.
type intake struct {
	pool     *pgxpool.Pool
	cfg      *Config
	fitting  *modelFit
	guard    *guard
	shed     *shedder
	waiter   *waiter
	arrivals *arrivals
	slots    callSlots
	admitter admitter // writes the admissions (admitter.go)
	runner   *runner  // runs a first attempt on arrival
}

// runner makes attempts (run.go, attempt.go, call.go, arrival.go): it
// begins an attempt under the task's lock, calls the provider outside any
// transaction, and hands the finished call to recording.
type runner struct {
	pool      *pgxpool.Pool
	cfg       *Config
	fitting   *modelFit
	guard     *guard
	arrivals  *arrivals
	slots     callSlots
	recording *recording
	applier   *applier
	outcomes  *outcomes
	reader    *reader // a stream's task as it ended
}

// recording records finished calls (record.go, recorder.go, kept.go,
// journal.go, replayrecord.go): the journal entry, the replay record, the
// kept copy of an answer that could not be recorded, and the decision on
// what follows, which applier carries out.
type recording struct {
	pool       *pgxpool.Pool
	cfg        *Config
	fitting    *modelFit
	guard      *guard
	waiter     *waiter
	budgetRows *budgetQueue
	recorder   recorder // records successes, alone or batched (recorder.go)
	applier    *applier
	outcomes   *outcomes
}

// applier carries out an outcome's decision in its transaction (apply.go):
// the gate, a fallback, the task's end with its settlement, or its next
// run.
type applier struct {
	cfg        *Config
	river      *river.Client[pgx.Tx]
	fitting    *modelFit
	guard      *guard
	waiter     *waiter
	budgetRows *budgetQueue
	outcomes   *outcomes
}

// outcomes closes the money of tasks that end without an answer and tells
// metrics, alerts and waiters once an end committed (finish.go).
type outcomes struct {
	cfg     *Config
	fitting *modelFit
	guard   *guard
	waiter  *waiter
}

// reader reads tasks for clients and support (read.go, search.go,
// waiter.go, eventview.go, conversation.go, failuredetail.go).
type reader struct {
	pool   *pgxpool.Pool
	cfg    *Config
	guard  *guard
	waiter *waiter
}

// maintenance is what runs beside the tasks (reaper.go, safetynet.go,
// purge.go, erase.go, cancel.go, shed.go): reaping orphaned reservations,
// writing safety nets, retention and erasure, cancels, and sampling the
// queues for shedding.
type maintenance struct {
	pool      *pgxpool.Pool
	cfg       *Config
	river     *river.Client[pgx.Tx]
	shed      *shedder
	recording *recording // records a kept answer the reaper finds
	outcomes  *outcomes
	reader    *reader
}

// guard protects what tasks store (keys.go, privacy.go, answer.go,
// read.go): the redaction of stored fields under the owner's policy, the
// keyed digests of keys and hashes, and the opening of sealed bodies.
type guard struct {
	cfg       *Config
	digestKey []byte // keys the digests of the hash-only policy
}

// budgetQueue queues this process's commits on an owner's budget rows
// (commit).
type budgetQueue struct{ locks keylock.Locks }

// commit sends b, whose last statement locks owner's budget rows (a
// reservation or a settlement), with COMMIT, after this process's other
// commits on those rows: PostgreSQL then has at most one waiter per
// instance for the row, instead of a herd woken at every commit.
func (q *budgetQueue) commit(ctx context.Context, tx *pipetx.Tx, owner string, b *pgx.Batch) error {
	unlock, err := q.locks.Lock(ctx, owner)
	if err != nil {
		return err
	}
	defer unlock()
	return tx.CommitWith(ctx, b)
}

// wire builds s's phases on its shared parts: client runs their jobs,
// slots bound the provider calls, digestKey keys the stored digests.
// runner and maintenance are filled in place: River's workers, registered
// before client exists, hold them already.
func (s *Service) wire(client *river.Client[pgx.Tx], slots callSlots, digestKey []byte) {
	cfg := &s.cfg
	if s.runner == nil {
		s.runner, s.maintenance = &runner{}, &maintenance{}
	}
	if s.arrivals == nil {
		s.arrivals = &arrivals{}
	}
	budgetRows := &budgetQueue{}
	s.guard = &guard{cfg: cfg, digestKey: digestKey}
	s.outcomes = &outcomes{cfg: cfg, fitting: s.fitting, guard: s.guard, waiter: s.waiter}
	s.applier = &applier{cfg: cfg, river: client, fitting: s.fitting, guard: s.guard, waiter: s.waiter,
		budgetRows: budgetRows, outcomes: s.outcomes}
	s.reader = &reader{pool: s.pool, cfg: cfg, guard: s.guard, waiter: s.waiter}
	s.recording = &recording{pool: s.pool, cfg: cfg, fitting: s.fitting, guard: s.guard, waiter: s.waiter,
		budgetRows: budgetRows, applier: s.applier, outcomes: s.outcomes}
	s.recording.recorder = newBatchRecorder(s.recording)
	*s.runner = runner{pool: s.pool, cfg: cfg, fitting: s.fitting, guard: s.guard, arrivals: s.arrivals, slots: slots,
		recording: s.recording, applier: s.applier, outcomes: s.outcomes, reader: s.reader}
	s.intake = &intake{pool: s.pool, cfg: cfg, fitting: s.fitting, guard: s.guard, shed: s.shed, waiter: s.waiter,
		arrivals: s.arrivals, slots: slots, runner: s.runner,
		admitter: newAdmitter(&loneAdmitter{pool: s.pool, river: client, now: cfg.Now, commitOnBudget: budgetRows.commit}, *cfg)}
	*s.maintenance = maintenance{pool: s.pool, cfg: cfg, river: client, shed: s.shed, recording: s.recording,
		outcomes: s.outcomes, reader: s.reader}
}
