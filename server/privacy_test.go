package server_test

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"github.com/tollgate/tollgate/provider"
	"github.com/tollgate/tollgate/redact"
	"net/http"
	"os/exec"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/tollgate/tollgate/accounts"
	"github.com/tollgate/tollgate/provider/fake"
	"github.com/tollgate/tollgate/tasks"
)

// canaries are planted in requests and responses; none may appear in any
// table (a pg_dump of the whole database) or in the logs.
var canaries = []string{
	"canary.person@example.com",
	"canary.meta@example.org",
	"+44 20 7946 0958",
	"4111 1111 1111 1111",
	"GB82 WEST 1234 5698 7654 32",
	"sk-proj-CANARYabcdefghijklmnopqrstuvwxyz0123",
	"ghp_CANARY0123456789abcdefghijklmnopqrstuv",
	"AKIACANARY1234567890",
	"eyJhbGciOiJIUzI1NiJ9.eyJjYW5hcnkiOnRydWV9.c2lnbmF0dXJlY2FuYXJ5",
}

func TestNothingReachesTheDatabaseOrLogsUnredacted(t *testing.T) {
	t.Parallel()
	logs := &syncBuffer{}
	e := newEnv(t, envOptions{logs: logs})
	key := e.owner("acme", accounts.RoleClient, 1_000_000)
	prompt := "Write to " + canaries[0] + " or call " + canaries[2] + ". Card " + canaries[3] +
		", IBAN " + canaries[4] + ", key " + canaries[5] + ", token " + canaries[6] + ", jwt " + canaries[8]
	answer := "I will reply to " + canaries[0] + " and rotate " + canaries[7] + "."
	e.fake.Script(fake.Scripted{Status: 200, Body: `{"id":"x","object":"chat.completion","created":1,"model":"test-model",` +
		`"choices":[{"index":0,"message":{"role":"assistant","content":` + mustQuote(answer) + `},"finish_reason":"stop"}],` +
		`"usage":{"prompt_tokens":60,"completion_tokens":20,"total_tokens":80}}`})
	body, _ := json.Marshal(map[string]any{
		"model":    "test-model",
		"messages": []map[string]string{{"role": "system", "content": "be brief"}, {"role": "user", "content": prompt}},
		"metadata": map[string]any{"contact": canaries[1], "n": 3},
	})
	r := e.post(key, "privacy-1", body, map[string]string{"Prefer": "wait=30"})
	task := e.waitFinished(key, r.task(t).ID)
	if task.Status != tasks.StatusSucceeded {
		t.Fatalf("task = %s %+v", task.Status, task.Error)
	}
	// The owner still gets the real answer: it is stored sealed, not lost.
	if task.Result.Output != answer {
		t.Errorf("owner's output = %q, want the provider's answer", task.Result.Output)
	}
	// The provider saw the real prompt, not placeholders.
	rep := e.do(http.MethodGet, "/v1/tasks/"+task.ID+"/replay", key, nil, nil)
	var record struct {
		Request struct {
			Messages []struct{ Content string } `json:"messages"`
		} `json:"request"`
		Attempts []struct {
			Response struct{ Content string } `json:"response"`
		} `json:"attempts"`
	}
	if err := json.Unmarshal(rep.body, &record); err != nil {
		t.Fatal(err)
	}
	stored, replied := record.Request.Messages[1].Content, record.Attempts[0].Response.Content
	for _, want := range []string{"[EMAIL_1]", "[PHONE_1]", "[CARD_1]", "[IBAN_1]", "[SECRET_1]"} {
		if !strings.Contains(stored, want) {
			t.Errorf("stored request %q lacks %s", stored, want)
		}
	}
	// The same address in request and response gets the same placeholder.
	if !strings.Contains(replied, "[EMAIL_1]") {
		t.Errorf("stored response %q: the address should read [EMAIL_1] as in the request", replied)
	}

	dump, err := exec.Command("pg_dump", "--data-only", e.dbURL).CombinedOutput()
	if err != nil {
		t.Fatalf("pg_dump: %v\n%s", err, dump)
	}
	if !strings.Contains(string(dump), task.ID) {
		t.Fatal("the dump does not even hold the task: the scan would prove nothing")
	}
	for _, c := range canaries {
		if strings.Contains(string(dump), c) {
			t.Errorf("canary %q found in the database dump", c)
		}
		if strings.Contains(logs.String(), c) {
			t.Errorf("canary %q found in the logs", c)
		}
	}
	if strings.Contains(logs.String(), key) || strings.Contains(logs.String(), "privacy-1") {
		t.Error("the logs hold an API key or a clear idempotency key")
	}
	if !strings.Contains(logs.String(), task.ID) {
		t.Error("no logs were captured: the scan would prove nothing")
	}
}

func mustQuote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// TestEveryClientFieldFollowsThePrivacyTable plants a canary in every field
// of the privacy table (redact.Fields) that a client or a provider fills:
// metadata keys and numbers, the Idempotency-Key, X-Reason, a top-up note,
// a route's user and the provider's error code. Under each redaction
// policy (set with PUT /v1/owners/{owner}/privacy first), none may appear
// in clear in a pg_dump of the database, the logs, /metrics, usage.csv or
// support's views; the one exception is `full`, which keeps the address
// among the metadata keys in the stored request, as the table says.
// Under hash-only the replay record holds no clear metadata key, and its
// metadata numbers are digests.
func TestEveryClientFieldFollowsThePrivacyTable(t *testing.T) {
	t.Parallel()
	for _, policy := range []redact.Policy{redact.PolicyRedact, redact.PolicyHashOnly, redact.PolicyFull} {
		t.Run(string(policy), func(t *testing.T) {
			t.Parallel()
			everyClientFieldFollowsThePrivacyTable(t, policy)
		})
	}
}

func everyClientFieldFollowsThePrivacyTable(t *testing.T, policy redact.Policy) {
	logs := &syncBuffer{}
	e := newEnv(t, envOptions{logs: logs, maxAttempts: 1})
	key := e.owner("acme", accounts.RoleClient, 1_000_000)
	support := e.owner("helpdesk", accounts.RoleSupport, 0)
	admin := e.owner("ops", accounts.RoleAdmin, 0)
	if r := e.do(http.MethodPut, "/v1/owners/acme/privacy", admin, []byte(`{"redaction_policy":"`+string(policy)+`","body_retention_days":30,"metadata_retention_days":400}`), nil); r.status != http.StatusOK {
		t.Fatalf("set policy %s: %d %s", policy, r.status, r.body)
	}
	canary := map[string]string{
		"metadata key (address)": "jane.canary@example.com",
		"metadata key (secret)":  "sk-proj-CANARYmetaKEY0123456789abcdefghij",
		"metadata number (card)": "4012888888881881",
		"idempotency key":        "idem-CANARY-4711-zq",
		"X-Reason":               "canary.reason@example.com",
		"top-up note":            "canary.note@example.com",
		"route user":             "route-user-CANARY-9931",
		"provider error code":    "sk-proj-canarycode0123456789abcdefghij",
	}

	e.fake.Script(openaiAnswer("done"),
		fake.Scripted{Status: 400, Body: `{"error":{"message":"bad","type":"invalid_request_error","code":"` + canary["provider error code"] + `"}}`},
		openaiAnswer(`{"reply":"ok"}`))
	body := []byte(`{"model":"test-model","messages":[{"role":"user","content":"hi"}],"metadata":{` +
		mustQuote(canary["metadata key (address)"]) + `:"x",` + mustQuote(canary["metadata key (secret)"]) + `:1,"card":` + canary["metadata number (card)"] + `}}`)
	r := e.post(key, canary["idempotency key"], body, map[string]string{"Prefer": "wait=30"})
	first := e.waitFinished(key, r.task(t).ID)
	if first.Status != tasks.StatusSucceeded {
		t.Fatalf("first task = %s %+v", first.Status, first.Error)
	}
	// A retry under the same key still finds the task through its digest.
	if again := e.post(key, canary["idempotency key"], body, nil); again.task(t).ID != first.ID {
		t.Errorf("retry under the same key made another task: %s", again.body)
	}
	failed := e.waitFinished(key, e.post(key, "privacy-code", []byte(`{"model":"test-model","messages":[{"role":"user","content":"hi"}]}`),
		map[string]string{"Prefer": "wait=30"}).task(t).ID)
	if failed.Status != tasks.StatusFailed {
		t.Fatalf("second task = %s, want failed", failed.Status)
	}
	b, _ := json.Marshal(map[string]any{"input": map[string]any{"message": "hi"}, "user": canary["route user"]})
	if rc := e.do(http.MethodPost, "/v1/routes/draft-reply", key, b, map[string]string{"Idempotency-Key": "privacy-route"}); rc.status != http.StatusOK {
		t.Fatalf("route call: %d %s", rc.status, rc.body)
	}
	rep := e.do(http.MethodGet, "/v1/tasks/"+first.ID+"/replay", support, nil, map[string]string{"X-Reason": "ticket for " + canary["X-Reason"]})
	if rep.status != http.StatusOK {
		t.Fatalf("support read: %d %s", rep.status, rep.body)
	}
	if tp := e.do(http.MethodPost, "/v1/budgets/acme/topups", admin, []byte(`{"amount_micros": 700, "note": "refund to `+canary["top-up note"]+`"}`), nil); tp.status != http.StatusCreated {
		t.Fatalf("topup: %d %s", tp.status, tp.body)
	}
	// Support still finds the task by the exact key it was given.
	if s := e.do(http.MethodGet, "/v1/replays?q="+canary["idempotency key"], support, nil, nil); !strings.Contains(string(s.body), first.ID) {
		t.Errorf("search by the idempotency key: %d %s, want task %s", s.status, s.body, first.ID)
	}

	var record struct {
		IdempotencyKey string `json:"idempotency_key"`
		Request        struct {
			Metadata map[string]any `json:"metadata"`
		} `json:"request"`
	}
	if err := json.Unmarshal(rep.body, &record); err != nil {
		t.Fatal(err)
	}
	if len(record.Request.Metadata) != 3 {
		t.Fatalf("replay record metadata = %v, want the three keys sent", record.Request.Metadata)
	}
	if record.IdempotencyKey != e.tasks.StoredKey(canary["idempotency key"]) {
		t.Errorf("replay record idempotency_key = %q, want the key's stored form", record.IdempotencyKey)
	}
	digest := regexp.MustCompile(`^\[DIGEST:[0-9a-f]{32}\]$`)
	switch policy {
	case redact.PolicyHashOnly:
		// No metadata key in clear, "card" included; every value, numbers
		// included, a digest.
		for k, v := range record.Request.Metadata {
			if !digest.MatchString(k) {
				t.Errorf("hash-only replay record has the metadata key %q in clear", k)
			}
			if s, ok := v.(string); !ok || !digest.MatchString(s) {
				t.Errorf("hash-only replay record has the metadata value %v (%T), want a digest", v, v)
			}
		}
	case redact.PolicyFull:
		// full keeps contact data, the address among the metadata keys
		// too; the card number and the secret are still replaced.
		if _, ok := record.Request.Metadata[canary["metadata key (address)"]]; !ok {
			t.Errorf("full replay record metadata = %v, want the address kept as a key", record.Request.Metadata)
		}
	}

	dump, err := exec.Command("pg_dump", "--data-only", e.dbURL).CombinedOutput()
	if err != nil {
		t.Fatalf("pg_dump: %v\n%s", err, dump)
	}
	if !strings.Contains(string(dump), failed.ID) || !strings.Contains(string(dump), "ticket for ") {
		t.Fatal("the dump lacks the task or the audit row: the scan would prove nothing")
	}
	places := map[string]string{
		"database dump":  string(dump),
		"logs":           logs.String(),
		"replay record":  string(rep.body),
		"/metrics":       string(e.do(http.MethodGet, "/metrics", admin, nil, nil).body),
		"usage.csv":      string(e.do(http.MethodGet, "/v1/usage.csv", key, nil, nil).body),
		"support search": string(e.do(http.MethodGet, "/v1/replays?owner=acme", support, nil, nil).body),
	}
	// Erasure removes what it promises: the request with its metadata, the
	// sealed copies, the response texts; the key stays only as its digest.
	if r := e.do(http.MethodDelete, "/v1/tasks/"+first.ID+"/replay", key, nil, nil); r.status != http.StatusOK {
		t.Fatalf("erase: %d %s", r.status, r.body)
	}
	for _, c := range []struct {
		what string
		sql  string
		want int64
	}{
		{"bodies left after erasure", `SELECT count(*) FROM tasks WHERE id = $1::uuid AND (request ? 'metadata' OR payload IS NOT NULL OR output_sealed IS NOT NULL)`, 0},
		{"replay texts or metadata left after erasure", `SELECT count(*) FROM replay_records WHERE task_id = $1::uuid AND (response->>'content' <> '' OR parameters::text LIKE '%card%')`, 0},
		{"task under the key's digest", `SELECT count(*) FROM tasks WHERE id = $1::uuid AND idempotency_key = '` + e.tasks.StoredKey(canary["idempotency key"]) + `'`, 1},
	} {
		if got := e.scalar(c.sql, first.ID); got != c.want {
			t.Errorf("%s: %d, want %d", c.what, got, c.want)
		}
	}
	if policy == redact.PolicyFull {
		after, err := exec.Command("pg_dump", "--data-only", e.dbURL).CombinedOutput()
		if err != nil {
			t.Fatalf("pg_dump: %v\n%s", err, after)
		}
		if strings.Contains(string(after), canary["metadata key (address)"]) {
			t.Error("the address full kept among the metadata keys is still in the database after erasure")
		}
	}
	for field, c := range canary {
		for place, text := range places {
			if policy == redact.PolicyFull && field == "metadata key (address)" && (place == "database dump" || place == "replay record") {
				continue // kept by full, as checked above; erased with the bodies
			}
			if strings.Contains(text, c) || strings.Contains(text, strings.ToLower(c)) {
				t.Errorf("%s %q found in clear in the %s", field, c, place)
			}
		}
	}
}

// TestPassThroughModelNameCarryingSecretsIsRefused: a pass-through model
// name is sent to the provider and stored, logged and exported as given, so
// one that redaction would change is a 400 naming model, and nothing is
// written.
func TestPassThroughModelNameCarryingSecretsIsRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{passThrough: true})
	key := e.owner("acme", accounts.RoleClient, 1_000_000)
	for i, model := range []string{"ft:sk-proj-CANARYmodel0123456789abcdefghij", "jane.model@example.com"} {
		body := []byte(`{"model":` + mustQuote(model) + `,"messages":[{"role":"user","content":"hi"}]}`)
		r := e.post(key, fmt.Sprintf("model-%d", i), body, nil)
		if r.status != http.StatusBadRequest || !strings.Contains(string(r.body), "model") {
			t.Errorf("model %q: %d %s, want 400 naming model", model, r.status, r.body)
		}
	}
	if n := e.scalar(`SELECT count(*) FROM tasks`); n != 0 {
		t.Errorf("%d tasks written, want none", n)
	}
	// A plain pass-through name is still admitted.
	e.fake.Script(openaiAnswer("ok"))
	if r := e.post(key, "model-plain", []byte(`{"model":"some-open-model","messages":[{"role":"user","content":"hi"}]}`), nil); r.status >= 300 {
		t.Errorf("plain pass-through model: %d %s", r.status, r.body)
	}
}

// TestRequestHashIsStoredKeyed: the request hash is stored keyed, so a
// dump cannot confirm a guessed request; a retry under the same key finds
// its task without a second call, and support finds it by the key.
func TestRequestHashIsStoredKeyed(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	key := e.owner("acme", accounts.RoleClient, 1_000_000)
	e.fake.Script(openaiAnswer("once"))
	body := []byte(`{"model":"test-model","messages":[{"role":"user","content":"hi"}]}`)
	first := e.waitFinished(key, e.post(key, "key-1", body, map[string]string{"Prefer": "wait=30"}).task(t).ID)
	plain := tasks.Request{Chat: provider.Chat{Model: "test-model", Messages: []provider.Message{{Role: "user", Content: provider.Text("hi")}}}}.Hash()
	if n := e.scalar(`SELECT count(*) FROM tasks WHERE request_hash = $1`, plain); n != 0 {
		t.Errorf("the request's plain hash is stored: a dump could confirm a guessed request")
	}
	again := e.post(key, "key-1", body, nil)
	if got := again.task(t).ID; got != first.ID || again.header.Get("Idempotent-Replayed") != "true" {
		t.Errorf("retry: task %s (replayed %q), want %s replayed", got, again.header.Get("Idempotent-Replayed"), first.ID)
	}
	if n := len(e.fake.Calls()); n != 1 {
		t.Errorf("%d provider calls, want 1", n)
	}
	support := e.owner("helpdesk", accounts.RoleSupport, 0)
	if s := e.do(http.MethodGet, "/v1/replays?q=key-1", support, nil, nil); !strings.Contains(string(s.body), first.ID) {
		t.Errorf("support search by the key: %d %s, want task %s", s.status, s.body, first.ID)
	}
}

// TestBrokeOwnerIsRefusedBeforeRedaction: an owner whose budget cannot
// cover the reservation at all is refused before the request is redacted
// (a probe rule counts what redaction looks at), as the reservation would
// refuse it, and nothing is written.
func TestBrokeOwnerIsRefusedBeforeRedaction(t *testing.T) {
	t.Parallel()
	var probed atomic.Int64
	r, err := redact.New(redact.Rule{Name: "probe", Pattern: regexp.MustCompile(`PROBE`), Validate: func(string) bool {
		probed.Add(1)
		return true
	}})
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, envOptions{redactor: r})
	broke := e.owner("broke", accounts.RoleClient, 1)
	body := []byte(`{"model":"test-model","messages":[{"role":"user","content":"PROBE ` + strings.Repeat("1234 5678 ", 1000) + `"}]}`)
	resp := e.post(broke, "broke-1", body, nil)
	if resp.status != http.StatusPaymentRequired || resp.problemCode(t) != "budget_exceeded" {
		t.Fatalf("broke owner: %d %s, want 402 budget_exceeded", resp.status, resp.body)
	}
	if n := probed.Load(); n != 0 {
		t.Errorf("the refused request was redacted (%d probe matches)", n)
	}
	if n := e.scalar(`SELECT count(*) FROM tasks`); n != 0 {
		t.Errorf("%d tasks written, want none", n)
	}
	// The probe does see a request that is admitted.
	rich := e.owner("rich", accounts.RoleClient, 1_000_000)
	e.fake.Script(openaiAnswer("ok"))
	if resp := e.post(rich, "rich-1", body, nil); resp.status >= 300 || probed.Load() == 0 {
		t.Errorf("admitted request: %d %s, %d probe matches; want admitted and redacted", resp.status, resp.body, probed.Load())
	}
}

// TestEveryRequestFieldIsRedactedOrSealed sends a request that uses every
// field of the chat model, each carrying its own canary (text parts, a
// tool call's arguments, a tool result, a refusal, tool and schema
// descriptions, a signed image URL's query string, a data URL image's
// bytes, stop sequences, user identifiers, a pass-through field), and an
// answer whose text, tool call and refusal carry more. No canary may be
// found in clear in a pg_dump of the database or in the logs; the owner
// still reads the answer whole, and the replay record describes the images
// (media type, size, SHA-256; the URL without its query) and names the
// tool list by its digest.
func TestEveryRequestFieldIsRedactedOrSealed(t *testing.T) {
	t.Parallel()
	logs := &syncBuffer{}
	e := newEnv(t, envOptions{logs: logs})
	key := e.owner("acme", accounts.RoleClient, 1_000_000)
	c := map[string]string{
		"text part":            "text.part.canary@example.com",
		"system":               "sk-proj-CANARYsystem0123456789abcdefghijk",
		"assistant tool args":  "args.canary@example.com",
		"tool result":          "tool.result.canary@example.com",
		"assistant refusal":    "refusal.canary@example.com",
		"tool description":     "tool.desc.canary@example.com",
		"schema description":   "schema.desc.canary@example.com",
		"schema enum":          "enum.canary@example.com",
		"json_schema desc":     "jsonschema.desc.canary@example.com",
		"image URL query":      "X-Amz-Signature=CANARYsig0123456789",
		"image bytes (base64)": base64.StdEncoding.EncodeToString([]byte("PNG bytes canary.image@example.com")),
		"stop":                 "stop.canary@example.com",
		"user":                 "user.canary@example.com",
		"safety_identifier":    "safety.canary@example.com",
		"answer text":          "answer.canary@example.com",
		"answer tool args":     "answer.args.canary@example.com",
		"metadata":             "meta.canary@example.com",
	}
	imageURL := "https://bucket.example.com/cat.png?" + c["image URL query"]
	dataURL := "data:image/png;base64," + c["image bytes (base64)"]
	schema := map[string]any{"type": "object", "description": c["schema description"],
		"properties": map[string]any{"to": map[string]any{"type": "string", "enum": []string{c["schema enum"]}}}}
	body, _ := json.Marshal(map[string]any{
		"model": "test-model",
		"messages": []any{
			map[string]any{"role": "system", "content": "never leak " + c["system"]},
			map[string]any{"role": "user", "content": []any{
				map[string]any{"type": "text", "text": "write to " + c["text part"]},
				map[string]any{"type": "image_url", "image_url": map[string]any{"url": imageURL, "detail": "low"}},
				map[string]any{"type": "image_url", "image_url": map[string]any{"url": dataURL}},
			}},
			map[string]any{"role": "assistant", "refusal": "not " + c["assistant refusal"], "tool_calls": []any{
				map[string]any{"id": "call_a", "type": "function", "function": map[string]any{"name": "send_mail", "arguments": `{"to":"` + c["assistant tool args"] + `"}`}},
			}},
			map[string]any{"role": "tool", "tool_call_id": "call_a", "content": "sent to " + c["tool result"]},
		},
		"tools": []any{map[string]any{"type": "function", "function": map[string]any{
			"name": "send_mail", "description": "Mail " + c["tool description"], "parameters": schema}}},
		"response_format": map[string]any{"type": "json_schema", "json_schema": map[string]any{
			"name": "reply", "description": "for " + c["json_schema desc"], "schema": schema}},
		"stop":              []string{c["stop"]},
		"user":              c["user"],
		"safety_identifier": c["safety_identifier"],
		"metadata":          map[string]any{"contact": c["metadata"]},
	})
	e.fake.Script(fake.Scripted{Body: `{"id":"x","object":"chat.completion","created":1,"model":"test-model",
		"choices":[{"index":0,"message":{"role":"assistant","content":"reply to ` + c["answer text"] + `","tool_calls":[
			{"id":"call_b","type":"function","function":{"name":"send_mail","arguments":` + mustQuote(`{"to":"`+c["answer tool args"]+`"}`) + `}}]},
		"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":60,"completion_tokens":20,"total_tokens":80}}`})
	r := e.post(key, "every-field", body, map[string]string{"Prefer": "wait=30"})
	if r.status >= 300 {
		t.Fatalf("POST: %d %s", r.status, r.body)
	}
	task := e.waitFinished(key, r.task(t).ID)
	if task.Status != tasks.StatusSucceeded {
		t.Fatalf("task = %s %+v", task.Status, task.Error)
	}
	// The owner reads the answer whole.
	if m := task.Result.Message; m == nil || len(m.ToolCalls) != 1 || !strings.Contains(m.ToolCalls[0].Function.Arguments, c["answer tool args"]) ||
		!strings.Contains(task.Result.Output, c["answer text"]) {
		t.Errorf("owner's result = %+v, want the answer whole", task.Result)
	}
	rep := e.do(http.MethodGet, "/v1/tasks/"+task.ID+"/replay", key, nil, nil)
	var record struct {
		Attempts []struct {
			Parameters struct {
				ToolsSHA256 string `json:"tools_sha256"`
				Images      []struct {
					MediaType string `json:"media_type"`
					Bytes     int    `json:"bytes"`
					SHA256    string `json:"sha256"`
					URL       string `json:"url"`
				} `json:"images"`
			} `json:"parameters"`
		} `json:"attempts"`
	}
	if err := json.Unmarshal(rep.body, &record); err != nil || len(record.Attempts) != 1 {
		t.Fatalf("replay: %d %s", rep.status, rep.body)
	}
	p := record.Attempts[0].Parameters
	raw, _ := base64.StdEncoding.DecodeString(c["image bytes (base64)"])
	sum := sha256.Sum256(raw)
	if len(p.Images) != 2 || p.Images[0].URL != "https://bucket.example.com/cat.png?[QUERY]" ||
		p.Images[1].MediaType != "image/png" || p.Images[1].Bytes != len(raw) || p.Images[1].SHA256 != hex.EncodeToString(sum[:]) {
		t.Errorf("recorded images = %+v", p.Images)
	}
	if len(p.ToolsSHA256) != 64 {
		t.Errorf("tools_sha256 = %q", p.ToolsSHA256)
	}

	dump, err := exec.Command("pg_dump", "--data-only", e.dbURL).CombinedOutput()
	if err != nil {
		t.Fatalf("pg_dump: %v\n%s", err, dump)
	}
	if !strings.Contains(string(dump), task.ID) || !strings.Contains(string(dump), "send_mail") {
		t.Fatal("the dump does not hold the task and its tools: the scan would prove nothing")
	}
	for field, canary := range c {
		for place, text := range map[string]string{"database dump": string(dump), "logs": logs.String(), "replay record": string(rep.body)} {
			if strings.Contains(text, canary) {
				t.Errorf("%s canary %q found in clear in the %s", field, canary, place)
			}
		}
	}
}
