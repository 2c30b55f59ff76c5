package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tollgate/tollgate/accounts"
	"github.com/tollgate/tollgate/provider/fake"
	"github.com/tollgate/tollgate/tasks"
)

func TestCreateTaskRunsItAndPollingSeesTheResult(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	key := e.owner("acme", accounts.RoleClient, 1_000_000)

	r := e.post(key, "order-1", taskBody("abcdefgh", 100), nil)
	if r.status != http.StatusAccepted {
		t.Fatalf("POST: %d %s, want 202", r.status, r.body)
	}
	created := r.task(t)
	if got, want := r.header.Get("Location"), "/v1/tasks/"+created.ID; got != want {
		t.Errorf("Location = %q, want %q", got, want)
	}
	// 8 bytes = 2 tokens + 4 framing at 1 micro, 100 output tokens at 2.
	if created.ReservedMicros != 206 {
		t.Errorf("reserved_micros = %d, want 206", created.ReservedMicros)
	}
	done := e.waitFinished(key, created.ID)
	if done.Status != tasks.StatusSucceeded || done.Result == nil {
		t.Fatalf("finished task = %+v, want succeeded with a result", done)
	}
	if done.Result.Output == "" || done.Result.Usage.Source != "reported" {
		t.Errorf("result = %+v, want output and reported usage", done.Result)
	}
	// The fake reports prompt tokens ceil(8/4)+4 = 6 and 16 completion tokens.
	if want := int64(6*1 + 16*2); done.Result.CostMicros != want {
		t.Errorf("cost_micros = %d, want %d", done.Result.CostMicros, want)
	}
	if done.Attempts != 1 || e.fake.CallCount() != 1 {
		t.Errorf("attempts = %d, provider calls = %d; want 1 and 1", done.Attempts, e.fake.CallCount())
	}
	if got, want := e.fake.Calls()[0].IdempotencyKey, created.ID+":1"; got != want {
		t.Errorf("provider Idempotency-Key = %q, want %q", got, want)
	}
	b := e.balance("acme")
	if b.ReservedMicros != 0 || b.SpentMicros != done.Result.CostMicros {
		t.Errorf("budget reserved=%d spent=%d; want 0 and %d", b.ReservedMicros, b.SpentMicros, done.Result.CostMicros)
	}
	e.checkInvariants()
}

func TestPreferWaitAnswersWithTheFinishedTask(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	key := e.owner("acme", accounts.RoleClient, 1_000_000)

	r := e.post(key, "k", taskBody("hello", 10), map[string]string{"Prefer": "wait=20"})
	if r.status != http.StatusOK {
		t.Fatalf("POST with Prefer: wait: %d %s, want 200", r.status, r.body)
	}
	if r.task(t).Status != tasks.StatusSucceeded {
		t.Errorf("status = %s, want succeeded", r.task(t).Status)
	}
	if got := r.header.Get("Preference-Applied"); got != "wait=20" {
		t.Errorf("Preference-Applied = %q, want wait=20", got)
	}
	if got := r.header.Get("Idempotent-Replayed"); got != "false" {
		t.Errorf("Idempotent-Replayed = %q, want false", got)
	}
}

// GET with Prefer: wait is a long poll: it answers once the task finishes,
// here on another instance (its own service and workers on the same
// database), whose announcement reaches this one.
func TestGetWithPreferWaitIsALongPoll(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{noWorkers: true})
	key := e.owner("acme", accounts.RoleClient, 1_000_000)
	id := e.post(key, "k", taskBody("hello", 10), nil).task(t).ID

	r := e.do(http.MethodGet, "/v1/tasks/"+id, key, nil, map[string]string{"Prefer": "wait=1"})
	if r.status != http.StatusOK || r.task(t).Status != tasks.StatusQueued || r.header.Get("Preference-Applied") != "wait=1" {
		t.Fatalf("GET wait=1 with no worker: %d %s (Preference-Applied %q), want 200 queued, wait=1", r.status, r.body, r.header.Get("Preference-Applied"))
	}
	// A wait it cannot honour is ignored (RFC 7240): answered at once.
	if r := e.do(http.MethodGet, "/v1/tasks/"+id, key, nil, map[string]string{"Prefer": "wait=soon"}); r.status != http.StatusOK || r.header.Get("Preference-Applied") != "" {
		t.Errorf("GET with Prefer: wait=soon: %d (Preference-Applied %q), want 200 without it", r.status, r.header.Get("Preference-Applied"))
	}

	done := make(chan response, 1)
	go func() {
		done <- e.do(http.MethodGet, "/v1/tasks/"+id, key, nil, map[string]string{"Prefer": "wait=60"})
	}()
	restartWorkers(t, e)
	r = <-done
	if r.status != http.StatusOK || r.task(t).Status != tasks.StatusSucceeded {
		t.Fatalf("long poll: %d %s, want 200 succeeded", r.status, r.body)
	}
}

func TestSameKeySameRequestReplaysTheTask(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	key := e.owner("acme", accounts.RoleClient, 1_000_000)

	first := e.post(key, "same", taskBody("hello", 10), nil)
	if first.status != http.StatusAccepted {
		t.Fatalf("first POST: %d %s", first.status, first.body)
	}
	id := first.task(t).ID
	e.waitFinished(key, id)

	// Same JSON, keys in another order and other whitespace: the same request.
	reordered := []byte(`{ "max_tokens": 10, "messages": [{"content": "hello", "role": "user"}], "model": "` + testModel + `" }`)
	for i, body := range [][]byte{taskBody("hello", 10), reordered} {
		r := e.post(key, "same", body, nil)
		if r.status != http.StatusOK {
			t.Fatalf("replay %d: %d %s, want 200 for a finished task", i, r.status, r.body)
		}
		if got := r.task(t).ID; got != id {
			t.Errorf("replay %d returned task %s, want %s", i, got, id)
		}
		if r.header.Get("Idempotent-Replayed") != "true" {
			t.Errorf("replay %d: Idempotent-Replayed = %q, want true", i, r.header.Get("Idempotent-Replayed"))
		}
	}
	if n := e.fake.CallCount(); n != 1 {
		t.Errorf("provider calls = %d, want 1", n)
	}
	if n := e.scalar(`SELECT count(*) FROM budget_ledger WHERE kind = 'reserve'`); n != 1 {
		t.Errorf("reservations = %d, want 1", n)
	}
}

func TestFiftyConcurrentIdenticalPostsMakeOneTaskAndOneCall(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	key := e.owner("acme", accounts.RoleClient, 1_000_000)

	const n = 50
	var wg sync.WaitGroup
	results := make([]response, n)
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			results[i] = e.post(key, "storm", taskBody("same body", 10), nil)
		}()
	}
	close(start)
	wg.Wait()

	ids := map[string]int{}
	replayed := 0
	for _, r := range results {
		if r.status != http.StatusAccepted && r.status != http.StatusOK {
			t.Fatalf("POST: %d %s", r.status, r.body)
		}
		ids[r.task(t).ID]++
		if r.header.Get("Idempotent-Replayed") == "true" {
			replayed++
		}
	}
	if len(ids) != 1 || replayed != n-1 {
		t.Fatalf("got %d distinct tasks and %d replays; want 1 and %d", len(ids), replayed, n-1)
	}
	for id := range ids {
		e.waitFinished(key, id)
	}
	if c := e.fake.CallCount(); c != 1 {
		t.Errorf("provider calls = %d, want 1", c)
	}
	if c := e.scalar(`SELECT count(*) FROM tasks`); c != 1 {
		t.Errorf("tasks = %d, want 1", c)
	}
	e.checkInvariants()
}

func TestSameKeyDifferentRequestIsRefusedAndChangesNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{noWorkers: true})
	key := e.owner("acme", accounts.RoleClient, 1_000_000)

	first := e.post(key, "k1", taskBody("original", 10), nil)
	if first.status != http.StatusAccepted {
		t.Fatalf("first POST: %d %s", first.status, first.body)
	}
	snapshot := func() string {
		var s string
		err := e.pool.QueryRow(t.Context(), `
			SELECT (SELECT json_agg(t ORDER BY id)::text FROM tasks t) ||
			       (SELECT json_agg(l ORDER BY id)::text FROM budget_ledger l) ||
			       (SELECT json_agg(b ORDER BY id)::text FROM budget_periods b)`).Scan(&s)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	before := snapshot()
	for _, body := range [][]byte{taskBody("changed", 10), taskBody("original", 11)} {
		r := e.post(key, "k1", body, nil)
		if r.status != http.StatusUnprocessableEntity || r.problemCode(t) != "idempotency_key_reused" {
			t.Fatalf("POST changed body: %d %s, want 422 idempotency_key_reused", r.status, r.body)
		}
	}
	if diff := cmp.Diff(before, snapshot()); diff != "" {
		t.Errorf("database changed after a refused request (-before +after):\n%s", diff)
	}
}

func TestOwnersSeeOnlyTheirOwnTasks(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{noWorkers: true})
	alice := e.owner("alice", accounts.RoleClient, 1_000_000)
	bob := e.owner("bob", accounts.RoleClient, 1_000_000)

	ra := e.post(alice, "shared-key", taskBody("alice's", 10), nil)
	rb := e.post(bob, "shared-key", taskBody("bob's", 10), nil)
	if ra.status != http.StatusAccepted || rb.status != http.StatusAccepted {
		t.Fatalf("same key for two owners must be two tasks: %d, %d", ra.status, rb.status)
	}
	aliceTask := ra.task(t).ID
	for _, path := range []string{"/v1/tasks/" + aliceTask, "/v1/tasks/" + aliceTask + "/replay"} {
		r := e.do(http.MethodGet, path, bob, nil, nil)
		if r.status != http.StatusNotFound || r.problemCode(t) != "not_found" {
			t.Errorf("bob GET %s: %d %s, want 404", path, r.status, r.body)
		}
	}
	list := e.do(http.MethodGet, "/v1/tasks", bob, nil, nil).json(t)
	data := list["data"].([]any)
	if len(data) != 1 || data[0].(map[string]any)["id"] != rb.task(t).ID {
		t.Errorf("bob's list = %v, want only bob's task", data)
	}
}

func TestListPagesNewestFirst(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{noWorkers: true})
	key := e.owner("acme", accounts.RoleClient, 1_000_000)
	var want []string
	for i := range 5 {
		r := e.post(key, "k"+strings.Repeat("x", i), taskBody("m", 5), nil)
		want = append([]string{r.task(t).ID}, want...)
	}
	var got []string
	cursor := ""
	for pages := 0; pages < 10; pages++ {
		path := "/v1/tasks?limit=2"
		if cursor != "" {
			path += "&cursor=" + cursor
		}
		r := e.do(http.MethodGet, path, key, nil, nil)
		if r.status != http.StatusOK {
			t.Fatalf("list: %d %s", r.status, r.body)
		}
		m := r.json(t)
		for _, d := range m["data"].([]any) {
			got = append(got, d.(map[string]any)["id"].(string))
		}
		next, _ := m["next_cursor"].(string)
		if next == "" {
			break
		}
		cursor = next
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("listed ids mismatch (-want +got):\n%s", diff)
	}
	if r := e.do(http.MethodGet, "/v1/tasks?cursor=not-a-cursor", key, nil, nil); r.status != http.StatusBadRequest {
		t.Errorf("bad cursor: %d, want 400", r.status)
	}
}

// TestAdmissionAnswersAsAReadWould: the 202 an admission answers is the
// task exactly as a GET, and a replayed POST, read it back from the
// database: metadata with nested values, decimals, large and exotic
// numbers and non-ASCII text included, for a task left queued and for one
// whose first attempt runs on arrival (its call hanging, so the task
// stays as admitted).
func TestAdmissionAnswersAsAReadWould(t *testing.T) {
	t.Parallel()
	body := []byte(`{"model": "` + testModel + `", "max_tokens": 20, "deadline_s": 600,
		"messages": [{"role": "user", "content": "abcdefgh"}],
		"metadata": {"n": 1.50, "e": 1e2, "big": 12345678901234567890, "neg": -0.0,
		             "nested": {"a": [1, "x", null, true, {"b": "é ü 漢"}]}, "empty": {}, "s": "line\nbreak \u2028"}}`)
	for _, tc := range []struct {
		name   string
		opts   envOptions
		status tasks.Status
	}{
		{"queued", envOptions{noWorkers: true, queueOnly: true}, tasks.StatusQueued},
		{"run on arrival", envOptions{requestTimeout: time.Minute}, tasks.StatusRunning},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, tc.opts)
			key := e.owner("acme", accounts.RoleClient, 1_000_000)
			e.fake.Script(fake.Scripted{Hang: true})
			created := e.post(key, "k", body, nil)
			if created.status != http.StatusAccepted {
				t.Fatalf("POST: %d %s", created.status, created.body)
			}
			id := created.task(t).ID
			if tc.status == tasks.StatusRunning {
				e.waitFor("the call on arrival to start", func() bool { return e.fake.CallCount() == 1 })
			}
			want := generic(t, created.body)
			if got := want["status"]; got != string(tc.status) {
				t.Fatalf("status = %v, want %s", got, tc.status)
			}
			read := e.do(http.MethodGet, "/v1/tasks/"+id, key, nil, nil)
			if diff := cmp.Diff(want, generic(t, read.body)); diff != "" {
				t.Errorf("GET differs from the 202 (-202 +GET):\n%s", diff)
			}
			replayed := e.post(key, "k", body, nil)
			if diff := cmp.Diff(want, generic(t, replayed.body)); diff != "" {
				t.Errorf("replayed POST differs from the 202 (-202 +replay):\n%s", diff)
			}
			meta, _ := want["metadata"].(map[string]any)
			if meta["n"] != json.Number("1.5") || meta["big"] != json.Number("12345678901234567000") {
				t.Errorf("metadata numbers = %v, %v", meta["n"], meta["big"])
			}
			// The hanging call ends with the fake.
			e.fake.Close()
			e.waitFor("the call on arrival to end", func() bool { return e.tasks.RunningOnArrival() == 0 })
		})
	}
}

// generic decodes a JSON body keeping numbers as written.
func generic(t *testing.T, body []byte) map[string]any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		t.Fatalf("decode %q: %v", body, err)
	}
	return m
}

// TestListFilters: each filter of GET /v1/tasks narrows the list, with the
// others and with pagination; an unknown parameter or a bad value is a 400
// naming it, never an unfiltered list.
func TestListFilters(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{noWorkers: true, queueOnly: true})
	key := e.owner("acme", accounts.RoleClient, 1_000_000)
	var ids []string // oldest first
	for i := range 4 {
		ids = append(ids, e.submit(key, fmt.Sprintf("f%d", i), taskBody("abcd", 5)))
	}
	if r := e.do(http.MethodPost, "/v1/tasks/"+ids[1]+"/cancel", key, nil, nil); r.status != http.StatusOK {
		t.Fatalf("cancel: %d %s", r.status, r.body)
	}
	var second time.Time
	if err := e.pool.QueryRow(context.Background(), `SELECT created_at FROM tasks WHERE id = $1`, ids[1]).Scan(&second); err != nil {
		t.Fatal(err)
	}
	at := url.QueryEscape(second.Format(time.RFC3339Nano))
	list := func(query string) []string {
		t.Helper()
		var got []string
		path := "/v1/tasks?limit=1&" + query
		for range 10 {
			r := e.do(http.MethodGet, path, key, nil, nil)
			if r.status != http.StatusOK {
				t.Fatalf("GET %s: %d %s", path, r.status, r.body)
			}
			m := r.json(t)
			for _, d := range m["data"].([]any) {
				got = append(got, d.(map[string]any)["id"].(string))
			}
			next, _ := m["next_cursor"].(string)
			if next == "" {
				break
			}
			path = "/v1/tasks?limit=1&" + query + "&cursor=" + next
		}
		return got
	}
	for _, tc := range []struct {
		query string
		want  []string
	}{
		{"status=queued", []string{ids[3], ids[2], ids[0]}},
		{"status=canceled", []string{ids[1]}},
		{"status=failed", nil},
		{"model=" + testModel, []string{ids[3], ids[2], ids[1], ids[0]}},
		{"model=no-such-model", nil},
		{"workload=w", nil},
		{"created_after=" + at, []string{ids[3], ids[2]}},
		{"created_before=" + at, []string{ids[0]}},
		{"created_after=" + at + "&status=queued&model=" + testModel, []string{ids[3], ids[2]}},
	} {
		if diff := cmp.Diff(tc.want, list(tc.query)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.query, diff)
		}
	}
	for _, tc := range []struct{ query, field string }{
		{"state=failed", "state"},
		{"status=done", "status"},
		{"status=QUEUED", "status"},
		{"created_after=yesterday", "created_after"},
		{"created_before=2026-13-01T00:00:00Z", "created_before"},
	} {
		r := e.do(http.MethodGet, "/v1/tasks?"+tc.query, key, nil, nil)
		if r.status != http.StatusBadRequest || !slices.Contains(problemFields(t, r), tc.field) {
			t.Errorf("GET /v1/tasks?%s: %d %s, want 400 naming %s", tc.query, r.status, r.body, tc.field)
		}
	}
}
