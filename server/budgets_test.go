package server_test

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"

	"github.com/tollgate/tollgate/accounts"
	"github.com/tollgate/tollgate/budget"
	"github.com/tollgate/tollgate/tasks"
)

func TestAdminSetsBudgetsAndTopsThemUp(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{noWorkers: true})
	admin := e.owner("ops", accounts.RoleAdmin, 0)
	client := e.owner("acme", accounts.RoleClient, 1000)
	finance := e.owner("ledger", accounts.RoleFinance, 0)

	put := func(key string, body string) response {
		return e.do(http.MethodPut, "/v1/budgets/acme", key, []byte(body), nil)
	}
	if r := put(client, `{"total_micros": 5000}`); r.status != http.StatusForbidden {
		t.Errorf("client PUT: %d, want 403", r.status)
	}
	r := put(admin, `{"total_micros": 5000, "period": "monthly", "workloads": {"batch": {"total_micros": 2000, "period": "daily"}}}`)
	if r.status != http.StatusOK {
		t.Fatalf("admin PUT: %d %s", r.status, r.body)
	}
	for _, bad := range []string{`{"total_micros": -1}`, `{"period": "weekly", "total_micros": 1}`, `{}`, `{"total_micros": "5"}`, `[`} {
		if r := put(admin, bad); r.status != http.StatusBadRequest {
			t.Errorf("PUT %s: %d %s, want 400", bad, r.status, r.body)
		}
	}
	r = e.do(http.MethodPost, "/v1/budgets/acme/topups", admin, []byte(`{"amount_micros": 700, "workload": "batch", "note": "extra batch run"}`), nil)
	if r.status != http.StatusCreated {
		t.Fatalf("topup: %d %s", r.status, r.body)
	}
	for _, key := range []string{admin, finance, client} {
		r := e.do(http.MethodGet, "/v1/budgets/acme", key, nil, nil)
		if r.status != http.StatusOK {
			t.Fatalf("GET budget: %d %s", r.status, r.body)
		}
		var got struct {
			Budgets []struct {
				Workload        string `json:"workload"`
				Period          string `json:"period"`
				TotalMicros     int64  `json:"total_micros"`
				RemainingMicros int64  `json:"remaining_micros"`
			} `json:"budgets"`
		}
		_ = json.Unmarshal(r.body, &got)
		if len(got.Budgets) != 2 || got.Budgets[0].TotalMicros != 5000 || got.Budgets[0].Period != "monthly" ||
			got.Budgets[1].Workload != "batch" || got.Budgets[1].TotalMicros != 2700 || got.Budgets[1].RemainingMicros != 2700 {
			t.Errorf("budget = %s", r.body)
		}
	}
	if r := e.do(http.MethodGet, "/v1/budgets/ops", client, nil, nil); r.status != http.StatusForbidden {
		t.Errorf("client reading another owner's budget: %d, want 403", r.status)
	}
	if r := e.do(http.MethodPost, "/v1/budgets/nobody/topups", admin, []byte(`{"amount_micros": 5}`), nil); r.status != http.StatusNotFound {
		t.Errorf("topup of a missing budget: %d, want 404", r.status)
	}
	e.checkInvariants()
}

// A workload's key is held to both caps: the workload's, and the owner's.
func TestWorkloadKeysAreHeldToTheirWorkloadCap(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{noWorkers: true})
	e.owner("acme", accounts.RoleClient, 100_000)
	if _, err := e.budgets.SetLimit(t.Context(), budget.Limit{OwnerID: "acme", Workload: "batch", Period: budget.PeriodDaily, TotalMicros: 3 * 206}); err != nil {
		t.Fatal(err)
	}
	batch, err := e.accounts.CreateKey(t.Context(), "acme", accounts.RoleClient, "batch")
	if err != nil {
		t.Fatal(err)
	}
	chat, err := e.accounts.CreateKey(t.Context(), "acme", accounts.RoleClient, "chat")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	statuses := make([]int, 10)
	for i := range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			statuses[i] = e.post(batch, fmt.Sprintf("b%d", i), taskBody("abcdefgh", 100), nil).status
		}()
	}
	wg.Wait()
	accepted := 0
	for _, s := range statuses {
		if s == http.StatusAccepted {
			accepted++
		}
	}
	if accepted != 3 {
		t.Errorf("batch key: %d accepted, want 3 (its workload cap)", accepted)
	}
	// The runaway batch cannot drain the key that serves chat.
	if r := e.post(chat, "c1", taskBody("abcdefgh", 100), nil); r.status != http.StatusAccepted {
		t.Errorf("chat key after batch hit its cap: %d %s", r.status, r.body)
	}
	e.checkInvariants()
}

func TestCancelQueuedAndRunningTasks(t *testing.T) {
	t.Parallel()
	t.Run("queued", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, envOptions{noWorkers: true})
		key := e.owner("acme", accounts.RoleClient, 1_000_000)
		other := e.owner("other", accounts.RoleClient, 1_000_000)
		id := e.post(key, "k", taskBody("abcdefgh", 100), nil).task(t).ID
		if r := e.do(http.MethodPost, "/v1/tasks/"+id+"/cancel", other, nil, nil); r.status != http.StatusNotFound {
			t.Errorf("another owner's cancel: %d, want 404", r.status)
		}
		r := e.do(http.MethodPost, "/v1/tasks/"+id+"/cancel", key, nil, nil)
		if r.status != http.StatusOK || r.task(t).Status != tasks.StatusCanceled {
			t.Fatalf("cancel: %d %s, want 200 canceled", r.status, r.body)
		}
		if r := e.do(http.MethodPost, "/v1/tasks/"+id+"/cancel", key, nil, nil); r.status != http.StatusConflict {
			t.Errorf("second cancel: %d, want 409", r.status)
		}
		if b := e.balance("acme"); b.ReservedMicros != 0 || b.SpentMicros != 0 {
			t.Errorf("after cancel: %+v, want everything released", b)
		}
		// Its job is canceled with it: no worker picks it up afterwards.
		if got := e.scalar(`SELECT count(*) FROM river_job WHERE id = (SELECT job_id FROM tasks WHERE id = $1) AND state = 'cancelled'`, id); got != 1 {
			t.Errorf("the canceled task's job is not cancelled")
		}
		e.checkInvariants()
	})
	t.Run("running", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, envOptions{})
		key := e.owner("acme", accounts.RoleClient, 1_000_000)
		e.fake.Script(fakeDelay(300))
		id := e.post(key, "k", taskBody("abcdefgh", 100), nil).task(t).ID
		e.waitFor("call in flight", func() bool { return e.fake.CallCount() == 1 })
		r := e.do(http.MethodPost, "/v1/tasks/"+id+"/cancel", key, nil, nil)
		if r.status != http.StatusAccepted || !r.task(t).CancelRequested {
			t.Fatalf("cancel while running: %d %s, want 202 with cancel_requested", r.status, r.body)
		}
		task := e.waitFinished(key, id)
		if task.Status != tasks.StatusCanceled || task.Result != nil {
			t.Fatalf("task = %s %+v, want canceled without a result", task.Status, task.Result)
		}
		// Settled for what the in-flight call spent.
		if got := e.scalar(`SELECT count(*) FROM usage_records WHERE task_id = $1 AND charged_micros > 0`, id); got != 1 {
			t.Errorf("the canceled call's spend was not settled")
		}
		e.checkInvariants()
	})
}

func TestReaperClosesOrphanedReservations(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{noWorkers: true})
	key := e.owner("acme", accounts.RoleClient, 1_000_000)
	finished := e.post(key, "a", taskBody("abcdefgh", 100), nil).task(t).ID
	lost := e.post(key, "b", taskBody("abcdefgh", 100), nil).task(t).ID
	// A bug finished one task without closing its reservation; the other
	// lost its job and sits past its deadline.
	if _, err := e.pool.Exec(t.Context(), `UPDATE tasks SET status = 'canceled', finished_at = now() WHERE id = $1`, finished); err != nil {
		t.Fatal(err)
	}
	if _, err := e.pool.Exec(t.Context(), `UPDATE tasks SET deadline_at = now() - interval '1 hour' WHERE id = $1`, lost); err != nil {
		t.Fatal(err)
	}
	n, err := e.tasks.ReapOnce(t.Context())
	if err != nil || n != 2 {
		t.Fatalf("ReapOnce = %d, %v; want 2", n, err)
	}
	if r := e.do(http.MethodGet, "/v1/tasks/"+lost, key, nil, nil).task(t); r.Status != tasks.StatusFailed {
		t.Errorf("task past its deadline = %s, want failed", r.Status)
	}
	if n, _ := e.tasks.ReapOnce(t.Context()); n != 0 {
		t.Errorf("second ReapOnce closed %d, want 0", n)
	}
	e.checkInvariants()
}

func TestBudgetAlertsFireOncePerThresholdAndReachTheWebhook(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var got []budget.Alert
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var a budget.Alert
		_ = json.NewDecoder(r.Body).Decode(&a)
		mu.Lock()
		got = append(got, a)
		mu.Unlock()
	}))
	t.Cleanup(hook.Close)
	e := newEnv(t, envOptions{webhook: hook.URL})
	key := e.owner("acme", accounts.RoleClient, 100) // each task reserves and costs 6 + 10*2 = 26
	for i := range 3 {
		r := e.post(key, strconv.Itoa(i), taskBody("abcdefgh", 10), map[string]string{"Prefer": "wait=20"})
		e.waitFinished(key, r.task(t).ID)
	}
	// Spent 26, 52, then 78: the third crosses 70% and fires it, once.
	e.waitFor("webhook delivery", func() bool { mu.Lock(); defer mu.Unlock(); return len(got) >= 1 })
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 1 || got[0].ThresholdPct != 70 || got[0].OwnerID != "acme" {
		t.Errorf("webhook got %+v, want one 70%% alert for acme", got)
	}
}

func TestUsageGroupsAndCSVAgreeWithTheJSONTotals(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	alice := e.owner("alice", accounts.RoleClient, 1_000_000)
	bob := e.owner("bob", accounts.RoleClient, 1_000_000)
	finance := e.owner("ledger", accounts.RoleFinance, 0)
	for i, k := range []string{alice, alice, bob} {
		r := e.post(k, strconv.Itoa(i), taskBody("abcdefgh", 100), map[string]string{"Prefer": "wait=30"})
		e.waitFinished(k, r.task(t).ID)
	}
	r := e.do(http.MethodGet, "/v1/usage?group_by=owner,model,day", finance, nil, nil)
	if r.status != http.StatusOK {
		t.Fatalf("grouped usage: %d %s", r.status, r.body)
	}
	var rep struct {
		Groups []struct {
			OwnerID    *string `json:"owner_id"`
			Tasks      int64   `json:"tasks"`
			CostMicros int64   `json:"cost_micros"`
		} `json:"groups"`
		Totals struct {
			Tasks      int64 `json:"tasks"`
			CostMicros int64 `json:"cost_micros"`
		} `json:"totals"`
	}
	if err := json.Unmarshal(r.body, &rep); err != nil {
		t.Fatal(err)
	}
	var sum int64
	for _, g := range rep.Groups {
		sum += g.CostMicros
	}
	if len(rep.Groups) != 2 || sum != rep.Totals.CostMicros || rep.Totals.Tasks != 3 {
		t.Errorf("groups %+v do not add up to totals %+v", rep.Groups, rep.Totals)
	}
	if r := e.do(http.MethodGet, "/v1/usage?group_by=week", finance, nil, nil); r.status != http.StatusBadRequest {
		t.Errorf("group_by=week: %d, want 400", r.status)
	}

	res := e.do(http.MethodGet, "/v1/usage.csv", finance, nil, nil)
	if res.status != http.StatusOK || res.header.Get("Content-Type") != "text/csv; charset=utf-8" {
		t.Fatalf("csv: %d %s", res.status, res.header.Get("Content-Type"))
	}
	records, err := csv.NewReader(bytes.NewReader(res.body)).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(records) != 4 || records[0][0] != "settled_at" || records[0][8] != "cost_micros" {
		t.Fatalf("csv = %v", records)
	}
	var csvSum int64
	for _, rec := range records[1:] {
		n, _ := strconv.ParseInt(rec[8], 10, 64)
		csvSum += n
		if rec[11] != budget.FormatMicros(n) {
			t.Errorf("decimal column %q disagrees with %d micros", rec[11], n)
		}
	}
	if csvSum != rep.Totals.CostMicros {
		t.Errorf("CSV sums to %d, JSON totals say %d", csvSum, rep.Totals.CostMicros)
	}
	// A client's CSV holds only its own rows.
	own := e.do(http.MethodGet, "/v1/usage.csv", bob, nil, nil)
	if n := bytes.Count(own.body, []byte("\n")); n != 2 {
		t.Errorf("bob's CSV has %d lines, want header + 1", n)
	}
}
