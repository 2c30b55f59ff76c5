package server

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/labstack/echo/v4"

	"github.com/tollgate/tollgate/accounts"
	"github.com/tollgate/tollgate/budget"
	"github.com/tollgate/tollgate/catalog"
	"github.com/tollgate/tollgate/console"
	"github.com/tollgate/tollgate/limits"
	"github.com/tollgate/tollgate/metrics"
	"github.com/tollgate/tollgate/replay"
	"github.com/tollgate/tollgate/routes"
	"github.com/tollgate/tollgate/tasks"
	"github.com/tollgate/tollgate/webhooks"
)

// Deps are the server's collaborators.
type Deps struct {
	Pool     *pgxpool.Pool
	Tasks    *tasks.Service
	Accounts *accounts.Store
	Budgets  *budget.Store
	// Limits holds the rate limits; default one on Pool.
	Limits  *limits.Store
	Replays *replay.Store
	Logger  *slog.Logger
	// MaxBodyBytes caps request bodies; larger ones get 413. Default 1 MiB.
	MaxBodyBytes int64
	// MaxWait caps Prefer: wait=N. Default 60s.
	MaxWait time.Duration
	// Routes answers POST /v1/routes/{name}; nil serves no routes.
	Routes *routes.Service
	// Catalog lists the models GET /v1/models shows.
	Catalog *catalog.Catalog
	// SyncWait bounds how long /v1/chat/completions waits for its task;
	// default 60s.
	SyncWait time.Duration
	// AllowRerun enables POST /v1/tasks/{id}/rerun (TOLLGATE_ALLOW_RERUN=on).
	AllowRerun bool
	// AuthFailures is how many failed authentications an address may make
	// per minute before it gets 429; default 20.
	AuthFailures int
	// Draining reports that the process is shutting down: /readyz then
	// answers 503 so load balancers stop sending work. nil: never.
	Draining func() bool
	// SecureCookies marks console cookies Secure (serve behind TLS).
	SecureCookies bool
	// Metrics is served at /metrics; nil serves an empty registry.
	Metrics *metrics.Metrics
	// MetricsToken, when set, is the bearer token GET /metrics requires
	// (TOLLGATE_METRICS_TOKEN); an admin API key is accepted too. Unset,
	// and without MetricsElsewhere, /metrics needs no key.
	MetricsToken string
	// MetricsElsewhere: the metrics have a listener of their own
	// (TOLLGATE_METRICS_ADDR, see MetricsHandler), so /metrics here
	// answers only an admin API key or MetricsToken.
	MetricsElsewhere bool
	// Webhooks keeps owners' signed webhooks (/v1/owners/{owner}/webhook);
	// nil answers those routes 404.
	Webhooks *webhooks.Service
	// Now is the clock a request is judged by (an expiry must be in the
	// future); default time.Now.
	Now func() time.Time

	// authLimit counts failed authentications per address, for the API
	// and the console's sign-in alike.
	authLimit *authLimiter
}

// New returns the HTTP handler with every route registered.
func New(d Deps) *echo.Echo {
	if d.MaxBodyBytes <= 0 {
		d.MaxBodyBytes = 1 << 20
	}
	if d.AuthFailures <= 0 {
		d.AuthFailures = 20
	}
	if d.SyncWait <= 0 {
		d.SyncWait = 60 * time.Second
	}
	if d.MaxWait <= 0 {
		d.MaxWait = 60 * time.Second
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	if d.Limits == nil {
		d.Limits = limits.NewStore(d.Pool)
	}
	if d.Logger == nil {
		d.Logger = slog.New(slog.DiscardHandler)
	}
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	// Client addresses come from the connection, never from headers a
	// client can forge (X-Forwarded-For): the auth-failure limit keys on it.
	e.IPExtractor = echo.ExtractIPDirect()
	speaks := map[string]errorDialect{} // filled by registerEndpoints, read-only once serving
	e.HTTPErrorHandler = errorHandler(d.Logger, speaks)
	if d.Metrics == nil {
		d.Metrics = metrics.New()
	}
	d.authLimit = newAuthLimiter(d.AuthFailures, time.Minute, time.Now)
	// checkParams guards every route, the console's included: no query
	// parameter, path segment or read header with a NUL or invalid UTF-8
	// reaches a handler.
	e.Use(traceID, logServerErrors(d.Logger), countRequests(d.Metrics), recoverPanics, checkParams)
	registerEndpoints(e, &d, speaks)
	mountConsole(e, &d)
	return e
}

// mountConsole serves the web console at /console/: it calls this same API
// in-process with the signed-in key, so it can show nothing the API would
// not.
func mountConsole(e *echo.Echo, d *Deps) {
	con := console.New(console.Config{
		API: e, SecureCookies: d.SecureCookies, AlertThresholds: budget.DefaultThresholds, Logger: d.Logger,
		Limiter: d.authLimit,
		Auth: func(ctx context.Context, key string) (console.Principal, error) {
			p, err := d.Accounts.Authenticate(ctx, key)
			if errors.Is(err, accounts.ErrUnauthenticated) {
				return console.Principal{}, console.ErrUnauthenticated
			}
			if err != nil {
				return console.Principal{}, err
			}
			return console.Principal{KeyID: p.KeyID, OwnerID: p.OwnerID, Role: string(p.Role), Workload: p.Workload}, nil
		},
	})
	e.Any("/console", echo.WrapHandler(con))
	e.Any("/console/*", echo.WrapHandler(con))
}
