package server_test

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/tollgate/tollgate/accounts"
	"github.com/tollgate/tollgate/internal/eventually"
	"github.com/tollgate/tollgate/provider/fake"
	"github.com/tollgate/tollgate/redact"
	"github.com/tollgate/tollgate/webhooks"
)

// fakeNames is a resolver whose answers a test may change.
type fakeNames struct {
	mu sync.Mutex
	m  map[string]string
}

func (n *fakeNames) set(host, addr string) { n.mu.Lock(); n.m[host] = addr; n.mu.Unlock() }

func (n *fakeNames) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	a, ok := n.m[host]
	if !ok {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	return []netip.Addr{netip.MustParseAddr(a)}, nil
}

// TestWebhookTargetsByKeyRole: at PUT a cloud metadata address, in any
// form or behind a name, is refused from any key; a private one is
// refused from an owner's own key and taken from an admin's, recorded as
// private_allowed; TOLLGATE_WEBHOOK_ALLOW opens listed private ranges to
// owners' keys, never metadata.
func TestWebhookTargetsByKeyRole(t *testing.T) {
	t.Parallel()
	res := &fakeNames{m: map[string]string{"metadata.test": "169.254.169.254", "lan.test": "192.168.1.20", "public.test": "93.184.216.34"}}
	e := newEnv(t, envOptions{noWorkers: true, webhookAddresses: &webhooks.AddressPolicy{Resolver: res,
		Allow: []netip.Prefix{netip.MustParsePrefix("10.20.0.0/16")}}})
	admin := e.owner("ops", accounts.RoleAdmin, 0)
	key := e.owner("acme", accounts.RoleClient, 1_000_000)
	metadata := []string{"http://169.254.169.254/latest/meta-data/", "http://169.254.170.2/v2/credentials", "http://[fd00:ec2::254]/",
		"http://100.100.100.200/", "http://192.0.0.192/", "http://[64:ff9b::a9fe:a9fe]/", "http://[64:ff9b::169.254.169.254]/",
		"http://[2002:a9fe:a9fe::1]/", "http://[::ffff:169.254.169.254]/", "http://[fe80::1]/", "http://0.0.0.0:8080/", "http://metadata.test/"}
	private := []string{"http://10.0.0.5:8080/in", "http://127.0.0.1:9/", "http://[::1]/", "http://192.168.1.1/", "http://172.16.0.1/",
		"http://100.64.0.1/", "http://[fd12::1]/", "http://[::ffff:10.0.0.5]/", "http://[64:ff9b::10.0.0.5]/", "http://lan.test/"}
	put := func(k, url string) (int, map[string]any, string) {
		body, _ := json.Marshal(map[string]any{"url": url, "events": []string{"task.succeeded"}})
		r := e.do(http.MethodPut, "/v1/owners/acme/webhook", k, body, nil)
		var out map[string]any
		json.Unmarshal(r.body, &out)
		return r.status, out, string(r.body)
	}
	for _, u := range metadata {
		for name, k := range map[string]string{"client": key, "admin": admin} {
			if st, _, body := put(k, u); st != http.StatusBadRequest || !strings.Contains(body, `"url"`) {
				t.Errorf("%s PUT %s: %d %s, want 400 naming url", name, u, st, body)
			}
		}
	}
	for _, u := range private {
		if st, _, body := put(key, u); st != http.StatusBadRequest || !strings.Contains(body, "admin key") {
			t.Errorf("client PUT %s: %d %s, want 400 saying an admin key may", u, st, body)
		}
		if st, out, body := put(admin, u); (st != http.StatusOK && st != http.StatusCreated) || out["private_allowed"] != true {
			t.Errorf("admin PUT %s: %d %s, want it taken with private_allowed", u, st, body)
		}
	}
	for _, u := range []string{"https://public.test/in", "http://93.184.216.34/", "https://unresolved.test/in", "http://10.20.1.2/in", "http://[::ffff:10.20.1.2]/"} {
		if st, out, body := put(key, u); st != http.StatusOK || out["private_allowed"] != false {
			t.Errorf("client PUT %s: %d %s, want 200 without private_allowed", u, st, body)
		}
	}
	if n := e.scalar(`SELECT count(*) FROM webhook_endpoints WHERE url LIKE '%169.254%' OR url LIKE '%metadata%' OR url LIKE '%a9fe%'`); n != 0 {
		t.Errorf("%d metadata URLs stored, want 0", n)
	}
	e.checkInvariants()
}

// TestWebhookDialRefusesWhatANameResolvesTo: a name that resolved to a
// public address at PUT and resolves to loopback at delivery (DNS
// rebinding) is refused when dialled: the receiver listening there gets
// nothing, and the deliveries list says only "unreachable". The same
// receiver, set by an admin, is reached.
func TestWebhookDialRefusesWhatANameResolvesTo(t *testing.T) {
	t.Parallel()
	res := &fakeNames{m: map[string]string{"localhost": "93.184.216.34"}}
	e := newEnv(t, envOptions{maxAttempts: 1, webhookAddresses: &webhooks.AddressPolicy{Resolver: res}})
	admin := e.owner("ops", accounts.RoleAdmin, 0)
	key := e.owner("acme", accounts.RoleClient, 1_000_000)
	rcv := newReceiver(t, 0)
	url := "http://localhost:" + rcv.srv.URL[strings.LastIndex(rcv.srv.URL, ":")+1:] + "/in"
	putWebhook(t, e, key, "acme", url)
	res.set("localhost", "127.0.0.1")
	finishedTask(t, e, key, "ok", "say hello")
	eventually.Wait(t, "the attempts recorded", func() bool {
		ds := deliveries(t, e, key, "acme")
		return len(ds) == 1 && (ds[0].Tries >= 2 || ds[0].State != "pending")
	})
	if n := len(rcv.hooks()); n != 0 {
		t.Fatalf("the receiver behind the rebound name got %d requests, want 0", n)
	}
	if d := deliveries(t, e, key, "acme")[0]; d.Error == nil || *d.Error != "unreachable" || d.StatusCode != nil {
		t.Errorf("delivery %+v, want error unreachable and no status", d)
	}
	eventually.Wait(t, "refusals counted", func() bool {
		return strings.Contains(string(e.do(http.MethodGet, "/metrics", "", nil, nil).body), `tollgate_webhook_deliveries_total{outcome="blocked_address"}`)
	})

	body, _ := json.Marshal(map[string]any{"url": url, "events": []string{"task.succeeded"}})
	other := e.owner("lan", accounts.RoleClient, 1_000_000)
	if r := e.do(http.MethodPut, "/v1/owners/lan/webhook", admin, body, nil); r.status != http.StatusCreated {
		t.Fatalf("admin PUT: %d %s", r.status, r.body)
	}
	finishedTask(t, e, other, "ok", "say hello")
	rcv.waitFor(t, 1)
	e.checkInvariants()
}

// TestWebhookDeliveriesAreNoPortScanner: a closed port, a service that
// is not HTTP, an HTTP service answering 404 and an address refused at
// dial all read alike in the deliveries list, "unreachable" without a
// status; once a URL has accepted a delivery, its failures show their
// status.
func TestWebhookDeliveriesAreNoPortScanner(t *testing.T) {
	t.Parallel()
	res := &fakeNames{m: map[string]string{"rebound.test": "93.184.216.34"}}
	e := newEnv(t, envOptions{maxAttempts: 1, webhookAddresses: &webhooks.AddressPolicy{Resolver: res,
		Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}})

	closed, _ := net.Listen("tcp", "127.0.0.1:0")
	closedAddr := closed.Addr().String()
	closed.Close()
	garbage, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { garbage.Close() })
	go func() {
		for {
			c, err := garbage.Accept()
			if err != nil {
				return
			}
			c.Write([]byte("SSH-2.0-OpenSSH_9.6\r\n"))
			c.Close()
		}
	}()
	notFound := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(notFound.Close)
	targets := map[string]string{
		"closed":   "http://" + closedAddr + "/",
		"ssh":      "http://" + garbage.Addr().String() + "/",
		"notfound": notFound.URL + "/",
		"refused":  "http://rebound.test:" + closedAddr[strings.LastIndex(closedAddr, ":")+1:] + "/",
	}
	keys := map[string]string{}
	for owner, u := range targets {
		keys[owner] = e.owner(owner, accounts.RoleClient, 1_000_000)
		putWebhook(t, e, keys[owner], owner, u)
	}
	res.set("rebound.test", "10.0.0.1")
	for owner := range targets {
		finishedTask(t, e, keys[owner], "ok", "say hello")
	}
	for owner := range targets {
		eventually.Wait(t, owner+"'s attempts recorded", func() bool {
			ds := deliveries(t, e, keys[owner], owner)
			return len(ds) == 1 && ds[0].Tries >= 2
		})
		d := deliveries(t, e, keys[owner], owner)[0]
		if d.Error == nil || *d.Error != "unreachable" || d.StatusCode != nil {
			t.Errorf("%s: delivery %+v (error %v), want unreachable without a status", owner, d, deref(d.Error))
		}
	}

	// A receiver that accepted a delivery shows why it fails later.
	var fail atomic.Bool
	flaky := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if fail.Load() {
			http.Error(w, "down", http.StatusInternalServerError)
		}
	}))
	t.Cleanup(flaky.Close)
	key := e.owner("flaky", accounts.RoleClient, 1_000_000)
	putWebhook(t, e, key, "flaky", flaky.URL)
	first := finishedTask(t, e, key, "ok-1", "say hello")
	eventually.Wait(t, "the first delivery", func() bool {
		ds := deliveries(t, e, key, "flaky")
		return len(ds) == 1 && ds[0].State == "delivered" && ds[0].TaskID == first.ID
	})
	fail.Store(true)
	finishedTask(t, e, key, "ok-2", "say hello again")
	eventually.Wait(t, "the failed delivery shows its status", func() bool {
		ds := deliveries(t, e, key, "flaky")
		return len(ds) == 2 && ds[0].Tries >= 1 && ds[0].Error != nil && *ds[0].Error == "http_status" &&
			ds[0].StatusCode != nil && *ds[0].StatusCode == http.StatusInternalServerError
	})
	e.checkInvariants()
}

func deref(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}

// TestWebhookBodiesFollowThePrivacyPolicy: deliveries to a receiver for
// an owner under each policy, the answer holding a secret word, an
// address and a tool call. hash-only: none of the prompt's or answer's
// text, only ids, status, cost, usage and digests; redact: the address a
// placeholder, as the replay record holds the answer; full: the task as
// GET shows it.
func TestWebhookBodiesFollowThePrivacyPolicy(t *testing.T) {
	t.Parallel()
	for _, policy := range []redact.Policy{redact.PolicyHashOnly, redact.PolicyRedact, redact.PolicyFull} {
		t.Run(string(policy), func(t *testing.T) {
			t.Parallel()
			webhookBodyFollowsThePolicy(t, policy)
		})
	}
}

func webhookBodyFollowsThePolicy(t *testing.T, policy redact.Policy) {
	e := newEnv(t, envOptions{maxAttempts: 1})
	key := e.owner("acme", accounts.RoleClient, 1_000_000)
	admin := e.owner("ops", accounts.RoleAdmin, 0)
	if r := e.do(http.MethodPut, "/v1/owners/acme/privacy", admin, []byte(`{"redaction_policy":"`+string(policy)+`","body_retention_days":30,"metadata_retention_days":400}`), nil); r.status != http.StatusOK {
		t.Fatalf("set policy %s: %d %s", policy, r.status, r.body)
	}
	rcv := newReceiver(t, 0)
	putWebhook(t, e, key, "acme", rcv.srv.URL)
	const word, mail, toolWord = "ZEBRA-LAUNCH-CODE", "canary.person@example.com", "OCELOT-TOOL-ARG"
	answer := "The code is " + word + "; write to " + mail + "."
	e.fake.Script(fake.Scripted{Status: 200, Body: `{"id":"x","object":"chat.completion","created":1,"model":"test-model",` +
		`"choices":[{"index":0,"message":{"role":"assistant","content":` + mustQuote(answer) + `,"tool_calls":[{"id":"call_1","type":"function",` +
		`"function":{"name":"send_mail","arguments":` + mustQuote(`{"to":"`+mail+`","note":"`+toolWord+`"}`) + `}}]},"finish_reason":"stop"}],` +
		`"usage":{"prompt_tokens":12,"completion_tokens":9,"total_tokens":21}}`})
	prompt := "Ask " + mail + " for the PROMPT-WALRUS word"
	body, _ := json.Marshal(map[string]any{"model": testModel, "max_tokens": 50,
		"messages": []map[string]string{{"role": "user", "content": prompt}}, "metadata": map[string]any{"ticket": "META-MARMOT"}})
	task := e.waitFinished(key, e.post(key, "privacy-hook", body, map[string]string{"Prefer": "wait=30"}).task(t).ID)
	if task.Status != "succeeded" || task.Result == nil || task.Result.Output != answer {
		t.Fatalf("task %s %+v, want succeeded with the answer", task.Status, task.Result)
	}
	h := rcv.waitFor(t, 1)[0]
	got := string(h.body)
	var ev struct {
		Data struct {
			ID     string
			Status string
			Result struct {
				Output     string
				CostMicros int64 `json:"cost_micros"`
				Usage      struct {
					OutputTokens int `json:"output_tokens"`
				}
				Message struct {
					ToolCalls []struct {
						Function struct{ Name, Arguments string }
					} `json:"tool_calls"`
				}
			}
		}
	}
	if err := json.Unmarshal(h.body, &ev); err != nil {
		t.Fatal(err)
	}
	if ev.Data.ID != task.ID || ev.Data.Status != "succeeded" || ev.Data.Result.CostMicros != task.Result.CostMicros || ev.Data.Result.Usage.OutputTokens != 9 {
		t.Errorf("event %s: want the task's id, status, cost and usage", got)
	}
	secrets := []string{word, toolWord, "PROMPT-WALRUS", "META-MARMOT", mail, "send_mail", "The code is"}
	switch policy {
	case redact.PolicyHashOnly:
		for _, s := range secrets {
			if strings.Contains(got, s) {
				t.Errorf("hash-only event holds %q: %s", s, got)
			}
		}
		if !strings.HasPrefix(ev.Data.Result.Output, "[DIGEST:") {
			t.Errorf("hash-only output %q, want a digest", ev.Data.Result.Output)
		}
	case redact.PolicyRedact:
		if strings.Contains(got, mail) {
			t.Errorf("redacted event holds the address: %s", got)
		}
		var record struct {
			Attempts []struct {
				Response struct {
					Content   string
					ToolCalls []struct{ Arguments string } `json:"tool_calls"`
				}
			}
		}
		json.Unmarshal(e.do(http.MethodGet, "/v1/tasks/"+task.ID+"/replay", key, nil, nil).body, &record)
		if len(record.Attempts) != 1 || ev.Data.Result.Output != record.Attempts[0].Response.Content || !strings.Contains(ev.Data.Result.Output, "[EMAIL_") {
			t.Errorf("redacted output %q, want the replay record's %+v", ev.Data.Result.Output, record.Attempts)
		}
		if tc := ev.Data.Result.Message.ToolCalls; len(tc) != 1 || len(record.Attempts) != 1 || len(record.Attempts[0].Response.ToolCalls) != 1 ||
			tc[0].Function.Arguments != record.Attempts[0].Response.ToolCalls[0].Arguments || strings.Contains(tc[0].Function.Arguments, mail) {
			t.Errorf("redacted tool call %+v, want the replay record's", tc)
		}
	case redact.PolicyFull:
		var get, data map[string]any
		json.Unmarshal(e.do(http.MethodGet, "/v1/tasks/"+task.ID, key, nil, nil).body, &get)
		var whole map[string]any
		json.Unmarshal(h.body, &whole)
		data, _ = whole["data"].(map[string]any)
		gj, _ := json.Marshal(get)
		dj, _ := json.Marshal(data)
		if string(gj) != string(dj) {
			t.Errorf("full event data differs from GET:\n got %s\nwant %s", dj, gj)
		}
	}
	e.checkInvariants()
}
