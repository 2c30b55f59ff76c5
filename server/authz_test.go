package server_test

import (
	"net/http"
	"sort"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/tollgate/tollgate/accounts"
)

// The authorization matrix: every authenticated operation in openapi.yaml
// × every role × the caller's own or another owner's resources. Another
// owner's task is 404 (its existence does not leak), admin-only operations
// are 403 for other roles, no key is 401, and nothing is ever a 5xx.
func TestAuthorizationMatrix(t *testing.T) {
	t.Parallel()
	doc, err := openapi3.NewLoader().LoadFromFile("../openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// One keyless call per operation, from one address: more than the
	// default limit of failed authentications a minute.
	e := newEnv(t, envOptions{authFailures: 1000})
	keys := map[accounts.Role]string{}
	for _, r := range []accounts.Role{accounts.RoleClient, accounts.RoleSupport, accounts.RoleFinance, accounts.RoleAdmin} {
		keys[r] = e.owner("own-"+string(r), r, 1_000_000)
	}
	other := e.owner("other", accounts.RoleClient, 1_000_000)
	otherTask := finishedTask(t, e, other, "o1", "someone else's question")
	ownTasks := map[accounts.Role]string{}
	for r, k := range keys {
		ownTasks[r] = finishedTask(t, e, k, "own", "my question").ID
	}

	adminOnly := map[string]bool{
		"PUT /v1/budgets/{owner}": true, "POST /v1/budgets/{owner}/topups": true, "GET /v1/audit": true,
		"GET /v1/admin/status": true, "PUT /v1/owners/{owner}/privacy": true,
		"POST /v1/keys": true, "GET /v1/keys": true, "DELETE /v1/keys/{id}": true,
		"GET /v1/limits": true, "GET /v1/limits/{owner}": true, "PUT /v1/limits/{owner}": true,
	}
	var ops []string
	for path, item := range doc.Paths.Map() {
		if !strings.HasPrefix(path, "/v1/") {
			continue
		}
		for method := range item.Operations() {
			ops = append(ops, method+" "+path)
		}
	}
	// Erasures last: they change what the other operations see.
	sort.Slice(ops, func(i, j int) bool {
		di, dj := strings.HasPrefix(ops[i], "DELETE"), strings.HasPrefix(ops[j], "DELETE")
		if di != dj {
			return dj
		}
		return ops[i] < ops[j]
	})
	bodies := map[string]string{
		"POST /v1/tasks":                  `{"messages":[{"role":"user","content":"hi"}]}`,
		"POST /v1/chat/completions":       `{"model":"test-model","messages":[{"role":"user","content":"hi"}]}`,
		"PUT /v1/budgets/{owner}":         `{"total_micros": 5000000}`,
		"POST /v1/budgets/{owner}/topups": `{"amount_micros": 1}`,
		"PUT /v1/owners/{owner}/privacy":  `{"redaction_policy":"redact","body_retention_days":30,"metadata_retention_days":400}`,
		"POST /v1/routes/{name}":          `{"input":{"product":"kettle"}}`,
		"POST /v1/responses":              `{"model":"test-model","input":"hi"}`,
		"POST /v1/keys":                   `{"owner":"authz-made","role":"client"}`,
		"POST /v1/embeddings":             `{"model":"test-model","input":"hi"}`,
		"PUT /v1/limits/{owner}":          `{}`,
		"PUT /v1/owners/{owner}/webhook":  `{"url":"http://127.0.0.1:9/t","events":["task.succeeded"]}`,
	}
	for _, op := range ops {
		method, tmpl, _ := strings.Cut(op, " ")
		for _, whose := range []string{"own", "other"} {
			for role, key := range keys {
				path := strings.NewReplacer("{name}", "tagline").Replace(tmpl)
				owner := "own-" + string(role)
				taskID := ownTasks[role]
				if whose == "other" {
					owner, taskID = "other", otherTask.ID
				}
				if strings.HasPrefix(tmpl, "/v1/responses/") {
					taskID = "resp_" + strings.ReplaceAll(taskID, "-", "") // the same task as a response
				}
				path = strings.NewReplacer("{id}", taskID, "{owner}", owner).Replace(path)
				if whose == "other" && !strings.Contains(tmpl, "{") {
					continue // nothing of another owner's in the path
				}
				var body []byte
				if b, ok := bodies[op]; ok {
					body = []byte(b)
				}
				hdr := map[string]string{"Idempotency-Key": "authz-" + whose + "-" + string(role) + "-" + method + tmpl}
				r := e.do(method, path, key, body, hdr)
				name := op + " as " + string(role) + " on " + whose
				if r.status >= 500 {
					t.Errorf("%s: %d %s", name, r.status, r.body)
				}
				staff := role == accounts.RoleSupport || role == accounts.RoleAdmin
				switch {
				case strings.HasSuffix(tmpl, "/rerun"):
					// Reruns are off in this server: refused alike for every
					// task, so the answer says nothing about the id.
					if r.status != http.StatusForbidden {
						t.Errorf("%s: %d, want 403 (reruns disabled)", name, r.status)
					}
				case strings.Contains(tmpl, "/webhook") && whose == "other" && role != accounts.RoleAdmin:
					// Any key of the owner manages its webhook; of another
					// owner's, only an admin's.
					if r.status != http.StatusForbidden {
						t.Errorf("%s: %d, want 403 (another owner's webhook)", name, r.status)
					}
				case strings.Contains(tmpl, "/webhook") && r.status >= 400 && r.status != http.StatusNotFound:
					t.Errorf("%s: %d %s, want it allowed", name, r.status, r.body)
				case adminOnly[op] && role != accounts.RoleAdmin:
					if r.status != http.StatusForbidden {
						t.Errorf("%s: %d, want 403 (admin only)", name, r.status)
					}
				case whose == "other" && strings.Contains(tmpl, "{id}") && !(staff && strings.HasSuffix(tmpl, "/replay") && method == http.MethodGet) &&
					!(role == accounts.RoleAdmin && strings.HasSuffix(tmpl, "/replay")):
					if r.status != http.StatusNotFound {
						t.Errorf("%s: %d, want 404 (another owner's task does not exist for this key)", name, r.status)
					}
				case whose == "other" && staff && method == http.MethodGet && strings.HasSuffix(tmpl, "/replay"):
					if r.status != http.StatusForbidden {
						t.Errorf("%s without X-Reason: %d, want 403", name, r.status)
					}
				case r.status == http.StatusUnauthorized:
					t.Errorf("%s: 401 with a valid key", name)
				}
			}
		}
		// No key at all: 401 everywhere.
		path := strings.NewReplacer("{id}", otherTask.ID, "{owner}", "other", "{name}", "tagline").Replace(tmpl)
		if r := e.do(method, path, "", nil, nil); r.status != http.StatusUnauthorized {
			t.Errorf("%s without a key: %d, want 401", op, r.status)
		}
	}
}
