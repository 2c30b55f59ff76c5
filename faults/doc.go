// Package faults is Tollgate's fault suite: it injects the failures a
// production deployment meets and proves, in SQL, what survived them.
//
// The package has no code of its own; its tests are the suite. They are
// built only with the "faults" build tag, so that `go test ./...` stays
// fast, and run with `make test-faults` (which CI runs after `make test`):
//
//	go test -tags faults -count=1 -v ./faults
//
// The suite builds the real binary, runs `tollgate serve` instances and a
// standalone `tollgate fakeprovider` as processes on a per-scenario
// database, and attacks them from outside:
//
//  1. SIGKILL of serving instances mid-call, three instances on one database,
//     each killed instance restarted at once.
//  2. PostgreSQL restarted with a fast shutdown during a run (only with
//     TOLLGATE_FAULTS_PG_RESTART=1: the server is shared with every other
//     test package, so this must never run alongside `make test`).
//  3. A provider that hangs, one that cuts the connection mid-response,
//     and one that answers 200 with an error or garbage body.
//  4. A storm of concurrent duplicate submissions, some with changed bodies.
//  5. Clock jumps across a budget period boundary. The binary has no clock
//     to inject, so this scenario runs the service in-process (tasks,
//     budget and server packages wired as cmd/tollgate wires them) with a
//     test clock.
//  6. The transaction recording a succeeded call fails at random (its
//     backend terminated, or a constraint raised) on three instances: every
//     task must still end with one provider call, its kept answer recorded.
//
// Every scenario ends with the same invariants, checked in SQL against its
// database and the fake provider's call log: each accepted task is final or
// still queued, and no task was lost or duplicated; per task, the provider
// saw at most as many calls as the attempt journal holds; no finished task
// holds a reservation; `tollgate budget verify` passes; no balance row has
// reserved plus spent above its total. The suite prints a table of the
// figures at the end; its invariant-violations column must read 0.
package faults
