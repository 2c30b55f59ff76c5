package server_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/accounts"
	"github.com/tollgate/tollgate/console"
	"github.com/tollgate/tollgate/internal/eventually"
)

// consoleSignIn posts a sign-in with key, without a cookie jar: every call
// opens a new session. It returns the answer's status and session cookie.
func consoleSignIn(t *testing.T, e *env, key string) (int, *http.Cookie) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, e.url+"/console/session", strings.NewReader(`{"api_key":"`+key+`"}`))
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	for _, ck := range res.Cookies() {
		if ck.Name == "tollgate_console" && ck.Value != "" {
			return res.StatusCode, ck
		}
	}
	return res.StatusCode, nil
}

func consoleSessionStatus(t *testing.T, e *env, ck *http.Cookie) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, e.url+"/console/session", nil)
	req.AddCookie(ck)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	return res.StatusCode
}

// TestConsoleSessionsPerKeyAreCapped signs in 40 times with one key: only
// its newest console.MaxSessionsPerKey sessions stay live, so one key
// cannot fill the session table and lock everyone else out.
func TestConsoleSessionsPerKeyAreCapped(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{noWorkers: true})
	key := e.owner("acme", accounts.RoleClient, 0)
	var cookies []*http.Cookie
	for range 40 {
		status, ck := consoleSignIn(t, e, key)
		if status != http.StatusCreated || ck == nil {
			t.Fatalf("sign-in %d: %d, want 201 and a cookie", len(cookies)+1, status)
		}
		cookies = append(cookies, ck)
	}
	live := 0
	for i, ck := range cookies {
		status := consoleSessionStatus(t, e, ck)
		newest := i >= len(cookies)-console.MaxSessionsPerKey
		switch {
		case status == http.StatusOK:
			live++
			if !newest {
				t.Errorf("session %d of %d is still live; only the newest %d should be", i+1, len(cookies), console.MaxSessionsPerKey)
			}
		case newest:
			t.Errorf("session %d of %d (among the newest) answers %d, want 200", i+1, len(cookies), status)
		}
	}
	if live != console.MaxSessionsPerKey {
		t.Errorf("%d live sessions for one key, want %d", live, console.MaxSessionsPerKey)
	}
}

// TestConsoleSignInFailuresAreRateLimited sends 40 wrong keys to the
// console's sign-in from one address: past the API's limit (20 a minute)
// they get 429 with Retry-After, and so do a right key and the API itself
// from that address, since both count failures together.
func TestConsoleSignInFailuresAreRateLimited(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{noWorkers: true})
	key := e.owner("acme", accounts.RoleClient, 0)
	counts := map[int]int{}
	for i := range 40 {
		status, _ := consoleSignIn(t, e, "tg_wrong_"+strings.Repeat("x", i+1))
		counts[status]++
	}
	if counts[http.StatusUnauthorized] != 20 || counts[http.StatusTooManyRequests] != 20 {
		t.Errorf("40 wrong keys got %v, want 20 × 401 then 20 × 429", counts)
	}
	req, _ := http.NewRequest(http.MethodPost, e.url+"/console/session", strings.NewReader(`{"api_key":"`+key+`"}`))
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusTooManyRequests || res.Header.Get("Retry-After") == "" {
		t.Errorf("a right key from a blocked address: %d (Retry-After %q), want 429 with Retry-After", res.StatusCode, res.Header.Get("Retry-After"))
	}
	if r := e.do(http.MethodGet, "/v1/tasks", key, nil, nil); r.status != http.StatusTooManyRequests {
		t.Errorf("the API from an address blocked at the console: %d, want 429", r.status)
	}
}

// TestConsoleSessionOfARevokedKeyEnds revokes a signed-in key: the
// console's GET /console/session stops answering 200 for it.
func TestConsoleSessionOfARevokedKeyEnds(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{noWorkers: true})
	key := e.owner("acme", accounts.RoleClient, 0)
	status, ck := consoleSignIn(t, e, key)
	if status != http.StatusCreated {
		t.Fatalf("sign-in: %d", status)
	}
	if s := consoleSessionStatus(t, e, ck); s != http.StatusOK {
		t.Fatalf("session before revocation: %d, want 200", s)
	}
	p, err := e.accounts.Authenticate(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.accounts.Revoke(context.Background(), p.KeyID, "test"); err != nil {
		t.Fatal(err)
	}
	eventually.Wait(t, "the revoked key's session to end", func() bool {
		return consoleSessionStatus(t, e, ck) == http.StatusUnauthorized
	})
}
