package server_test

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/tollgate/tollgate/accounts"
)

// TestSuccessesOfOneOwnerSettleTogether runs 150 tasks of one owner at once
// with workers on, so that successes queue behind each other and are
// recorded in shared transactions (tasks.batchRecorder). Every task must
// end with its own journal entry, replay record and usage row, the owner's
// balance must equal the sum of the settlements to the micro, the ledger
// must explain it, and the metrics must show that some transaction
// recorded more than one task.
func TestSuccessesOfOneOwnerSettleTogether(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	key := e.owner("batchco", accounts.RoleClient, 1_000_000_000)
	const n = 150
	var wg sync.WaitGroup
	start := make(chan struct{})
	statuses := make([]int, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			r := e.post(key, fmt.Sprintf("together-%d", i), taskBody("settle me with the others", 20), map[string]string{"Prefer": "wait=60"})
			statuses[i] = r.status
		}()
	}
	close(start)
	wg.Wait()
	for i, s := range statuses {
		if s != http.StatusOK {
			t.Fatalf("task %d: status %d, want 200 (finished within the wait)", i, s)
		}
	}
	checks := []scalarCheck{
		{"succeeded tasks", `SELECT count(*) FROM tasks WHERE status = 'succeeded'`, n},
		{"journal entries", `SELECT count(*) FROM task_attempts WHERE state = 'succeeded'`, n},
		{"replay records", `SELECT count(*) FROM replay_records WHERE state = 'succeeded'`, n},
		{"usage rows", `SELECT count(*) FROM usage_records`, n},
		{"settled reservations", `SELECT count(*) FROM budget_reservations WHERE state = 'settled'`, n},
		{"spent minus the usage rows' charges", `
			SELECT (SELECT spent_micros FROM budget_periods WHERE owner_id = 'batchco' AND workload = '')
			     - (SELECT sum(charged_micros) FROM usage_records WHERE owner_id = 'batchco')`, 0},
		{"results' costs minus the usage rows' costs", `
			SELECT (SELECT sum((result->>'cost_micros')::bigint) FROM tasks)
			     - (SELECT sum(cost_micros) FROM usage_records)`, 0},
		{"reserved left", `SELECT reserved_micros FROM budget_periods WHERE owner_id = 'batchco' AND workload = ''`, 0},
	}
	e.expectScalars(checks)
	e.checkInvariants()

	r := e.do(http.MethodGet, "/metrics", "", nil, nil)
	count := metricValue(t, r.body, "tollgate_success_batch_tasks_count")
	sum := metricValue(t, r.body, "tollgate_success_batch_tasks_sum")
	if sum > n || count < 1 {
		t.Errorf("batches recorded %v tasks in %v transactions; want at most %d tasks in at least one", sum, count, n)
	}
	if count >= sum {
		t.Errorf("%v transactions for %v tasks: no transaction recorded more than one task", count, sum)
	}
	t.Logf("%v tasks recorded together in %v transactions (the rest alone)", sum, count)
}

// metricValue reads an unlabelled sample from a Prometheus text page.
func metricValue(t *testing.T, page []byte, name string) float64 {
	t.Helper()
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + ` (\S+)$`).FindSubmatch(page)
	if m == nil {
		t.Fatalf("metric %s not on the page", name)
	}
	v, err := strconv.ParseFloat(string(m[1]), 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestAdmissionsOfOneOwnerCommitTogether makes admissions of one owner
// queue behind each other and checks that they are written in shared
// transactions (tasks.batchAdmitter). The queue is made, not hoped for:
// the test holds the owner's balance rows, so a first admission waits in
// PostgreSQL with its owner's batch in progress; 160 more submissions (150
// keys, ten of them sent twice) are then all in progress behind it before
// the rows are released. Left to the scheduler, a loaded host could run
// them one after another, or let one batch's fall-back race the next on a
// duplicated key, and no batch would ever hold two (seen in CI). A batch
// may still meet a key a concurrent request took (its jobs are dropped and
// those submissions answer as replays). Every key must end with exactly
// one task, one job and one held reservation, the reserved balance must be
// their sum, and some transaction must have admitted more than one task.
func TestAdmissionsOfOneOwnerCommitTogether(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{noWorkers: true})
	key := e.owner("admitco", accounts.RoleClient, 1_000_000_000)
	const n, dup = 150, 10 // keys 0..9 are sent twice

	release := e.holdBalanceRows("admitco")
	firstAnswer := make(chan response, 1)
	go func() { firstAnswer <- e.post(key, "admit-first", taskBody("admit me with the others", 20), nil) }()
	e.waitingOnLocks(1) // the first admission, its owner's batch in progress

	var wg sync.WaitGroup
	statuses := make([]int, n+dup)
	for i := range n + dup {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := e.post(key, fmt.Sprintf("admit-%d", i%n), taskBody("admit me with the others", 20), nil)
			statuses[i] = r.status
		}()
	}
	// Past their lookup (no key is committed while the rows are held, so
	// none of them is answered as a replay there), each is only redacted
	// and sealed before it joins the owner's queue.
	e.waitFor("every submission admitting", func() bool { return e.tasks.Admitting() == 1+n+dup })
	release()
	if r := <-firstAnswer; r.status != http.StatusAccepted {
		t.Fatalf("first submission: %d %s, want 202", r.status, r.body)
	}
	wg.Wait()
	for i, s := range statuses {
		if s != http.StatusAccepted && s != http.StatusOK {
			t.Fatalf("submission %d: status %d, want 202 (or a replay)", i, s)
		}
	}
	checks := []scalarCheck{
		{"tasks", `SELECT count(*) FROM tasks`, n + 1},
		{"distinct keys", `SELECT count(DISTINCT idempotency_key) FROM tasks`, n + 1},
		{"jobs", `SELECT count(*) FROM river_job WHERE kind = 'tollgate_task'`, n + 1},
		{"tasks whose job is not theirs", `
			SELECT count(*) FROM tasks t LEFT JOIN river_job j ON j.id = t.job_id AND j.args->>'task_id' = t.id::text
			WHERE j.id IS NULL`, 0},
		{"held reservations", `SELECT count(*) FROM budget_reservations WHERE state = 'held'`, n + 1},
		{"reserved minus the tasks' reservations", `
			SELECT (SELECT reserved_micros FROM budget_periods WHERE owner_id = 'admitco' AND workload = '')
			     - (SELECT sum(reserved_micros) FROM tasks)`, 0},
	}
	e.expectScalars(checks)
	e.checkInvariants()

	r := e.do(http.MethodGet, "/metrics", "", nil, nil)
	count := metricValue(t, r.body, "tollgate_admission_batch_tasks_count")
	sum := metricValue(t, r.body, "tollgate_admission_batch_tasks_sum")
	if count < 1 || count >= sum {
		t.Errorf("%v tasks admitted in %v shared transactions: no transaction admitted more than one", sum, count)
	}
	t.Logf("%v tasks admitted together in %v transactions (the rest alone)", sum, count)
}

// scalarCheck is a query expected to return want.
type scalarCheck struct {
	name string
	sql  string
	want int64
}

// expectScalars runs each check's query and reports those that differ.
func (e *env) expectScalars(checks []scalarCheck, args ...any) {
	e.t.Helper()
	for _, c := range checks {
		if got := e.scalar(c.sql, args...); got != c.want {
			e.t.Errorf("%s: %d, want %d", c.name, got, c.want)
		}
	}
}

// TestAdmissionMeetingAKeyTakenByAnotherInstance races one key across two
// instances deterministically: the first instance's admission has written
// its task row and waits, uncommitted, for the owner's balance rows (held
// by the test); the second's batch then writes the same key and waits for
// that row. When the first commits, the second's batch fails on the
// unique key (it is sent with its COMMIT, so the failure must stop that
// commit), and the second submission answers from the first's task: a
// replay for the same body (202, the task still queued), 422
// idempotency_key_reused for a different one. Either way
// the key ends with one task, one job and one held reservation, and the
// second's rolled-back job and reservation leave nothing behind.
func TestAdmissionMeetingAKeyTakenByAnotherInstance(t *testing.T) {
	t.Parallel()
	first := newEnv(t, envOptions{noWorkers: true, queueOnly: true})
	second := newEnv(t, envOptions{noWorkers: true, queueOnly: true, pool: first.pool})
	key := first.owner("keyrace", accounts.RoleClient, 1_000_000_000)
	for _, c := range []struct {
		name       string
		secondBody []byte
		wantStatus int
	}{
		{"same body", taskBody("one key, two instances", 20), http.StatusAccepted}, // a replay of the queued task
		{"different body", taskBody("one key, two instances, another body", 20), http.StatusUnprocessableEntity},
	} {
		func() {
			idem := "race-" + c.name
			release := first.holdBalanceRows("keyrace")
			firstAnswer, secondAnswer := make(chan response, 1), make(chan response, 1)
			go func() { firstAnswer <- first.post(key, idem, taskBody("one key, two instances", 20), nil) }()
			first.waitingOnLocks(1) // the first's reservation, its task row written
			go func() { secondAnswer <- second.post(key, idem, c.secondBody, nil) }()
			first.waitingOnLocks(2) // the second's task row, behind the first's
			release()
			r1, r2 := <-firstAnswer, <-secondAnswer
			if r1.status != http.StatusAccepted {
				t.Fatalf("%s: first instance: %d %s, want 202", c.name, r1.status, r1.body)
			}
			if r2.status != c.wantStatus {
				t.Fatalf("%s: second instance: %d %s, want %d", c.name, r2.status, r2.body, c.wantStatus)
			}
			if c.wantStatus == http.StatusAccepted {
				if r2.header.Get("Idempotent-Replayed") != "true" {
					t.Errorf("%s: second instance's answer is not marked as a replay", c.name)
				}
				if got, want := r2.task(t).ID, r1.task(t).ID; got != want {
					t.Errorf("%s: second instance answered task %s, want the first's %s", c.name, got, want)
				}
			}
			first.expectScalars([]scalarCheck{
				{"tasks with the key", `SELECT count(*) FROM tasks WHERE idempotency_key = '` + first.tasks.StoredKey(idem) + `'`, 1},
				{"jobs of the key's tasks", `SELECT count(*) FROM river_job j JOIN tasks t ON j.args->>'task_id' = t.id::text
					WHERE t.idempotency_key = '` + first.tasks.StoredKey(idem) + `'`, 1},
				{"jobs without a task", `SELECT count(*) FROM river_job j LEFT JOIN tasks t ON j.args->>'task_id' = t.id::text
					WHERE j.kind = 'tollgate_task' AND t.id IS NULL`, 0},
				{"reservations without a task", `SELECT count(*) FROM budget_reservations r LEFT JOIN tasks t ON t.id = r.task_id
					WHERE t.id IS NULL`, 0},
			})
			first.checkInvariants()
		}()
	}
}

// TestAdmissionBatchMeetingATakenKeyStaysTogether: a batch of admissions
// whose one key another instance took first answers that submission as a
// replay and still writes the rest together, in a second try of the same
// batch, instead of sending every member to a transaction of its own. The
// second instance's batch is made by holding the owner's balance rows: the
// first instance's admission of the key and the second's first two
// admissions (one in each of its lanes) wait on them, and the second's next
// three submissions (the taken key and two new ones) queue behind those
// before the rows are released.
func TestAdmissionBatchMeetingATakenKeyStaysTogether(t *testing.T) {
	t.Parallel()
	first := newEnv(t, envOptions{noWorkers: true, queueOnly: true})
	second := newEnv(t, envOptions{noWorkers: true, queueOnly: true, pool: first.pool})
	key := first.owner("takenco", accounts.RoleClient, 1_000_000_000)
	release := first.holdBalanceRows("takenco")
	body := taskBody("a key two instances want", 20)
	answers := make(chan response, 6)
	go func() { answers <- first.post(key, "taken", body, nil) }()
	first.waitingOnLocks(1) // the first instance's row for "taken", uncommitted
	go func() { answers <- second.post(key, "second-first", body, nil) }()
	first.waitingOnLocks(2) // the second instance's first batch of one, in progress
	go func() { answers <- second.post(key, "second-second", body, nil) }()
	first.waitingOnLocks(3) // its second, in its other lane
	for _, idem := range []string{"taken", "new-1", "new-2"} {
		go func() { answers <- second.post(key, idem, body, nil) }()
	}
	second.waitFor("five admissions in progress on the second instance", func() bool { return second.tasks.Admitting() == 5 })
	release()
	replays := 0
	for range 6 {
		r := <-answers
		if r.status != http.StatusAccepted {
			t.Fatalf("status %d %s, want 202", r.status, r.body)
		}
		if r.header.Get("Idempotent-Replayed") == "true" {
			replays++
		}
	}
	if replays != 1 {
		t.Errorf("%d answers marked as replays, want 1 (the second instance's copy of the taken key)", replays)
	}
	first.expectScalars([]scalarCheck{
		{"tasks", `SELECT count(*) FROM tasks`, 5},
		{"jobs", `SELECT count(*) FROM river_job WHERE kind = 'tollgate_task'`, 5},
		{"held reservations", `SELECT count(*) FROM budget_reservations WHERE state = 'held'`, 5},
		{"reserved minus the tasks' reservations", `
			SELECT (SELECT reserved_micros FROM budget_periods WHERE owner_id = 'takenco' AND workload = '')
			     - (SELECT sum(reserved_micros) FROM tasks)`, 0},
	})
	first.checkInvariants()

	// The second instance: its first two admissions alone, then new-1 and
	// new-2 together: three batches, four tasks.
	r := second.do(http.MethodGet, "/metrics", "", nil, nil)
	count := metricValue(t, r.body, "tollgate_admission_batch_tasks_count")
	sum := metricValue(t, r.body, "tollgate_admission_batch_tasks_sum")
	if count != 3 || sum != 4 {
		t.Errorf("second instance: %v tasks admitted in %v batches, want 4 in 3 (the batch that met the taken key kept its other two)", sum, count)
	}
}

// holdBalanceRows locks owner's balance rows from a transaction of the
// test's own, so that admissions of owner wait in PostgreSQL, uncommitted,
// until release is called (at the latest when the test ends).
func (e *env) holdBalanceRows(owner string) (release func()) {
	e.t.Helper()
	ctx := context.Background()
	// A connection of its own, not one of the pool's few (pgxpool's
	// default on a small machine is 4), which the admissions held need.
	if e.dbURL == "" {
		e.t.Fatal("holdBalanceRows needs the env that created the database")
	}
	conn, err := pgx.Connect(ctx, e.dbURL)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = conn.Close(ctx) })
	hold, err := conn.Begin(ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = hold.Rollback(ctx) })
	tag, err := hold.Exec(ctx, `SELECT 1 FROM budget_periods WHERE owner_id = $1 FOR UPDATE`, owner)
	if err != nil || tag.RowsAffected() == 0 {
		e.t.Fatalf("hold %s's balance rows: %v (%d rows)", owner, err, tag.RowsAffected())
	}
	return func() {
		e.t.Helper()
		if err := hold.Rollback(ctx); err != nil {
			e.t.Fatal(err)
		}
	}
}

// waitingOnLocks waits until at least n sessions of the test's database
// other than its own wait on a lock.
func (e *env) waitingOnLocks(n int64) {
	e.t.Helper()
	e.waitFor(fmt.Sprintf("%d sessions waiting on a lock", n), func() bool {
		return e.scalar(`SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()`) >= n
	})
}
