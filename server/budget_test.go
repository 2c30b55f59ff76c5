package server_test

import (
	"fmt"
	"net/http"
	"sync"
	"testing"

	"github.com/tollgate/tollgate/accounts"
	"github.com/tollgate/tollgate/provider/fake"
)

// 100 concurrent tasks against a budget that covers exactly 37: the
// conditional UPDATE admits exactly 37, refuses 63 with 402, and the ledger
// explains every micro. Workers are off so no settlement frees budget
// during the race.
func TestBudgetRaceAdmitsExactlyWhatTheBudgetCovers(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{noWorkers: true})
	const perTask = 206 // "abcdefgh": 2 + 4 input tokens at 1 micro, 100 output at 2
	key := e.owner("acme", accounts.RoleClient, 37*perTask)

	const n = 100
	statuses := make([]int, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			r := e.post(key, fmt.Sprintf("race-%d", i), taskBody("abcdefgh", 100), nil)
			statuses[i] = r.status
			if r.status == http.StatusPaymentRequired && r.problemCode(t) != "budget_exceeded" {
				t.Errorf("402 with code %q", r.problemCode(t))
			}
		}()
	}
	close(start)
	wg.Wait()

	count := map[int]int{}
	for _, s := range statuses {
		count[s]++
	}
	if count[http.StatusAccepted] != 37 || count[http.StatusPaymentRequired] != 63 {
		t.Fatalf("statuses = %v, want 37×202 and 63×402", count)
	}
	if got := e.scalar(`SELECT count(*) FROM tasks`); got != 37 {
		t.Errorf("tasks = %d, want 37", got)
	}
	if got := e.balance("acme").ReservedMicros; got != 37*perTask {
		t.Errorf("reserved = %d, want %d", got, 37*perTask)
	}
	e.checkInvariants()

	// A refused key was not consumed: after raising the budget it works.
	if _, err := e.budgets.Set(t.Context(), "acme", 38*perTask); err != nil {
		t.Fatal(err)
	}
	for i, s := range statuses {
		if s == http.StatusPaymentRequired {
			if r := e.post(key, fmt.Sprintf("race-%d", i), taskBody("abcdefgh", 100), nil); r.status != http.StatusAccepted {
				t.Errorf("refused key retried after top-up: %d %s, want 202", r.status, r.body)
			}
			break
		}
	}
}

func TestOwnerWithoutBudgetIsRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{noWorkers: true})
	key, err := e.accounts.CreateKey(t.Context(), "nobudget", accounts.RoleClient, "")
	if err != nil {
		t.Fatal(err)
	}
	r := e.post(key, "k", taskBody("hello", 10), nil)
	if r.status != http.StatusPaymentRequired || r.problemCode(t) != "budget_exceeded" {
		t.Fatalf("%d %s, want 402 budget_exceeded", r.status, r.body)
	}
}

func TestSettlementUsesReportedOrEstimatedUsage(t *testing.T) {
	t.Parallel()
	noUsage := `{"id":"x","object":"chat.completion","created":1,"model":"test-model",` +
		`"choices":[{"index":0,"message":{"role":"assistant","content":"twelve bytes"},"finish_reason":"stop"}]}`
	overUsage := `{"id":"x","object":"chat.completion","created":1,"model":"test-model",` +
		`"choices":[{"index":0,"message":{"role":"assistant","content":"long"},"finish_reason":"length"}],` +
		`"usage":{"prompt_tokens":2800,"completion_tokens":100,"total_tokens":2900}}`
	cases := []struct {
		name          string
		script        []fake.Scripted
		budget        int64
		wantSource    string
		wantCost      int64
		wantCharged   int64
		wantShortfall int64
	}{
		// The fake reports 6 prompt and 16 completion tokens: 6 + 32 micros.
		{"reported", nil, 1_000_000, "reported", 38, 38, 0},
		// No usage: input estimated 2+4 tokens, output "twelve bytes" 3 tokens: 6 + 6.
		{"estimated", []fake.Scripted{{Status: 200, Body: noUsage}}, 1_000_000, "estimated", 12, 12, 0},
		// Usage far above the 206 reserved (input beyond the estimate,
		// output at the limit) with only 500 in the budget:
		// charged up to the balance, the rest recorded as shortfall.
		{"above reservation", []fake.Scripted{{Status: 200, Body: overUsage}}, 500, "reported", 3000, 500, 2500},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, envOptions{})
			key := e.owner("acme", accounts.RoleClient, c.budget)
			e.fake.Script(c.script...)
			r := e.post(key, "k", taskBody("abcdefgh", 100), map[string]string{"Prefer": "wait=30"})
			task := e.waitFinished(key, r.task(t).ID)
			if task.Result == nil {
				t.Fatalf("task %+v has no result", task)
			}
			if string(task.Result.Usage.Source) != c.wantSource || task.Result.CostMicros != c.wantCost {
				t.Errorf("usage source=%s cost=%d, want %s %d", task.Result.Usage.Source, task.Result.CostMicros, c.wantSource, c.wantCost)
			}
			var charged, shortfall int64
			err := e.pool.QueryRow(t.Context(), `SELECT charged_micros, shortfall_micros FROM usage_records WHERE task_id = $1`, task.ID).
				Scan(&charged, &shortfall)
			if err != nil {
				t.Fatal(err)
			}
			if charged != c.wantCharged || shortfall != c.wantShortfall {
				t.Errorf("charged=%d shortfall=%d, want %d %d", charged, shortfall, c.wantCharged, c.wantShortfall)
			}
			e.checkInvariants()
		})
	}
}
