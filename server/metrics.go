package server

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/tollgate/tollgate/accounts"
)

// The metrics name owners and their budget use, so who may read them is
// configured (docs/operations.md, Metrics): open on the API's address by default;
// with Deps.MetricsToken, only that bearer token or an admin API key; with
// Deps.MetricsElsewhere (TOLLGATE_METRICS_ADDR), only an admin API key
// here, and the scraper reads MetricsHandler on its own listener. An admin
// key always reads them: the console's operators page does so.

// metricsEndpoint answers GET /metrics on the API's address.
func metricsEndpoint(d *Deps) echo.HandlerFunc {
	h := promhttp.HandlerFor(d.Metrics.Registry, promhttp.HandlerOpts{})
	open := d.MetricsToken == "" && !d.MetricsElsewhere
	return func(c echo.Context) error {
		if !open {
			if err := metricsAllowed(c, d); err != nil {
				return err
			}
		}
		h.ServeHTTP(c.Response(), c.Request())
		return nil
	}
}

// metricsAllowed accepts the metrics token or an admin API key, counting
// failures against the address like every other authentication.
func metricsAllowed(c echo.Context, d *Deps) error {
	addr := c.RealIP()
	if blocked, wait := d.authLimit.blocked(addr); blocked {
		return tooManyAuthFailures(wait)
	}
	c.Response().Header().Set("WWW-Authenticate", `Bearer realm="tollgate metrics"`)
	token, ok := bearer(c.Request())
	if !ok {
		d.authLimit.failed(addr)
		return accounts.ErrUnauthenticated
	}
	if d.MetricsToken != "" && sameSecret(token, d.MetricsToken) {
		return nil
	}
	p, err := d.Accounts.Authenticate(c.Request().Context(), token)
	if errors.Is(err, accounts.ErrUnauthenticated) {
		d.authLimit.failed(addr)
	}
	if err != nil {
		return err
	}
	if p.Role != accounts.RoleAdmin {
		return forbidden("Metrics are for the metrics token or an admin key.")
	}
	return nil
}

// MetricsHandler serves reg's metrics on a listener of their own
// (TOLLGATE_METRICS_ADDR). With a token, a request must carry it as
// "Authorization: Bearer <token>" (401 otherwise); without one, the
// listener's address is the only protection.
func MetricsHandler(reg *prometheus.Registry, token string) http.Handler {
	h := promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
	mux := http.NewServeMux()
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, r *http.Request) {
		if token != "" {
			if got, ok := bearer(r); !ok || !sameSecret(got, token) {
				w.Header().Set("WWW-Authenticate", `Bearer realm="tollgate metrics"`)
				http.Error(w, "401 unauthorized: send the metrics token as a bearer token", http.StatusUnauthorized)
				return
			}
		}
		h.ServeHTTP(w, r)
	})
	return mux
}

func bearer(r *http.Request) (string, bool) {
	scheme, tok, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	tok = strings.TrimSpace(tok)
	return tok, ok && strings.EqualFold(scheme, "Bearer") && tok != ""
}

// sameSecret compares in constant time, whatever the lengths.
func sameSecret(a, b string) bool {
	ha, hb := sha256.Sum256([]byte(a)), sha256.Sum256([]byte(b))
	return subtle.ConstantTimeCompare(ha[:], hb[:]) == 1
}
