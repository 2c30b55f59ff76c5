package console

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestProxyInjectsKeyAndPassesReadsThrough(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		key     string
		path    string
		headers map[string]string
		want    received
	}{
		{
			name: "search with query",
			key:  "tg_support",
			path: "/console/api/v1/replays?owner=acme&status=failed&q=order%2042",
			want: received{Method: "GET", Path: "/v1/replays", RawQuery: "owner=acme&status=failed&q=order%2042",
				Authorization: "Bearer tg_support", Accept: "application/json"},
		},
		{
			name:    "replay with reason",
			key:     "tg_support",
			path:    "/console/api/v1/tasks/0b9a2c1e-4f6e-4a53-9c0e-1b2c3d4e5f60/replay",
			headers: map[string]string{"X-Reason": "ticket 4711: customer asks why"},
			want: received{Method: "GET", Path: "/v1/tasks/0b9a2c1e-4f6e-4a53-9c0e-1b2c3d4e5f60/replay",
				Authorization: "Bearer tg_support", Reason: "ticket 4711: customer asks why", Accept: "application/json"},
		},
		{
			name:    "browser's own Authorization is replaced",
			key:     "tg_finance",
			path:    "/console/api/v1/usage?group_by=day",
			headers: map[string]string{"Authorization": "Bearer tg_admin"},
			want: received{Method: "GET", Path: "/v1/usage", RawQuery: "group_by=day",
				Authorization: "Bearer tg_finance", Accept: "application/json"},
		},
		{
			name: "metrics for admin",
			key:  "tg_admin",
			path: "/console/api/metrics",
			want: received{Method: "GET", Path: "/metrics", Authorization: "Bearer tg_admin", Accept: "application/json"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tc := newTestConsole(t)
			ck, _ := tc.signIn(t, tt.key)
			r := get(tt.path, ck)
			r.Header.Set("Accept", "application/json")
			for k, v := range tt.headers {
				r.Header.Set(k, v)
			}
			res := tc.do(t, r)
			if res.StatusCode != http.StatusOK {
				t.Fatalf("status %d, want 200; body %s", res.StatusCode, readBody(t, res))
			}
			got := tc.api.requests()
			if diff := cmp.Diff([]received{tt.want}, got); diff != "" {
				t.Errorf("API received mismatch (-want +got):\n%s", diff)
			}
			if cc := res.Header.Get("Cache-Control"); cc != "no-store" {
				t.Errorf("Cache-Control = %q, want no-store", cc)
			}
		})
	}
}

func TestProxyPassesAnswersThrough(t *testing.T) {
	t.Parallel()
	tc := newTestConsole(t)
	tc.api.answer = func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/csv")
		w.Header().Set("Content-Disposition", `attachment; filename="usage.csv"`)
		w.WriteHeader(http.StatusOK)
		_, _ = io.WriteString(w, "settled_at,task_id\n")
		http.NewResponseController(w).Flush()
		_, _ = io.WriteString(w, "2026-05-01T00:00:00Z,abc\n")
	}
	ck, _ := tc.signIn(t, "tg_finance")
	rec := httptest.NewRecorder()
	tc.handler.ServeHTTP(rec, get("/console/api/v1/usage.csv?from=2026-05-01", ck))
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d, want 200", rec.Code)
	}
	if !rec.Flushed {
		t.Error("the API's Flush did not reach the client: streamed answers would be buffered")
	}
	if got, want := rec.Header().Get("Content-Disposition"), `attachment; filename="usage.csv"`; got != want {
		t.Errorf("Content-Disposition = %q, want %q", got, want)
	}
	if got, want := rec.Body.String(), "settled_at,task_id\n2026-05-01T00:00:00Z,abc\n"; got != want {
		t.Errorf("body = %q, want %q", got, want)
	}
}

func TestProxyRefusesWithoutSession(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		cookie *http.Cookie
	}{
		{"no cookie", nil},
		{"forged cookie", &http.Cookie{Name: sessionCookie, Value: "GUESSEDGUESSEDGUESSEDGUESS"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tc := newTestConsole(t)
			r := get("/console/api/v1/tasks", tt.cookie)
			r.Header.Set("Authorization", "Bearer tg_admin") // a key from the browser is not enough
			res := tc.do(t, r)
			if res.StatusCode != http.StatusUnauthorized {
				t.Errorf("status %d, want 401", res.StatusCode)
			}
			if n := len(tc.api.requests()); n != 0 {
				t.Errorf("the API was called %d times without a session", n)
			}
		})
	}
}

func TestProxyRefusesNonReads(t *testing.T) {
	t.Parallel()
	methods := []string{http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodOptions}
	for _, m := range methods {
		t.Run(m, func(t *testing.T) {
			t.Parallel()
			tc := newTestConsole(t)
			ck, v := tc.signIn(t, "tg_admin")
			r := httptest.NewRequest(m, "/console/api/v1/tasks", strings.NewReader(`{}`))
			r.Header.Set("Content-Type", "application/json")
			r.Header.Set(csrfHeader, v.CSRFToken) // even with the token: the console is read-only
			r.AddCookie(ck)
			res := tc.do(t, r)
			if res.StatusCode != http.StatusMethodNotAllowed {
				t.Errorf("status %d, want 405", res.StatusCode)
			}
			if got := res.Header.Get("Allow"); got != "GET, HEAD" {
				t.Errorf("Allow = %q, want %q", got, "GET, HEAD")
			}
			if n := len(tc.api.requests()); n != 0 {
				t.Errorf("the API was called %d times", n)
			}
		})
	}
}

func TestProxyForwardsHead(t *testing.T) {
	t.Parallel()
	tc := newTestConsole(t)
	ck, _ := tc.signIn(t, "tg_finance")
	r := httptest.NewRequest(http.MethodHead, "/console/api/v1/usage.csv", nil)
	r.AddCookie(ck)
	if res := tc.do(t, r); res.StatusCode != http.StatusOK {
		t.Fatalf("status %d, want 200", res.StatusCode)
	}
	got := tc.api.requests()
	if len(got) != 1 || got[0].Method != http.MethodHead {
		t.Errorf("API received %+v, want one HEAD", got)
	}
}

func TestProxyLimitsPaths(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		key        string
		path       string
		wantStatus int
	}{
		{"health is not forwarded", "tg_admin", "/console/api/healthz", http.StatusNotFound},
		{"the console itself is not forwarded", "tg_admin", "/console/api/console/api/v1/tasks", http.StatusNotFound},
		{"bare v1", "tg_admin", "/console/api/v1", http.StatusNotFound},
		{"metrics for support", "tg_support", "/console/api/metrics", http.StatusForbidden},
		{"metrics for finance", "tg_finance", "/console/api/metrics", http.StatusForbidden},
		{"escaped slash", "tg_admin", "/console/api/v1/budgets/a%2Fb", http.StatusBadRequest},
		{"v1 read", "tg_client", "/console/api/v1/tasks", http.StatusOK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tc := newTestConsole(t)
			ck, _ := tc.signIn(t, tt.key)
			res := tc.do(t, get(tt.path, ck))
			if res.StatusCode != tt.wantStatus {
				t.Errorf("status %d, want %d; body %s", res.StatusCode, tt.wantStatus, readBody(t, res))
			}
			wantCalls := 0
			if tt.wantStatus == http.StatusOK {
				wantCalls = 1
			}
			if n := len(tc.api.requests()); n != wantCalls {
				t.Errorf("API called %d times, want %d", n, wantCalls)
			}
		})
	}
}

// The browser's cookies (the session id among them) stay in the console.
func TestProxyKeepsCookiesFromAPI(t *testing.T) {
	t.Parallel()
	tc := newTestConsole(t)
	ck, _ := tc.signIn(t, "tg_support")
	r := get("/console/api/v1/replays", ck)
	r.AddCookie(&http.Cookie{Name: "other", Value: "x"})
	tc.do(t, r)
	for _, got := range tc.api.requests() {
		if got.Cookie != "" {
			t.Errorf("API received Cookie %q, want none", got.Cookie)
		}
	}
}

// A key revoked after sign-in: the API says 401, and the session ends
// with it instead of failing request after request.
func TestProxyEndsSessionOnAPIUnauthorized(t *testing.T) {
	t.Parallel()
	tc := newTestConsole(t)
	tc.api.answer = func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = io.WriteString(w, `{"code":"unauthorized"}`)
	}
	ck, _ := tc.signIn(t, "tg_support")
	if res := tc.do(t, get("/console/api/v1/replays", ck)); res.StatusCode != http.StatusUnauthorized {
		t.Fatalf("status %d, want the API's 401", res.StatusCode)
	}
	if res := tc.do(t, get("/console/session", ck)); res.StatusCode != http.StatusUnauthorized {
		t.Errorf("session after the API's 401: status %d, want 401", res.StatusCode)
	}
}

// Errors from the API (403 for a missing reason, 410 for an erased record)
// reach the browser as the API wrote them.
func TestProxyPassesProblemsThrough(t *testing.T) {
	t.Parallel()
	tc := newTestConsole(t)
	const problem = `{"type":"about:blank","title":"Gone","status":410,"code":"gone","trace_id":"0123456789abcdef0123456789abcdef"}`
	tc.api.answer = func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(http.StatusGone)
		_, _ = io.WriteString(w, problem)
	}
	ck, _ := tc.signIn(t, "tg_support")
	res := tc.do(t, get("/console/api/v1/tasks/0b9a2c1e-4f6e-4a53-9c0e-1b2c3d4e5f60/replay", ck))
	if res.StatusCode != http.StatusGone {
		t.Fatalf("status %d, want 410", res.StatusCode)
	}
	if got := readBody(t, res); got != problem {
		t.Errorf("body = %s, want %s", got, problem)
	}
	if res := tc.do(t, get("/console/session", ck)); res.StatusCode != http.StatusOK {
		t.Errorf("session after a 410: status %d, want 200", res.StatusCode)
	}
}
