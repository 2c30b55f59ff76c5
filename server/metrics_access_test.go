package server_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/accounts"
	"github.com/tollgate/tollgate/metrics"
	"github.com/tollgate/tollgate/server"
)

// TestMetricsAccess reads GET /metrics on the API's address as each caller,
// in each configuration: open by default; the token or an admin key when
// a token is set or the metrics have a listener of their own.
func TestMetricsAccess(t *testing.T) {
	t.Parallel()
	const token = "metrics-token-0123456789abcdef"
	type caller int
	const (
		anonymous caller = iota
		withToken
		wrongToken
		admin
		client
	)
	tests := []struct {
		name string
		opts envOptions
		want map[caller]int
	}{
		{"default: open", envOptions{}, map[caller]int{anonymous: 200, admin: 200, client: 200}},
		{"token", envOptions{metricsToken: token}, map[caller]int{anonymous: 401, withToken: 200, wrongToken: 401, admin: 200, client: 403}},
		{"own listener", envOptions{metricsApart: true}, map[caller]int{anonymous: 401, withToken: 401, admin: 200, client: 403}},
		{"own listener and token", envOptions{metricsApart: true, metricsToken: token}, map[caller]int{anonymous: 401, withToken: 200, admin: 200, client: 403}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.opts.noWorkers = true
			e := newEnv(t, tt.opts)
			keys := map[caller]string{
				anonymous:  "",
				withToken:  token,
				wrongToken: "metrics-token-wrong",
				admin:      e.owner("ops", accounts.RoleAdmin, 0),
				client:     e.owner("acme", accounts.RoleClient, 1000),
			}
			for who, want := range tt.want {
				r := e.do(http.MethodGet, "/metrics", keys[who], nil, nil)
				if r.status != want {
					t.Errorf("caller %d: GET /metrics = %d, want %d", who, r.status, want)
				}
				if want == http.StatusOK && !strings.Contains(string(r.body), "tollgate_budget_used_ratio") {
					t.Errorf("caller %d: 200 without the metrics", who)
				}
			}
		})
	}
}

// TestMetricsHandlerOnItsOwnListener serves MetricsHandler as
// TOLLGATE_METRICS_ADDR does: with a token it requires it, without one it
// is open.
func TestMetricsHandlerOnItsOwnListener(t *testing.T) {
	t.Parallel()
	m := metrics.New()
	for _, tt := range []struct {
		token, sent string
		want        int
	}{
		{"tok-1", "", http.StatusUnauthorized},
		{"tok-1", "tok-2", http.StatusUnauthorized},
		{"tok-1", "tok-1", http.StatusOK},
		{"", "", http.StatusOK},
	} {
		srv := httptest.NewServer(server.MetricsHandler(m.Registry, tt.token))
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/metrics", nil)
		if tt.sent != "" {
			req.Header.Set("Authorization", "Bearer "+tt.sent)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		srv.Close()
		if res.StatusCode != tt.want {
			t.Errorf("token %q, sent %q: %d, want %d", tt.token, tt.sent, res.StatusCode, tt.want)
		}
		if tt.want == http.StatusOK && !strings.Contains(string(body), "go_goroutines") {
			t.Errorf("token %q: 200 without the metrics", tt.token)
		}
	}
}
