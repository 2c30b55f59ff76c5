package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/accounts"
)

type keyAnswer struct {
	ID         string     `json:"id"`
	Key        string     `json:"key"`
	Owner      string     `json:"owner"`
	Role       string     `json:"role"`
	Workload   string     `json:"workload"`
	Name       string     `json:"name"`
	CreatedAt  time.Time  `json:"created_at"`
	CreatedBy  string     `json:"created_by"`
	ExpiresAt  *time.Time `json:"expires_at"`
	LastUsedAt *time.Time `json:"last_used_at"`
	RevokedAt  *time.Time `json:"revoked_at"`
	RevokedBy  *string    `json:"revoked_by"`
}

func listedKeys(t *testing.T, e *env, admin, query string) []keyAnswer {
	t.Helper()
	r := e.do(http.MethodGet, "/v1/keys"+query, admin, nil, nil)
	if r.status != http.StatusOK {
		t.Fatalf("GET /v1/keys%s: %d %s", query, r.status, r.body)
	}
	var out struct{ Data []keyAnswer }
	if err := json.Unmarshal(r.body, &out); err != nil {
		t.Fatal(err)
	}
	return out.Data
}

// TestKeysOverHTTP: an admin creates a key, the key works, the list shows
// it without its secret and with its last use, and a revocation refuses it
// at once, on this instance and on another sharing the database; who
// created and who revoked it is kept.
func TestKeysOverHTTP(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{noWorkers: true})
	admin := e.owner("ops", accounts.RoleAdmin, 0)
	e.owner("acme", accounts.RoleClient, 1_000_000)
	expires := time.Now().Add(24 * time.Hour).UTC().Truncate(time.Second)
	body := `{"owner": "acme", "role": "client", "workload": "batch", "name": "nightly job", "expires_at": "` + expires.Format(time.RFC3339) + `"}`
	r := e.do(http.MethodPost, "/v1/keys", admin, []byte(body), nil)
	if r.status != http.StatusCreated {
		t.Fatalf("POST /v1/keys: %d %s", r.status, r.body)
	}
	var created keyAnswer
	if err := json.Unmarshal(r.body, &created); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(created.Key, "tg_") || created.Owner != "acme" || created.Role != "client" || created.Workload != "batch" ||
		created.Name != "nightly job" || created.ExpiresAt == nil || !created.ExpiresAt.Equal(expires) || created.LastUsedAt != nil {
		t.Fatalf("created %+v", created)
	}
	if n := e.scalar(`SELECT count(*) FROM api_keys WHERE key_hash = sha256(convert_to($1::text, 'UTF8'))`, created.Key); n != 1 {
		t.Errorf("keys stored by the secret's digest: %d, want 1", n)
	}

	// Another instance's store, with its cache, on the same database.
	other := accounts.NewStore(e.pool)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go other.CacheKeys(ctx, accounts.CacheOptions{})
	if p, err := other.Authenticate(ctx, created.Key); err != nil || p.OwnerID != "acme" || p.Workload != "batch" {
		t.Fatalf("other instance: %+v %v", p, err)
	}
	if r := e.post(created.Key, "k1", taskBody("abcd", 5), nil); r.status != http.StatusAccepted && r.status != http.StatusOK {
		t.Fatalf("task with the new key: %d %s", r.status, r.body)
	}
	list := listedKeys(t, e, admin, "?owner=acme")
	var found *keyAnswer
	for i := range list {
		if list[i].Key != "" {
			t.Errorf("listed key %s carries its secret", list[i].ID)
		}
		if list[i].ID == created.ID {
			found = &list[i]
		}
	}
	if found == nil || found.LastUsedAt == nil || found.CreatedBy == "" || !strings.Contains(found.CreatedBy, "admin:ops:") || found.RevokedAt != nil {
		t.Fatalf("listed %+v, want the key with its last use and its creator", found)
	}
	if strings.Contains(string(e.do(http.MethodGet, "/v1/keys", admin, nil, nil).body), created.Key) {
		t.Error("the list shows a secret")
	}

	if r := e.do(http.MethodDelete, "/v1/keys/"+created.ID, admin, nil, nil); r.status != http.StatusNoContent {
		t.Fatalf("DELETE: %d %s", r.status, r.body)
	}
	if r := e.post(created.Key, "k2", taskBody("abcd", 5), nil); r.status != http.StatusUnauthorized {
		t.Errorf("revoked key: %d, want 401", r.status)
	}
	e.waitFor("the other instance refuses the revoked key", func() bool {
		_, err := other.Authenticate(ctx, created.Key)
		return errors.Is(err, accounts.ErrUnauthenticated)
	})
	if r := e.do(http.MethodDelete, "/v1/keys/"+created.ID, admin, nil, nil); r.status != http.StatusNotFound {
		t.Errorf("revoking again: %d, want 404", r.status)
	}
	if n := e.scalar(`SELECT count(*) FROM api_keys WHERE id = $1 AND revoked_by LIKE 'admin:ops:%' AND created_by LIKE 'admin:ops:%'`, created.ID); n != 1 {
		t.Errorf("audit trail rows: %d, want created_by and revoked_by naming the admin key", n)
	}
}

// TestExpiredKeyIsRefused: once its expiry passes a key is refused as a
// revoked one, cached or not.
func TestExpiredKeyIsRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{noWorkers: true})
	admin := e.owner("ops", accounts.RoleAdmin, 0)
	e.owner("acme", accounts.RoleClient, 1_000_000)
	body := `{"owner": "acme", "role": "client", "expires_at": "` + time.Now().Add(time.Hour).UTC().Format(time.RFC3339) + `"}`
	r := e.do(http.MethodPost, "/v1/keys", admin, []byte(body), nil)
	if r.status != http.StatusCreated {
		t.Fatalf("POST /v1/keys: %d %s", r.status, r.body)
	}
	var k keyAnswer
	if err := json.Unmarshal(r.body, &k); err != nil {
		t.Fatal(err)
	}
	if r := e.do(http.MethodGet, "/v1/tasks", k.Key, nil, nil); r.status != http.StatusOK {
		t.Fatalf("fresh key: %d %s", r.status, r.body)
	}
	// Its hour passes.
	if _, err := e.pool.Exec(context.Background(), `UPDATE api_keys SET expires_at = now() - interval '1 second' WHERE id = $1`, k.ID); err != nil {
		t.Fatal(err)
	}
	e.waitFor("the expired key is refused", func() bool {
		return e.do(http.MethodGet, "/v1/tasks", k.Key, nil, nil).status == http.StatusUnauthorized
	})
}

// TestKeysRefuseBadInput: each bad field is named, nothing is written, and
// only an admin may manage keys.
func TestKeysRefuseBadInput(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{noWorkers: true})
	admin := e.owner("ops", accounts.RoleAdmin, 0)
	client := e.owner("acme", accounts.RoleClient, 1_000_000)
	before := e.scalar(`SELECT count(*) FROM api_keys`)
	past := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)
	for _, c := range []struct{ name, body, field string }{
		{"no owner", `{"role": "client"}`, "owner"},
		{"bad owner", `{"owner": "a b", "role": "client"}`, "owner"},
		{"owner too long", `{"owner": "` + strings.Repeat("a", 65) + `", "role": "client"}`, "owner"},
		{"no role", `{"owner": "acme"}`, "role"},
		{"unknown role", `{"owner": "acme", "role": "root"}`, "role"},
		{"role of the wrong type", `{"owner": "acme", "role": 1}`, "role"},
		{"bad workload", `{"owner": "acme", "role": "client", "workload": "-x"}`, "workload"},
		{"name too long", `{"owner": "acme", "role": "client", "name": "` + strings.Repeat("n", 201) + `"}`, "name"},
		{"expiry in the past", `{"owner": "acme", "role": "client", "expires_at": "` + past + `"}`, "expires_at"},
		{"malformed expiry", `{"owner": "acme", "role": "client", "expires_at": "tomorrow"}`, "expires_at"},
		{"unknown field", `{"owner": "acme", "role": "client", "scopes": ["all"]}`, "scopes"},
		{"NUL in name", "{\"owner\": \"acme\", \"role\": \"client\", \"name\": \"a\\u0000b\"}", "name"},
	} {
		r := e.do(http.MethodPost, "/v1/keys", admin, []byte(c.body), nil)
		if r.status != http.StatusBadRequest || problemField(t, r, "field") != c.field {
			t.Errorf("%s: %d %s, want 400 naming %s", c.name, r.status, r.body, c.field)
		}
	}
	if r := e.do(http.MethodGet, "/v1/keys?own=acme", admin, nil, nil); r.status != http.StatusBadRequest {
		t.Errorf("unknown query parameter: %d, want 400", r.status)
	}
	if r := e.do(http.MethodDelete, "/v1/keys/not-a-uuid", admin, nil, nil); r.status != http.StatusNotFound {
		t.Errorf("DELETE of a malformed id: %d, want 404", r.status)
	}
	for _, m := range []struct{ method, path, body string }{
		{http.MethodPost, "/v1/keys", `{"owner": "acme", "role": "admin"}`},
		{http.MethodGet, "/v1/keys", ""},
		{http.MethodDelete, "/v1/keys/00000000-0000-0000-0000-000000000000", ""},
	} {
		var b []byte
		if m.body != "" {
			b = []byte(m.body)
		}
		if r := e.do(m.method, m.path, client, b, nil); r.status != http.StatusForbidden {
			t.Errorf("client %s %s: %d, want 403", m.method, m.path, r.status)
		}
	}
	if after := e.scalar(`SELECT count(*) FROM api_keys`); after != before {
		t.Errorf("keys %d after bad input, were %d", after, before)
	}
}
