package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/tollgate/tollgate/internal/eventually"
	"github.com/tollgate/tollgate/internal/testdb"
)

// TestServeDeliversWebhooksAfterARestart runs the program as deployed: an
// API-only instance (no queue workers) cancels a task, whose event it only
// writes; it stops; a full instance started afterwards on the same
// database delivers the event, signed so that the Standard Webhooks
// reference library verifies it.
func TestServeDeliversWebhooksAfterARestart(t *testing.T) {
	t.Parallel()
	dbURL := testdb.New(t)
	var mu sync.Mutex
	var got []*http.Request
	var bodies [][]byte
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got, bodies = append(got, r), append(bodies, b)
		mu.Unlock()
	}))
	t.Cleanup(rcv.Close)

	var out strings.Builder
	getenv := envFunc(map[string]string{"DATABASE_URL": dbURL})
	if err := run(context.Background(), []string{"keys", "create", "--owner", "acme", "--role", "client"}, getenv, strings.NewReader(""), &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	key := strings.TrimSpace(out.String())
	if err := run(context.Background(), []string{"budget", "set", "--owner", "acme", "--total-micros", "1000000"}, getenv, strings.NewReader(""), io.Discard, io.Discard); err != nil {
		t.Fatal(err)
	}

	client := &http.Client{Timeout: 30 * time.Second}
	call := func(base, method, path, body string, hdr map[string]string) (int, []byte) {
		t.Helper()
		req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Content-Type", "application/json")
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	start := func(role string) (base string, stop func()) {
		addr := freeAddr(t)
		env := envFunc(map[string]string{"DATABASE_URL": dbURL, "TOLLGATE_ADDR": addr, "TOLLGATE_RUN_ON_ARRIVAL": "off",
			"TOLLGATE_WEBHOOK_ALLOW": "127.0.0.1/32"}) // the receiver listens on loopback, set with a client key
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		logs := &syncBuffer{}
		go func() {
			done <- run(ctx, []string{"serve", "--role", role}, env, strings.NewReader(""), io.Discard, logs)
		}()
		base = "http://" + addr
		waitHealthy(t, client, base, done, logs)
		var once sync.Once
		stop = func() {
			once.Do(func() {
				cancel()
				select {
				case <-done:
				case <-time.After(time.Minute):
					t.Errorf("serve did not stop")
				}
			})
		}
		t.Cleanup(stop)
		return base, stop
	}

	api, stopAPI := start("api")
	status, body := call(api, http.MethodPut, "/v1/owners/acme/webhook", `{"url":"`+rcv.URL+`/in","events":["task.canceled"]}`, nil)
	if status != http.StatusCreated {
		t.Fatalf("PUT webhook: %d %s", status, body)
	}
	var hook struct{ Secret string }
	json.Unmarshal(body, &hook)
	status, body = call(api, http.MethodPost, "/v1/tasks", `{"messages":[{"role":"user","content":"never mind"}],"max_tokens":8}`, map[string]string{"Idempotency-Key": "k1"})
	if status != http.StatusAccepted {
		t.Fatalf("POST /v1/tasks: %d %s", status, body)
	}
	var task struct{ ID string }
	json.Unmarshal(body, &task)
	if status, body = call(api, http.MethodPost, "/v1/tasks/"+task.ID+"/cancel", "", nil); status != http.StatusOK {
		t.Fatalf("cancel: %d %s", status, body)
	}
	stopAPI()
	mu.Lock()
	n := len(got)
	mu.Unlock()
	if n != 0 {
		t.Fatalf("an API-only instance delivered %d events, want 0", n)
	}

	start("all")
	eventually.Wait(t, "the event delivered by the second instance", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(got) > 0
	})
	mu.Lock()
	defer mu.Unlock()
	wh, err := standardwebhooks.NewWebhook(hook.Secret)
	if err != nil {
		t.Fatal(err)
	}
	if err := wh.Verify(bodies[0], got[0].Header); err != nil {
		t.Errorf("delivery does not verify: %v", err)
	}
	var ev struct {
		Type string
		Data struct{ ID, Status string }
	}
	json.Unmarshal(bodies[0], &ev)
	if ev.Type != "task.canceled" || ev.Data.ID != task.ID || ev.Data.Status != "canceled" {
		t.Errorf("event %s", bodies[0])
	}
}
