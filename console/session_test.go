package console

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestSignIn(t *testing.T) {
	t.Parallel()
	form := func(key string) *http.Request {
		r := httptest.NewRequest(http.MethodPost, "/console/session", strings.NewReader(url.Values{"api_key": {key}}.Encode()))
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		return r
	}
	raw := func(ct, body string) *http.Request {
		r := httptest.NewRequest(http.MethodPost, "/console/session", strings.NewReader(body))
		if ct != "" {
			r.Header.Set("Content-Type", ct)
		}
		return r
	}
	tests := []struct {
		name       string
		req        *http.Request
		wantStatus int
		wantCookie bool
	}{
		{"valid key as JSON", signInRequest("tg_support"), http.StatusCreated, true},
		{"valid key as a form", form("tg_finance"), http.StatusCreated, true},
		{"valid key with spaces around it", signInRequest("  tg_admin\n"), http.StatusCreated, true},
		{"unknown key", signInRequest("tg_nobody"), http.StatusUnauthorized, false},
		{"empty key", signInRequest(""), http.StatusBadRequest, false},
		{"overlong key", signInRequest("tg_" + strings.Repeat("x", 600)), http.StatusUnauthorized, false},
		{"malformed JSON", raw("application/json", `{"api_key":`), http.StatusBadRequest, false},
		{"no content type", raw("", `{"api_key":"tg_admin"}`), http.StatusUnsupportedMediaType, false},
		{"key store down", signInRequest("tg_store_down"), http.StatusServiceUnavailable, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tc := newTestConsole(t)
			res := tc.do(t, tt.req)
			body := readBody(t, res)
			if res.StatusCode != tt.wantStatus {
				t.Fatalf("status = %d, want %d; body %s", res.StatusCode, tt.wantStatus, body)
			}
			gotCookie := false
			for _, ck := range res.Cookies() {
				if ck.Name == sessionCookie && ck.MaxAge >= 0 && ck.Value != "" {
					gotCookie = true
				}
			}
			if gotCookie != tt.wantCookie {
				t.Errorf("session cookie set = %v, want %v", gotCookie, tt.wantCookie)
			}
			if strings.Contains(body, "tg_") {
				t.Errorf("the answer repeats the key: %s", body)
			}
			if tt.wantStatus != http.StatusCreated {
				if ct := res.Header.Get("Content-Type"); ct != "application/problem+json" {
					t.Errorf("Content-Type = %q, want application/problem+json", ct)
				}
			}
		})
	}
}

func TestSignInAnswerCarriesPrincipalNotKey(t *testing.T) {
	t.Parallel()
	tc := newTestConsole(t)
	_, got := tc.signIn(t, "tg_finance")
	want := sessionView{
		OwnerID:         "tollgate",
		Role:            "finance",
		Workload:        "books",
		ExpiresAt:       tc.clock.Now().Add(SessionTTL),
		CSRFToken:       got.CSRFToken,
		AlertThresholds: []int{70, 90},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("session mismatch (-want +got):\n%s", diff)
	}
	if len(got.CSRFToken) < 20 {
		t.Errorf("CSRF token %q is too short to be unguessable", got.CSRFToken)
	}
}

func TestSessionCookieFlags(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		opts       []option
		wantSecure bool
	}{
		{"plain HTTP", nil, false},
		{"TLS", []option{withSecureCookies}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tc := newTestConsole(t, tt.opts...)
			ck, _ := tc.signIn(t, "tg_admin")
			type flags struct {
				HttpOnly bool
				Secure   bool
				SameSite http.SameSite
				Path     string
				MaxAge   int
			}
			got := flags{ck.HttpOnly, ck.Secure, ck.SameSite, ck.Path, ck.MaxAge}
			want := flags{true, tt.wantSecure, http.SameSiteStrictMode, "/console", int(SessionTTL / time.Second)}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("cookie flags mismatch (-want +got):\n%s", diff)
			}
			if !ck.Expires.Equal(tc.clock.Now().Add(SessionTTL)) {
				t.Errorf("cookie Expires = %v, want %v", ck.Expires, tc.clock.Now().Add(SessionTTL))
			}
			if ck.Value == "" || strings.Contains(ck.Value, "tg_") {
				t.Errorf("cookie value %q must be an opaque id, not the key", ck.Value)
			}
		})
	}
}

func TestGetSessionShowsRole(t *testing.T) {
	t.Parallel()
	tests := []struct {
		key  string
		want sessionView
	}{
		{"tg_client", sessionView{OwnerID: "acme", Role: "client"}},
		{"tg_support", sessionView{OwnerID: "tollgate", Role: "support"}},
		{"tg_finance", sessionView{OwnerID: "tollgate", Role: "finance", Workload: "books"}},
		{"tg_admin", sessionView{OwnerID: "tollgate", Role: "admin"}},
	}
	for _, tt := range tests {
		t.Run(tt.key, func(t *testing.T) {
			t.Parallel()
			tc := newTestConsole(t)
			ck, signedIn := tc.signIn(t, tt.key)
			res := tc.do(t, get("/console/session", ck))
			if res.StatusCode != http.StatusOK {
				t.Fatalf("GET /console/session: status %d, want 200", res.StatusCode)
			}
			if cc := res.Header.Get("Cache-Control"); cc != "no-store" {
				t.Errorf("Cache-Control = %q, want no-store", cc)
			}
			var got sessionView
			if err := json.NewDecoder(res.Body).Decode(&got); err != nil {
				t.Fatal(err)
			}
			want := tt.want
			want.ExpiresAt = tc.clock.Now().Add(SessionTTL)
			want.CSRFToken = signedIn.CSRFToken
			want.AlertThresholds = []int{70, 90}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("session mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestGetSessionWithoutSignIn(t *testing.T) {
	t.Parallel()
	tc := newTestConsole(t)
	for name, ck := range map[string]*http.Cookie{
		"no cookie":      nil,
		"unknown cookie": {Name: sessionCookie, Value: "forged"},
	} {
		res := tc.do(t, get("/console/session", ck))
		if res.StatusCode != http.StatusUnauthorized {
			t.Errorf("%s: status %d, want 401", name, res.StatusCode)
		}
	}
}

func TestSignOutNeedsCSRFToken(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		token       func(real string) string
		wantStatus  int
		wantSession bool // the session still works afterwards
	}{
		{"no token", func(string) string { return "" }, http.StatusForbidden, true},
		{"wrong token", func(string) string { return "AAAAAAAAAAAAAAAAAAAAAAAAAA" }, http.StatusForbidden, true},
		{"token with a suffix", func(real string) string { return real + "x" }, http.StatusForbidden, true},
		{"right token", func(real string) string { return real }, http.StatusNoContent, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tc := newTestConsole(t)
			ck, v := tc.signIn(t, "tg_support")
			r := httptest.NewRequest(http.MethodDelete, "/console/session", nil)
			r.AddCookie(ck)
			if tok := tt.token(v.CSRFToken); tok != "" {
				r.Header.Set(csrfHeader, tok)
			}
			res := tc.do(t, r)
			if res.StatusCode != tt.wantStatus {
				t.Fatalf("DELETE /console/session: status %d, want %d", res.StatusCode, tt.wantStatus)
			}
			if !tt.wantSession {
				cleared := false
				for _, c := range res.Cookies() {
					cleared = cleared || (c.Name == sessionCookie && c.MaxAge < 0 && c.Path == "/console")
				}
				if !cleared {
					t.Errorf("sign-out did not clear the cookie: %q", res.Header.Values("Set-Cookie"))
				}
			}
			after := tc.do(t, get("/console/session", ck))
			if alive := after.StatusCode == http.StatusOK; alive != tt.wantSession {
				t.Errorf("session alive after sign-out = %v, want %v", alive, tt.wantSession)
			}
		})
	}
}

func TestSignOutWithoutSession(t *testing.T) {
	t.Parallel()
	tc := newTestConsole(t)
	r := httptest.NewRequest(http.MethodDelete, "/console/session", nil)
	r.Header.Set(csrfHeader, "anything")
	if res := tc.do(t, r); res.StatusCode != http.StatusUnauthorized {
		t.Errorf("status %d, want 401", res.StatusCode)
	}
}

// A CSRF token is only good for its own session.
func TestCSRFTokenOfAnotherSession(t *testing.T) {
	t.Parallel()
	tc := newTestConsole(t)
	ck, _ := tc.signIn(t, "tg_support")
	_, other := tc.signIn(t, "tg_admin")
	r := httptest.NewRequest(http.MethodDelete, "/console/session", nil)
	r.AddCookie(ck)
	r.Header.Set(csrfHeader, other.CSRFToken)
	if res := tc.do(t, r); res.StatusCode != http.StatusForbidden {
		t.Errorf("status %d, want 403", res.StatusCode)
	}
}

func TestSessionExpires(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		after     time.Duration
		wantAlive bool
	}{
		{"just signed in", 0, true},
		{"a second before eight hours", SessionTTL - time.Second, true},
		{"at eight hours", SessionTTL, false},
		{"a day later", 24 * time.Hour, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tc := newTestConsole(t)
			ck, _ := tc.signIn(t, "tg_support")
			tc.clock.Advance(tt.after)
			wantStatus := http.StatusUnauthorized
			if tt.wantAlive {
				wantStatus = http.StatusOK
			}
			if res := tc.do(t, get("/console/session", ck)); res.StatusCode != wantStatus {
				t.Errorf("GET /console/session: status %d, want %d", res.StatusCode, wantStatus)
			}
			if res := tc.do(t, get("/console/api/v1/tasks", ck)); res.StatusCode != wantStatus {
				t.Errorf("GET /console/api/v1/tasks: status %d, want %d", res.StatusCode, wantStatus)
			}
		})
	}
}

func TestExpiredSessionsAreDropped(t *testing.T) {
	t.Parallel()
	clk := &clock{now: time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC)}
	s := newSessions(clk.Now)
	for range 3 {
		if _, _, err := s.create("tg_admin", testKeys["tg_admin"]); err != nil {
			t.Fatal(err)
		}
	}
	clk.Advance(SessionTTL)
	if _, _, err := s.create("tg_admin", testKeys["tg_admin"]); err != nil {
		t.Fatal(err)
	}
	if n := len(s.byID); n != 1 {
		t.Errorf("%d sessions kept, want 1: expired ones must be swept", n)
	}
}

func TestCrossOriginSignInRefused(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		header     string
		value      string
		wantStatus int
	}{
		{"cross-site fetch", "Sec-Fetch-Site", "cross-site", http.StatusForbidden},
		{"other origin", "Origin", "https://evil.example", http.StatusForbidden},
		{"same origin", "Sec-Fetch-Site", "same-origin", http.StatusCreated},
		{"same origin header", "Origin", "http://example.com", http.StatusCreated},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tc := newTestConsole(t)
			r := signInRequest("tg_admin")
			r.Header.Set(tt.header, tt.value)
			if res := tc.do(t, r); res.StatusCode != tt.wantStatus {
				t.Errorf("status %d, want %d", res.StatusCode, tt.wantStatus)
			}
		})
	}
}

// Signing in again replaces the browser's old session rather than leaving
// it alive.
func TestSignInAgainEndsOldSession(t *testing.T) {
	t.Parallel()
	tc := newTestConsole(t)
	old, _ := tc.signIn(t, "tg_support")
	r := signInRequest("tg_finance")
	r.AddCookie(old)
	res := tc.do(t, r)
	if res.StatusCode != http.StatusCreated {
		t.Fatalf("second sign-in: status %d", res.StatusCode)
	}
	if res := tc.do(t, get("/console/session", old)); res.StatusCode != http.StatusUnauthorized {
		t.Errorf("old session: status %d, want 401", res.StatusCode)
	}
}

// TestOneKeyCannotFillTheTable signs one key in more times than the table
// holds sessions: each sign-in succeeds, the key keeps only its newest
// MaxSessionsPerKey sessions, and another key still signs in.
func TestOneKeyCannotFillTheTable(t *testing.T) {
	t.Parallel()
	c := &clock{now: time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC)}
	s := newSessions(c.Now)
	for i := range maxSessions + 1 {
		if _, _, err := s.create("tg_client", testKeys["tg_client"]); err != nil {
			t.Fatalf("sign-in %d of one key: %v", i+1, err)
		}
		c.Advance(time.Millisecond)
	}
	if n := len(s.byID); n != MaxSessionsPerKey {
		t.Errorf("%d sessions after %d sign-ins of one key, want %d", n, maxSessions+1, MaxSessionsPerKey)
	}
	if _, _, err := s.create("tg_admin", testKeys["tg_admin"]); err != nil {
		t.Errorf("another key's sign-in: %v", err)
	}
}
