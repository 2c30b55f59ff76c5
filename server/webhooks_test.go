package server_test

import (
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/tollgate/tollgate/accounts"
	"github.com/tollgate/tollgate/internal/eventually"
	"github.com/tollgate/tollgate/provider/fake"
)

// hook is one request a receiver got.
type hook struct {
	header http.Header
	body   []byte
}

// event is a delivery's body.
type event struct {
	Type      string `json:"type"`
	Timestamp string `json:"timestamp"`
	Data      struct {
		ID     string `json:"id"`
		Status string `json:"status"`
		Result *struct {
			Output string `json:"output"`
		} `json:"result"`
	} `json:"data"`
}

func (h hook) event(t *testing.T) event {
	t.Helper()
	var ev event
	if err := json.Unmarshal(h.body, &ev); err != nil {
		t.Fatalf("delivery body %q: %v", h.body, err)
	}
	return ev
}

// receiver is a webhook receiver: it keeps every request and answers 500
// to the first failFirst of them, 200 after.
type receiver struct {
	srv       *httptest.Server
	mu        sync.Mutex
	got       []hook
	failFirst int
}

func newReceiver(t *testing.T, failFirst int) *receiver {
	r := &receiver{failFirst: failFirst}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.got = append(r.got, hook{header: req.Header.Clone(), body: body})
		n := len(r.got)
		r.mu.Unlock()
		if n <= r.failFirst {
			http.Error(w, "not now", http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) hooks() []hook {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]hook(nil), r.got...)
}

// waitFor waits until the receiver got n requests and returns them.
func (r *receiver) waitFor(t *testing.T, n int) []hook {
	t.Helper()
	eventually.Wait(t, "webhook deliveries", func() bool { return len(r.hooks()) >= n })
	return r.hooks()
}

// verify checks h with the Standard Webhooks reference library, an
// implementation independent of Tollgate's, under secret.
func verify(t *testing.T, h hook, secret string, checkTime bool) error {
	t.Helper()
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		t.Fatalf("secret %q refused by the reference library: %v", secret, err)
	}
	if checkTime {
		return wh.Verify(h.body, h.header)
	}
	return wh.VerifyIgnoringTimestamp(h.body, h.header)
}

// putWebhook registers url for owner's events and returns the secret.
func putWebhook(t *testing.T, e *env, key, owner, url string, events ...string) string {
	t.Helper()
	if len(events) == 0 {
		events = []string{"task.succeeded", "task.failed", "task.canceled"}
	}
	body, _ := json.Marshal(map[string]any{"url": url, "events": events})
	r := e.do(http.MethodPut, "/v1/owners/"+owner+"/webhook", key, body, nil)
	if r.status != http.StatusCreated {
		t.Fatalf("PUT webhook: %d %s", r.status, r.body)
	}
	secret, _ := r.json(t)["secret"].(string)
	if !strings.HasPrefix(secret, "whsec_") {
		t.Fatalf("PUT webhook answered secret %q, want whsec_…", secret)
	}
	return secret
}

type deliveryRow struct {
	WebhookID  string  `json:"webhook_id"`
	EventType  string  `json:"event_type"`
	TaskID     string  `json:"task_id"`
	State      string  `json:"state"`
	StatusCode *int    `json:"status_code"`
	Error      *string `json:"error"`
	Tries      int     `json:"tries"`
}

func deliveries(t *testing.T, e *env, key, owner string) []deliveryRow {
	t.Helper()
	r := e.do(http.MethodGet, "/v1/owners/"+owner+"/webhook/deliveries?limit=50", key, nil, nil)
	if r.status != http.StatusOK {
		t.Fatalf("GET deliveries: %d %s", r.status, r.body)
	}
	var out struct{ Deliveries []deliveryRow }
	if err := json.Unmarshal(r.body, &out); err != nil {
		t.Fatal(err)
	}
	return out.Deliveries
}

// TestWebhookDeliversTaskEnds: a succeeded and a failed task each reach
// the receiver once, signed (verified by the reference library), typed
// after the task's end and carrying the task as GET shows it; an owner
// without a webhook writes no event.
func TestWebhookDeliversTaskEnds(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{maxAttempts: 1})
	key := e.owner("acme", accounts.RoleClient, 1_000_000)
	quiet := e.owner("quiet", accounts.RoleClient, 1_000_000)
	rcv := newReceiver(t, 0)
	secret := putWebhook(t, e, key, "acme", rcv.srv.URL+"/hooks/tollgate")
	if r := e.do(http.MethodGet, "/v1/owners/acme/webhook", key, nil, nil); r.status != http.StatusOK || strings.Contains(string(r.body), "whsec_") {
		t.Fatalf("GET webhook: %d %s, want 200 without the secret", r.status, r.body)
	}

	ok := finishedTask(t, e, key, "ok", "say hello")
	finishedTask(t, e, quiet, "ok", "say hello")
	e.fake.Script(fake.Scripted{Status: 400, Body: `{"error":{"message":"too long","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`})
	failed := e.waitFinished(key, e.submit(key, "bad", taskBody("too long", 10)))
	if failed.Status != "failed" || ok.Status != "succeeded" {
		t.Fatalf("statuses %s and %s, want succeeded and failed", ok.Status, failed.Status)
	}

	got := rcv.waitFor(t, 2)
	want := map[string]string{ok.ID: "task.succeeded", failed.ID: "task.failed"}
	for _, h := range got {
		if err := verify(t, h, secret, true); err != nil {
			t.Errorf("delivery does not verify: %v (headers %v)", err, h.header)
		}
		if ct := h.header.Get("Content-Type"); ct != "application/json" {
			t.Errorf("content-type %q", ct)
		}
		if id := h.header.Get("webhook-id"); !strings.HasPrefix(id, "msg_") {
			t.Errorf("webhook-id %q, want msg_…", id)
		}
		ev := h.event(t)
		if want[ev.Data.ID] != ev.Type || ev.Data.Status != strings.TrimPrefix(ev.Type, "task.") {
			t.Errorf("event %s for task %s (%s), want %s", ev.Type, ev.Data.ID, ev.Data.Status, want[ev.Data.ID])
		}
		if _, err := time.Parse(time.RFC3339, ev.Timestamp); err != nil {
			t.Errorf("timestamp %q: %v", ev.Timestamp, err)
		}
		delete(want, ev.Data.ID)
	}
	if len(want) != 0 || len(got) != 2 {
		t.Errorf("%d deliveries, missing %v", len(got), want)
	}
	// The task as its owner's GET shows it: the answer's text included.
	var get map[string]any
	json.Unmarshal(e.do(http.MethodGet, "/v1/tasks/"+ok.ID, key, nil, nil).body, &get)
	for _, h := range got {
		var ev map[string]any
		json.Unmarshal(h.body, &ev)
		data := ev["data"].(map[string]any)
		if data["id"] == ok.ID {
			gj, _ := json.Marshal(get)
			dj, _ := json.Marshal(data)
			if string(gj) != string(dj) {
				t.Errorf("event data differs from GET:\n got %s\nwant %s", dj, gj)
			}
		}
	}
	eventually.Wait(t, "deliveries recorded", func() bool {
		ds := deliveries(t, e, key, "acme")
		return len(ds) == 2 && ds[0].State == "delivered" && ds[1].State == "delivered"
	})
	var n int
	if err := e.pool.QueryRow(t.Context(), `SELECT count(*) FROM webhook_events WHERE owner_id = 'quiet'`).Scan(&n); err != nil || n != 0 {
		t.Errorf("events of an owner without a webhook: %d (%v), want 0", n, err)
	}
	// Counted just after the attempt is recorded.
	eventually.Wait(t, "2 delivered webhooks counted in metrics", func() bool {
		m := e.do(http.MethodGet, "/metrics", "", nil, nil)
		return strings.Contains(string(m.body), `tollgate_webhook_deliveries_total{outcome="delivered"} 2`)
	})
}

// TestWebhookRetriesWithTheSameID: a receiver that fails three times gets
// the fourth attempt, with the same webhook-id each time; a receiver that
// redirects has its answer counted as a failure (unreachable: it has never
// accepted a delivery) and the redirect's target is never called.
func TestWebhookRetriesWithTheSameID(t *testing.T) {
	t.Parallel()
	logs := &syncBuffer{}
	e := newEnv(t, envOptions{logs: logs})
	key := e.owner("acme", accounts.RoleClient, 1_000_000)
	rcv := newReceiver(t, 3)
	secret := putWebhook(t, e, key, "acme", rcv.srv.URL+"/in/hook-s3cret-path")
	task := finishedTask(t, e, key, "ok", "say hello")

	got := rcv.waitFor(t, 4)
	for i, h := range got {
		if err := verify(t, h, secret, true); err != nil {
			t.Errorf("attempt %d does not verify: %v", i+1, err)
		}
		if id := h.header.Get("webhook-id"); id != got[0].header.Get("webhook-id") {
			t.Errorf("attempt %d webhook-id %q, want %q as the first", i+1, id, got[0].header.Get("webhook-id"))
		}
	}
	eventually.Wait(t, "the delivery recorded", func() bool {
		ds := deliveries(t, e, key, "acme")
		return len(ds) == 1 && ds[0].State == "delivered" && ds[0].Tries == 4 && ds[0].TaskID == task.ID &&
			ds[0].WebhookID == got[0].header.Get("webhook-id")
	})

	t.Run("redirect", func(t *testing.T) {
		var reached sync.Mutex
		hit := 0
		target := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { reached.Lock(); hit++; reached.Unlock() }))
		t.Cleanup(target.Close)
		redirector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, target.URL, http.StatusTemporaryRedirect)
		}))
		t.Cleanup(redirector.Close)
		other := e.owner("moved", accounts.RoleClient, 1_000_000)
		putWebhook(t, e, other, "moved", redirector.URL)
		finishedTask(t, e, other, "ok", "say hello")
		// Attempts follow each other within milliseconds here: the event
		// may have been given up by the time it is read.
		eventually.Wait(t, "redirects counted as failures", func() bool {
			ds := deliveries(t, e, other, "moved")
			return len(ds) == 1 && ds[0].Tries >= 2 && (ds[0].State == "pending" || ds[0].State == "failed") &&
				ds[0].StatusCode == nil && ds[0].Error != nil && *ds[0].Error == "unreachable" // it never accepted a delivery
		})
		reached.Lock()
		defer reached.Unlock()
		if hit != 0 {
			t.Errorf("the redirect's target got %d requests, want 0", hit)
		}
	})
	// Failed attempts are logged without the URL, the secret or the
	// receiver's answer.
	if !strings.Contains(logs.String(), "webhook delivery failed") {
		t.Errorf("no failed delivery logged")
	}
	for _, leak := range []string{"hook-s3cret-path", "whsec_", "not now", strings.TrimPrefix(secret, "whsec_")} {
		if strings.Contains(logs.String(), leak) {
			t.Errorf("logs hold %q", leak)
		}
	}
}

// TestWebhookSurvivesAStoppedInstance: a task canceled on an instance
// that works no queue (as one killed right after the finish commits) has
// its event delivered by another instance started later on the same
// database; a task that has not finished has none.
func TestWebhookSurvivesAStoppedInstance(t *testing.T) {
	t.Parallel()
	first := newEnv(t, envOptions{noWorkers: true, queueOnly: true})
	key := first.owner("acme", accounts.RoleClient, 1_000_000)
	rcv := newReceiver(t, 0)
	secret := putWebhook(t, first, key, "acme", rcv.srv.URL)
	canceled := first.submit(key, "cancel-me", taskBody("never mind", 10))
	waiting := first.submit(key, "wait", taskBody("later", 10))
	if r := first.do(http.MethodPost, "/v1/tasks/"+canceled+"/cancel", key, nil, nil); r.status != http.StatusOK {
		t.Fatalf("cancel: %d %s", r.status, r.body)
	}
	// Another owner's event waits too, but its webhook is removed before
	// any delivery: the event is dropped, never sent.
	gone := first.owner("gone", accounts.RoleClient, 1_000_000)
	putWebhook(t, first, gone, "gone", rcv.srv.URL+"/gone")
	goneTask := first.submit(gone, "cancel-me", taskBody("never mind", 10))
	if r := first.do(http.MethodPost, "/v1/tasks/"+goneTask+"/cancel", gone, nil, nil); r.status != http.StatusOK {
		t.Fatalf("cancel: %d %s", r.status, r.body)
	}
	if r := first.do(http.MethodDelete, "/v1/owners/gone/webhook", gone, nil, nil); r.status != http.StatusNoContent {
		t.Fatalf("DELETE webhook: %d %s", r.status, r.body)
	}
	var events []string
	rows, err := first.pool.Query(t.Context(), `SELECT task_id::text || ' ' || type FROM webhook_events WHERE owner_id = 'acme' ORDER BY created_at`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var s string
		rows.Scan(&s)
		events = append(events, s)
	}
	if len(events) != 1 || events[0] != canceled+" task.canceled" {
		t.Fatalf("events before any delivery: %v, want only %s task.canceled (task %s has not finished)", events, canceled, waiting)
	}
	if n := len(rcv.hooks()); n != 0 {
		t.Fatalf("%d deliveries without a worker, want 0", n)
	}

	// The second instance delivers the canceled task's event and runs the
	// waiting task, whose end is announced once it has ended, as a
	// success. The two deliveries may arrive in either order: the task
	// can finish before the delivery queue's next poll.
	second := newEnv(t, envOptions{pool: first.pool})
	second.waitFinished(key, waiting)
	got := rcv.waitFor(t, 2)
	delivered := map[string]string{}
	for _, h := range got[:2] {
		ev := h.event(t)
		delivered[ev.Data.ID] = ev.Type
		if err := verify(t, h, secret, true); err != nil {
			t.Errorf("delivery of %s does not verify: %v", ev.Type, err)
		}
	}
	if want := map[string]string{canceled: "task.canceled", waiting: "task.succeeded"}; !maps.Equal(delivered, want) {
		t.Errorf("deliveries %v, want %v", delivered, want)
	}
	eventually.Wait(t, "the removed webhook's event dropped", func() bool {
		var state string
		err := second.pool.QueryRow(t.Context(), `SELECT state FROM webhook_events WHERE owner_id = 'gone'`).Scan(&state)
		return err == nil && state == "dropped"
	})
	for _, h := range rcv.hooks() {
		if ev := h.event(t); ev.Data.ID == goneTask {
			t.Errorf("the removed webhook's event was sent")
		}
	}
}

// TestWebhookRotationSignsWithBoth: for 24 hours after a rotation each
// delivery carries a signature with either secret, each verifying alone;
// after that only the new secret signs.
func TestWebhookRotationSignsWithBoth(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	start := time.Now().UTC().Truncate(time.Second)
	e.clock.Set(start)
	key := e.owner("acme", accounts.RoleClient, 1_000_000)
	rcv := newReceiver(t, 0)
	old := putWebhook(t, e, key, "acme", rcv.srv.URL)
	r := e.do(http.MethodPost, "/v1/owners/acme/webhook/rotate", key, nil, nil)
	if r.status != http.StatusOK {
		t.Fatalf("rotate: %d %s", r.status, r.body)
	}
	fresh, _ := r.json(t)["secret"].(string)
	if !strings.HasPrefix(fresh, "whsec_") || fresh == old {
		t.Fatalf("rotated secret %q, want a new whsec_ secret", fresh)
	}
	finishedTask(t, e, key, "during", "say hello")
	h := rcv.waitFor(t, 1)[0]
	if sigs := strings.Fields(h.header.Get("webhook-signature")); len(sigs) != 2 {
		t.Errorf("signatures during the overlap: %q, want two", h.header.Get("webhook-signature"))
	}
	for name, s := range map[string]string{"old": old, "new": fresh} {
		if err := verify(t, h, s, true); err != nil {
			t.Errorf("during the overlap the %s secret does not verify: %v", name, err)
		}
	}

	e.clock.Set(start.Add(24*time.Hour + time.Second))
	finishedTask(t, e, key, "after", "say hello again")
	h = rcv.waitFor(t, 2)[1]
	if sigs := strings.Fields(h.header.Get("webhook-signature")); len(sigs) != 1 {
		t.Errorf("signatures after the overlap: %q, want one", h.header.Get("webhook-signature"))
	}
	if err := verify(t, h, fresh, false); err != nil {
		t.Errorf("after the overlap the new secret does not verify: %v", err)
	}
	if err := verify(t, h, old, false); err == nil {
		t.Errorf("after the overlap the old secret still verifies")
	}
}

// TestWebhookInputAndAccess: what PUT refuses, by field, and who may
// manage whose webhook.
func TestWebhookInputAndAccess(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{noWorkers: true})
	key := e.owner("acme", accounts.RoleClient, 1_000_000)
	other := e.owner("globex", accounts.RoleClient, 1_000_000)
	admin := e.owner("ops", accounts.RoleAdmin, 0)
	cases := []struct{ name, body, field string }{
		{"ftp", `{"url":"ftp://example.com/x","events":["task.failed"]}`, "url"},
		{"javascript", `{"url":"javascript:alert(1)","events":["task.failed"]}`, "url"},
		{"relative", `{"url":"/hooks","events":["task.failed"]}`, "url"},
		{"user info", `{"url":"https://user:pw@example.com/","events":["task.failed"]}`, "url"},
		{"NUL", `{"url":"https://example.com/\u0000","events":["task.failed"]}`, "url"},
		{"too long", `{"url":"https://example.com/` + strings.Repeat("a", 2048) + `","events":["task.failed"]}`, "url"},
		{"no url", `{"events":["task.failed"]}`, "url"},
		{"url a number", `{"url":12,"events":["task.failed"]}`, "url"},
		{"unknown event", `{"url":"https://example.com/","events":["task.exploded"]}`, "events"},
		{"no events", `{"url":"https://example.com/","events":[]}`, "events"},
		{"events a string", `{"url":"https://example.com/","events":"task.failed"}`, "events"},
	}
	for _, c := range cases {
		r := e.do(http.MethodPut, "/v1/owners/acme/webhook", key, []byte(c.body), nil)
		if r.status != http.StatusBadRequest || !strings.Contains(string(r.body), `"`+c.field+`"`) {
			t.Errorf("%s: %d %s, want 400 naming %s", c.name, r.status, r.body, c.field)
		}
		if strings.Contains(c.name, "unknown") && !strings.Contains(string(r.body), "task.exploded") {
			t.Errorf("%s: %s does not name the event", c.name, r.body)
		}
	}
	putWebhook(t, e, key, "acme", "https://hooks.example.com/tollgate")
	for _, path := range []string{"/v1/owners/acme/webhook", "/v1/owners/acme/webhook/deliveries"} {
		if r := e.do(http.MethodGet, path, other, nil, nil); r.status != http.StatusForbidden {
			t.Errorf("another owner's GET %s: %d, want 403", path, r.status)
		}
		if r := e.do(http.MethodGet, path, admin, nil, nil); r.status != http.StatusOK {
			t.Errorf("an admin's GET %s: %d %s, want 200", path, r.status, r.body)
		}
	}
	for _, m := range []string{http.MethodDelete} {
		if r := e.do(m, "/v1/owners/acme/webhook", other, nil, nil); r.status != http.StatusForbidden {
			t.Errorf("another owner's %s: %d, want 403", m, r.status)
		}
	}
	if r := e.do(http.MethodPost, "/v1/owners/acme/webhook/rotate", other, nil, nil); r.status != http.StatusForbidden {
		t.Errorf("another owner's rotate: %d, want 403", r.status)
	}
	// A change keeps the secret and does not show it.
	r := e.do(http.MethodPut, "/v1/owners/acme/webhook", key, []byte(`{"url":"https://hooks.example.com/v2","events":["task.failed","task.failed"]}`), nil)
	if r.status != http.StatusOK || strings.Contains(string(r.body), "whsec_") || !strings.Contains(string(r.body), `"events":["task.failed"]`) {
		t.Errorf("PUT on an existing webhook: %d %s, want 200 without a secret", r.status, r.body)
	}
	if r := e.do(http.MethodGet, "/v1/owners/acme/webhook/deliveries?limit=0", key, nil, nil); r.status != http.StatusBadRequest {
		t.Errorf("limit=0: %d, want 400", r.status)
	}
	if r := e.do(http.MethodDelete, "/v1/owners/acme/webhook", admin, nil, nil); r.status != http.StatusNoContent {
		t.Errorf("admin DELETE: %d %s", r.status, r.body)
	}
	if r := e.do(http.MethodGet, "/v1/owners/acme/webhook", key, nil, nil); r.status != http.StatusNotFound {
		t.Errorf("GET after DELETE: %d, want 404", r.status)
	}
	if r := e.do(http.MethodPost, "/v1/owners/acme/webhook/rotate", key, nil, nil); r.status != http.StatusNotFound {
		t.Errorf("rotate without a webhook: %d, want 404", r.status)
	}
}

// TestWebhookCanceledWhileRunning: a task canceled while its call is in
// flight ends canceled when the call returns (recorded as a success is),
// and its event says so.
func TestWebhookCanceledWhileRunning(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	key := e.owner("acme", accounts.RoleClient, 1_000_000)
	rcv := newReceiver(t, 0)
	secret := putWebhook(t, e, key, "acme", rcv.srv.URL, "task.canceled")
	e.fake.Script(fake.Scripted{DelayMS: 4000})
	id := e.submit(key, "slow", taskBody("take your time", 10))
	eventually.Wait(t, "the task running", func() bool {
		return e.do(http.MethodGet, "/v1/tasks/"+id, key, nil, nil).task(t).Status == "running"
	})
	if r := e.do(http.MethodPost, "/v1/tasks/"+id+"/cancel", key, nil, nil); r.status != http.StatusAccepted {
		t.Fatalf("cancel a running task: %d %s, want 202", r.status, r.body)
	}
	if task := e.waitFinished(key, id); task.Status != "canceled" {
		t.Fatalf("status %s, want canceled", task.Status)
	}
	h := rcv.waitFor(t, 1)[0]
	if ev := h.event(t); ev.Type != "task.canceled" || ev.Data.ID != id {
		t.Errorf("event %s for %s, want task.canceled for %s", ev.Type, ev.Data.ID, id)
	}
	if err := verify(t, h, secret, true); err != nil {
		t.Errorf("delivery does not verify: %v", err)
	}
}
