package console

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// Keys the fake key store knows, one per role.
var testKeys = map[string]Principal{
	"tg_client":  {KeyID: "k-client", OwnerID: "acme", Role: "client"},
	"tg_support": {KeyID: "k-support", OwnerID: "tollgate", Role: "support"},
	"tg_finance": {KeyID: "k-finance", OwnerID: "tollgate", Role: "finance", Workload: "books"},
	"tg_admin":   {KeyID: "k-admin", OwnerID: "tollgate", Role: "admin"},
}

// errStoreDown stands for a key store that cannot answer.
var errStoreDown = errors.New("store down")

func fakeAuth(_ context.Context, key string) (Principal, error) {
	if key == "tg_store_down" {
		return Principal{}, errStoreDown
	}
	p, ok := testKeys[key]
	if !ok {
		return Principal{}, ErrUnauthenticated
	}
	return p, nil
}

// clock is a settable clock.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// received is one request as the stub API saw it.
type received struct {
	Method        string
	Path          string
	RawQuery      string
	Authorization string
	Reason        string
	Cookie        string
	Accept        string
}

// stubAPI records what it receives and answers from answer, or 200 {}.
type stubAPI struct {
	mu     sync.Mutex
	got    []received
	answer func(w http.ResponseWriter, r *http.Request)
}

func (s *stubAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.got = append(s.got, received{
		Method:        r.Method,
		Path:          r.URL.Path,
		RawQuery:      r.URL.RawQuery,
		Authorization: r.Header.Get("Authorization"),
		Reason:        r.Header.Get("X-Reason"),
		Cookie:        r.Header.Get("Cookie"),
		Accept:        r.Header.Get("Accept"),
	})
	answer := s.answer
	s.mu.Unlock()
	if answer != nil {
		answer(w, r)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, `{}`)
}

func (s *stubAPI) requests() []received {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]received(nil), s.got...)
}

type testConsole struct {
	handler http.Handler
	api     *stubAPI
	clock   *clock
}

type option func(*Config)

func withSecureCookies(c *Config) { c.SecureCookies = true }

func newTestConsole(t *testing.T, opts ...option) *testConsole {
	t.Helper()
	tc := &testConsole{api: &stubAPI{}, clock: &clock{now: time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC)}}
	cfg := Config{API: tc.api, Auth: fakeAuth, Now: tc.clock.Now}
	for _, o := range opts {
		o(&cfg)
	}
	tc.handler = New(cfg)
	return tc
}

// do serves one request and returns the recorded response.
func (tc *testConsole) do(t *testing.T, r *http.Request) *http.Response {
	t.Helper()
	rec := httptest.NewRecorder()
	tc.handler.ServeHTTP(rec, r)
	return rec.Result()
}

// signIn signs in with key and returns the session cookie and the session
// as the browser sees it.
func (tc *testConsole) signIn(t *testing.T, key string) (*http.Cookie, sessionView) {
	t.Helper()
	res := tc.do(t, signInRequest(key))
	if res.StatusCode != http.StatusCreated {
		t.Fatalf("sign in with %q: status %d, want %d; body %s", key, res.StatusCode, http.StatusCreated, readBody(t, res))
	}
	ck := sessionCookieOf(t, res)
	var v sessionView
	if err := json.NewDecoder(res.Body).Decode(&v); err != nil {
		t.Fatalf("sign in: decode body: %v", err)
	}
	return ck, v
}

func signInRequest(key string) *http.Request {
	body, _ := json.Marshal(map[string]string{"api_key": key})
	r := httptest.NewRequest(http.MethodPost, "/console/session", strings.NewReader(string(body)))
	r.Header.Set("Content-Type", "application/json")
	return r
}

func sessionCookieOf(t *testing.T, res *http.Response) *http.Cookie {
	t.Helper()
	for _, ck := range res.Cookies() {
		if ck.Name == sessionCookie {
			return ck
		}
	}
	t.Fatalf("no %s cookie in response (Set-Cookie: %q)", sessionCookie, res.Header.Values("Set-Cookie"))
	return nil
}

func readBody(t *testing.T, res *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("read body: %v", err)
	}
	return string(b)
}

func get(path string, ck *http.Cookie) *http.Request {
	r := httptest.NewRequest(http.MethodGet, path, nil)
	if ck != nil {
		r.AddCookie(&http.Cookie{Name: ck.Name, Value: ck.Value})
	}
	return r
}
