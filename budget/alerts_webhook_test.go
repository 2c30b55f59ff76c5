package budget_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tollgate/tollgate/budget"
	"github.com/tollgate/tollgate/internal/eventually"
	"github.com/tollgate/tollgate/internal/logbuf"
	"github.com/tollgate/tollgate/internal/testdb"
	"github.com/tollgate/tollgate/seal"
	"github.com/tollgate/tollgate/webhooks"
)

// TestAlertWebhookKeepsItsSecret delivers an alert to webhooks that fail:
// one answers with a redirect, which must not be followed (its target
// receives nothing), one cannot be reached. Each failure is logged, and
// no log line holds the webhook URL's secrets (user info, path, query).
func TestAlertWebhookKeepsItsSecret(t *testing.T) {
	t.Parallel()
	pool, _ := testdb.NewPool(t)
	var reached atomic.Int64
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
	}))
	t.Cleanup(target.Close)
	redirector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target.URL+r.URL.RequestURI(), http.StatusTemporaryRedirect)
	}))
	t.Cleanup(redirector.Close)
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	unreachable := "http://" + closed.Addr().String()
	closed.Close()

	const secretPath, secretQuery, secretUser = "/services/T0/B0/hook-s3cret", "token=tok-s3cret", "hook:pw-s3cret@"
	tests := []struct{ name, base string }{
		{"redirect", redirector.URL},
		{"unreachable", unreachable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			webhook := strings.Replace(tt.base, "http://", "http://"+secretUser, 1) + secretPath + "?" + secretQuery
			var logs logbuf.Buffer
			a := budget.NewAlerter(pool, alertHook(t, pool, webhook), slog.New(slog.NewJSONHandler(&logs, nil)), nil)
			ctx, cancel := context.WithCancel(t.Context())
			done := make(chan struct{})
			go func() { a.Run(ctx); close(done) }()
			t.Cleanup(func() { cancel(); <-done })
			a.Fire([]budget.Alert{{OwnerID: "acme", PeriodStart: time.Unix(0, 0).UTC(), ThresholdPct: 70, SpentMicros: 7, TotalMicros: 10}})

			eventually.Wait(t, "a failed delivery logged", func() bool {
				return strings.Contains(logs.String(), "budget alert webhook failed")
			})
			if n := reached.Load(); n != 0 {
				t.Errorf("the redirect's target received %d webhook posts, want 0", n)
			}
			for _, secret := range []string{"hook-s3cret", "tok-s3cret", "pw-s3cret"} {
				if strings.Contains(logs.String(), secret) {
					t.Errorf("logs hold the webhook's secret %q:\n%s", secret, logs.String())
				}
			}
		})
	}
}

// alertHook is the operator's hook at url, as tollgate serve makes it.
func alertHook(t *testing.T, pool *pgxpool.Pool, url string) budget.Sender {
	t.Helper()
	sealer, err := seal.New(make([]byte, 32))
	if err != nil {
		t.Fatal(err)
	}
	hooks, err := webhooks.New(pool, webhooks.Config{Sealer: sealer,
		Render: func(context.Context, string, string) (json.RawMessage, error) {
			return nil, errors.New("no tasks here")
		}})
	if err != nil {
		t.Fatal(err)
	}
	return hooks.Hook(url, webhooks.Retry{Attempts: budget.AlertAttempts, Base: budget.AlertBackoff, Max: budget.AlertBackoffMax})
}
