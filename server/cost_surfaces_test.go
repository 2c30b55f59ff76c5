package server_test

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tollgate/tollgate/accounts"
	"github.com/tollgate/tollgate/provider/fake"
	"github.com/tollgate/tollgate/tasks"
)

// TestEverySurfaceShowsWhatATaskWasCharged ends tasks charged with and
// without a result: every surface that shows the task (the task, the
// list, the replay record, the replay search, usage.csv) answers the cost
// its settlement recorded, whatever its status.
func TestEverySurfaceShowsWhatATaskWasCharged(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name       string
		opts       envOptions
		script     []fake.Scripted
		cancel     bool // cancel once the call is in flight
		wantStatus tasks.Status
	}{
		{"succeeded", envOptions{}, []fake.Scripted{fakeDelay(0)}, false, tasks.StatusSucceeded},
		{"canceled after its call returned", envOptions{}, []fake.Scripted{fakeDelay(300)}, true, tasks.StatusCanceled},
		{"failed as possibly charged", envOptions{maxAttempts: 4, requestTimeout: 300 * time.Millisecond},
			[]fake.Scripted{{Hang: true}, {Hang: true}}, false, tasks.StatusFailed},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, c.opts)
			key := e.owner("acme", accounts.RoleClient, 1_000_000)
			finance := e.owner("ledger", accounts.RoleFinance, 0)
			e.fake.Script(c.script...)
			id := e.submit(key, "k", taskBody("abcdefgh", 100))
			if c.cancel {
				e.waitFor("call in flight", func() bool { return e.fake.CallCount() == 1 })
				if r := e.do(http.MethodPost, "/v1/tasks/"+id+"/cancel", key, nil, nil); r.status != http.StatusAccepted {
					t.Fatalf("cancel: %d %s", r.status, r.body)
				}
			}
			if got := e.waitFinished(key, id); got.Status != c.wantStatus {
				t.Fatalf("status = %s, want %s", got.Status, c.wantStatus)
			}
			charged := e.scalar(`SELECT cost_micros FROM usage_records WHERE task_id = $1`, id)
			if charged <= 0 {
				t.Fatalf("settled cost = %d, want a charge", charged)
			}
			want := map[string]string{}
			for _, s := range []string{"task", "list", "replay record", "replay search", "usage.csv"} {
				want[s] = strconv.FormatInt(charged, 10)
			}
			got := map[string]string{
				"task":          costField(t, e.do(http.MethodGet, "/v1/tasks/"+id, key, nil, nil)),
				"list":          costField(t, onlyOf(t, e.do(http.MethodGet, "/v1/tasks", key, nil, nil))),
				"replay record": costField(t, e.do(http.MethodGet, "/v1/tasks/"+id+"/replay", key, nil, nil)),
				"replay search": costField(t, onlyOf(t, e.do(http.MethodGet, "/v1/replays", key, nil, nil))),
				"usage.csv":     csvCost(t, e.do(http.MethodGet, "/v1/usage.csv", finance, nil, nil), id),
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("cost_micros by surface mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestAReleasedTaskShowsNoCost: a task canceled before any call is
// released; it shows cost_micros null, not 0.
func TestAReleasedTaskShowsNoCost(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{noWorkers: true})
	key := e.owner("acme", accounts.RoleClient, 1_000_000)
	id := e.submit(key, "k", taskBody("abcdefgh", 100))
	if r := e.do(http.MethodPost, "/v1/tasks/"+id+"/cancel", key, nil, nil); r.status != http.StatusOK {
		t.Fatalf("cancel: %d %s", r.status, r.body)
	}
	if got := costField(t, e.do(http.MethodGet, "/v1/tasks/"+id, key, nil, nil)); got != "null" {
		t.Errorf("released task cost_micros = %s, want null", got)
	}
}

// costField is the raw cost_micros of a JSON object answered in r.
func costField(t *testing.T, r response) string {
	t.Helper()
	if r.status != http.StatusOK {
		t.Fatalf("%d %s", r.status, r.body)
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(r.body, &obj); err != nil {
		t.Fatalf("%v in %s", err, r.body)
	}
	raw, ok := obj["cost_micros"]
	if !ok {
		return "absent"
	}
	return string(raw)
}

// onlyOf is the one entry of a listing answered in r, as a response.
func onlyOf(t *testing.T, r response) response {
	t.Helper()
	var list struct {
		Data []json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(r.body, &list); err != nil || len(list.Data) != 1 {
		t.Fatalf("listing: %d %s (%v), want one entry", r.status, r.body, err)
	}
	return response{status: r.status, body: list.Data[0]}
}

// csvCost is the cost_micros cell of task id's row in usage.csv.
func csvCost(t *testing.T, r response, id string) string {
	t.Helper()
	rows, err := csv.NewReader(bytes.NewReader(r.body)).ReadAll()
	if r.status != http.StatusOK || err != nil || len(rows) < 2 {
		t.Fatalf("usage.csv: %d %s (%v)", r.status, r.body, err)
	}
	col := map[string]int{}
	for i, name := range rows[0] {
		col[name] = i
	}
	for _, row := range rows[1:] {
		if row[col["task_id"]] == id {
			return row[col["cost_micros"]]
		}
	}
	return "absent"
}
