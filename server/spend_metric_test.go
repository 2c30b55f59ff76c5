package server_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/tollgate/tollgate/accounts"
	"github.com/tollgate/tollgate/provider/fake"
	"github.com/tollgate/tollgate/tasks"
)

// TestSpendMetricCountsEachSettlementOnce ends tasks every way money
// closes: tollgate_spend_micros_total grows by exactly what the usage row
// records for a settled task, success or not, and not at all for a
// released one.
func TestSpendMetricCountsEachSettlementOnce(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name       string
		opts       envOptions
		script     []fake.Scripted
		cancel     bool // cancel: at once without workers, else once the call is in flight
		wantStatus tasks.Status
		settled    bool
	}{
		{"succeeded", envOptions{}, []fake.Scripted{fakeDelay(0)}, false, tasks.StatusSucceeded, true},
		{"canceled after its call returned", envOptions{}, []fake.Scripted{fakeDelay(300)}, true, tasks.StatusCanceled, true},
		{"failed as possibly charged", envOptions{maxAttempts: 4, requestTimeout: 300 * time.Millisecond},
			[]fake.Scripted{{Hang: true}, {Hang: true}}, false, tasks.StatusFailed, true},
		{"released", envOptions{noWorkers: true}, nil, true, tasks.StatusCanceled, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, c.opts)
			key := e.owner("acme", accounts.RoleClient, 1_000_000)
			e.fake.Script(c.script...)
			id := e.submit(key, "k", taskBody("abcdefgh", 100))
			if c.cancel {
				if !c.opts.noWorkers {
					e.waitFor("call in flight", func() bool { return e.fake.CallCount() == 1 })
				}
				if r := e.do(http.MethodPost, "/v1/tasks/"+id+"/cancel", key, nil, nil); r.status/100 != 2 {
					t.Fatalf("cancel: %d %s", r.status, r.body)
				}
			}
			if got := e.waitFinished(key, id); got.Status != c.wantStatus {
				t.Fatalf("status = %s, want %s", got.Status, c.wantStatus)
			}
			spend := func() float64 {
				return e.counter("tollgate_spend_micros_total", map[string]string{"owner_id": "acme", "model": testModel})
			}
			if !c.settled {
				// A cancel without a call is observed before it is
				// answered: nothing more can come.
				if got := spend(); got != 0 {
					t.Errorf("spend after a release = %v, want 0", got)
				}
				return
			}
			want := float64(e.scalar(`SELECT cost_micros FROM usage_records WHERE task_id = $1`, id))
			if want <= 0 {
				t.Fatalf("settled cost = %v, want a charge", want)
			}
			e.waitFor("spend counted", func() bool { return spend() >= want })
			// Counted with the task's end: once that is counted, the
			// spend is final.
			e.waitFor("end counted", func() bool {
				return e.counter("tollgate_tasks_finished_total", map[string]string{"status": string(c.wantStatus)}) == 1
			})
			if got := spend(); got != want {
				t.Errorf("spend = %v micros, want %v (the settlement's cost, once)", got, want)
			}
		})
	}
}
