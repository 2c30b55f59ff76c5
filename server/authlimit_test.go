package server_test

import (
	"net/http"
	"testing"

	"github.com/tollgate/tollgate/accounts"
)

// An address that keeps failing authentication is slowed down, and a
// revoked key fails at once.
func TestAuthFailuresAreRateLimitedAndRevocationIsImmediate(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{noWorkers: true})
	key := e.owner("acme", accounts.RoleClient, 1_000_000)
	if r := e.do(http.MethodGet, "/v1/tasks", key, nil, nil); r.status != http.StatusOK {
		t.Fatalf("valid key: %d", r.status)
	}
	keys, err := e.accounts.ListKeys(t.Context(), "acme")
	if err != nil || len(keys) != 1 {
		t.Fatalf("keys = %v, %v", keys, err)
	}
	if err := e.accounts.Revoke(t.Context(), keys[0].ID, "test"); err != nil {
		t.Fatal(err)
	}
	if r := e.do(http.MethodGet, "/v1/tasks", key, nil, nil); r.status != http.StatusUnauthorized {
		t.Errorf("revoked key: %d, want 401", r.status)
	}
	got429 := false
	for range 30 {
		r := e.do(http.MethodGet, "/v1/tasks", "tg_guessing-a-key", nil, nil)
		if r.status == http.StatusTooManyRequests {
			got429 = r.problemCode(t) == "rate_limited" && r.header.Get("Retry-After") != ""
			break
		}
	}
	if !got429 {
		t.Error("30 failed authentications from one address were never slowed down")
	}
}
