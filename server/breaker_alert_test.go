package server_test

import (
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/accounts"
	"github.com/tollgate/tollgate/gate"
	"github.com/tollgate/tollgate/provider/fake"
	"github.com/tollgate/tollgate/tasks"
)

// An outage alerts once however many probes fail: one ALERT line and one
// tollgate_breaker_opened_total per opening, the failed probes at info. A
// second outage after the breaker closed is a second opening.
func TestBreakerAlertsOncePerOpening(t *testing.T) {
	t.Parallel()
	logs := &syncBuffer{}
	e := newEnv(t, envOptions{probeEvery: time.Hour, maxSnooze: 20 * time.Millisecond, logs: logs})
	key := e.owner("acme", accounts.RoleClient, 1_000_000)
	outOfCredit := fake.Scripted{Status: 429, Body: `{"error":{"message":"You exceeded your current quota, please check your plan and billing details.","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}`}
	store := gate.NewStore(e.pool)

	// outage runs one outage: a task opens the breaker, failedProbes probes
	// fail, and the next one succeeds and the task with it.
	outage := func(idem string, failedProbes int) {
		t.Helper()
		script := make([]fake.Scripted, failedProbes+1)
		for i := range script {
			script[i] = outOfCredit
		}
		e.fake.Script(script...)
		task := e.post(key, idem, taskBody("abcdefgh", 100), nil).task(t)
		attempts := func() int64 {
			return e.scalar(`SELECT count(*) FROM task_attempts WHERE task_id = $1`, task.ID)
		}
		e.waitFor("breaker open", func() bool {
			return e.scalar(`SELECT count(*) FROM provider_keys WHERE key = 'default' AND state = 'open'`) == 1 && attempts() == 1
		})
		for i := range failedProbes {
			// The clock is the database's: bring the probe forward, as an
			// operator would, instead of waiting the probe interval.
			if err := store.ProbeNow(t.Context(), "default"); err != nil {
				t.Fatal(err)
			}
			e.waitFor("probe failed", func() bool {
				return attempts() == int64(i+2) &&
					e.scalar(`SELECT count(*) FROM provider_keys WHERE key = 'default' AND state = 'open' AND next_probe_at > now()`) == 1
			})
		}
		if err := store.ProbeNow(t.Context(), "default"); err != nil {
			t.Fatal(err)
		}
		if got := e.waitFinished(key, task.ID); got.Status != tasks.StatusSucceeded {
			t.Fatalf("task = %s %+v after the probe succeeded, want succeeded", got.Status, got.Error)
		}
	}
	check := func(want int) {
		t.Helper()
		if n := strings.Count(logs.String(), `"msg":"ALERT provider key exhausted`); n != want {
			t.Errorf("ALERT lines = %d, want %d; logs:\n%s", n, want, logs.String())
		}
		if got := e.counter("tollgate_breaker_opened_total", map[string]string{"provider_key": "default"}); got != float64(want) {
			t.Errorf("tollgate_breaker_opened_total = %v, want %d", got, want)
		}
	}

	outage("first", 4)
	check(1)
	if n := strings.Count(logs.String(), `"msg":"provider key still exhausted: circuit breaker stays open"`); n != 4 {
		t.Errorf("still-open lines = %d, want one per failed probe (4)", n)
	}
	// Nothing a failed probe logs is above info.
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, `"probe":true`) && strings.Contains(line, `"class":"exhausted"`) &&
			!strings.Contains(line, `"level":"INFO"`) && !strings.Contains(line, `"level":"DEBUG"`) {
			t.Errorf("a failed probe logged above info: %s", line)
		}
	}
	outage("second", 1)
	check(2)
	e.checkInvariants()
}
