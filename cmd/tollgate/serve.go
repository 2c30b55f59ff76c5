package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tollgate/tollgate/accounts"
	"github.com/tollgate/tollgate/budget"
	"github.com/tollgate/tollgate/internal/logsafe"
	"github.com/tollgate/tollgate/internal/pgstats"
	"github.com/tollgate/tollgate/metrics"
	"github.com/tollgate/tollgate/migrations"
	"github.com/tollgate/tollgate/provider"
	"github.com/tollgate/tollgate/provider/fake"
	"github.com/tollgate/tollgate/replay"
	"github.com/tollgate/tollgate/routes"
	"github.com/tollgate/tollgate/seal"
	"github.com/tollgate/tollgate/server"
	"github.com/tollgate/tollgate/tasks"
	"github.com/tollgate/tollgate/tracing"
	"github.com/tollgate/tollgate/webhooks"
)

func newLogger(format string, w io.Writer) (*slog.Logger, error) {
	switch format {
	case "json", "":
		return slog.New(slog.NewJSONHandler(w, nil)), nil
	case "text":
		return slog.New(slog.NewTextHandler(w, nil)), nil
	}
	return nil, fmt.Errorf("--log-format must be json or text, not %q", format)
}

// serve runs the API and the workers until ctx ends, then shuts down in
// order (stopServing): answer /readyz 503 draining for the drain delay,
// stop accepting requests, let running tasks finish (or hand them back to
// the queue), close the pool.
func serve(ctx context.Context, args []string, getenv func(string) string, _, stderr io.Writer) error {
	role, log, cfg, err := serveSetup(args, getenv, stderr)
	if err != nil {
		return err
	}
	shutdownTracing, err := tracing.Setup(ctx, getenv, "tollgate", buildVersion())
	if err != nil {
		return err
	}
	tracing.LogErrors(log)
	// Deferred first, so it runs last: the spans of the final requests and
	// tasks are flushed once the server and the workers have stopped.
	defer func() {
		tctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := shutdownTracing(tctx); err != nil {
			log.Warn("tracing: spans not flushed at shutdown", logsafe.ErrorAttr(err))
		}
	}()
	log.Info("tracing", slog.Bool("otlp_export", tracing.Endpoint(getenv) != ""))

	pool, err := openDatabase(ctx, cfg.DatabaseURL, cfg.Migrate)
	if err != nil {
		return err
	}
	defer pool.Close()
	a, err := assemble(ctx, pool, cfg, getenv, log)
	if err != nil {
		return err
	}
	defer a.close()

	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.Addr, err)
	}
	srv := newHTTPServer(a.handler, cfg, log)
	workCtx, stopWork := context.WithCancel(context.WithoutCancel(ctx))
	defer stopWork()
	if err := a.startWork(workCtx, role, cfg, getenv, log); err != nil {
		return err
	}
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()
	log.Info("tollgate listening", slog.String("addr", ln.Addr().String()), slog.String("role", role))

	select {
	case <-ctx.Done():
	case err := <-serveErr:
		stopWork()
		return fmt.Errorf("http server: %w", err)
	}
	err = stopServing(srv, a.svc, &a.draining, cfg, log)
	stopWork()
	log.Info("tollgate stopped")
	return err
}

// serveSetup reads serve's flags and configuration and logs the start:
// the role (api, worker or all), the logger, the configuration.
func serveSetup(args []string, getenv func(string) string, stderr io.Writer) (string, *slog.Logger, config, error) {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	logFormat := fs.String("log-format", "json", "log format: json or text")
	role := fs.String("role", "all", "api (serves the API, runs no tasks), worker (runs tasks; still serves the API, health and metrics) or all")
	if err := fs.Parse(args); err != nil {
		return "", nil, config{}, err
	}
	log, err := newLogger(*logFormat, stderr)
	if err != nil {
		return "", nil, config{}, err
	}
	if *role != "api" && *role != "worker" && *role != "all" {
		return "", nil, config{}, fmt.Errorf("--role must be api, worker or all, not %q", *role)
	}
	cfg, err := loadConfig(getenv)
	if err != nil {
		return "", nil, config{}, err
	}
	log.Info("tollgate starting", slog.Any("config", cfg.logValue()), slog.String("version", buildVersion()))
	return *role, log, cfg, nil
}

// app is what serve runs: the services on one pool and the HTTP handler
// over them.
type app struct {
	pool     *pgxpool.Pool
	svc      *tasks.Service
	alerter  *budget.Alerter
	keys     *accounts.Store
	metrics  *metrics.Metrics
	handler  http.Handler
	draining atomic.Bool
	close    func() // stops the in-process fake provider, if any
}

// assemble builds the services on pool as cfg says: the provider clients
// (the in-process fake when the catalog names it), the data key, metrics,
// alerts, webhooks, tasks, routes and the HTTP handler.
func assemble(ctx context.Context, pool *pgxpool.Pool, cfg config, getenv func(string) string, log *slog.Logger) (*app, error) {
	a := &app{pool: pool, close: func() {}}
	fakeRoot := ""
	if cfg.Catalog.UsesFake() {
		fp, addr, err := startFake(cfg.FakeAddr, log)
		if err != nil {
			return nil, err
		}
		a.close = fp.stop
		fakeRoot = "http://" + addr
		log.Warn("a provider points at the in-process fake provider (MODEL_BASE_URL unset or base_url: fake): ALL ITS MODEL OUTPUTS ARE FAKE",
			slog.String("fake_provider_addr", addr))
	}
	ok := false
	defer func() {
		if !ok {
			a.close()
		}
	}()
	// One client for every provider, keeping as many idle connections to a
	// host as there may be calls open to it: a plain http.Client keeps two
	// and dials (with TLS, against a real provider) for every other call.
	clients, err := cfg.Catalog.Clients(provider.NewHTTPClient(cfg.Workers), fakeRoot)
	if err != nil {
		return nil, err
	}
	sealer, err := dataSealer(ctx, pool, getenv, log)
	if err != nil {
		return nil, err
	}
	a.metrics = metrics.New()
	m := a.metrics
	m.WatchDatabase(pool, log, cfg.Catalog.ProviderKeys())
	// The webhooks render tasks with the service made just below.
	hooks, err := webhooks.New(pool, webhooks.Config{
		Sealer: sealer, Render: server.RenderTask(&a.svc), NotFound: tasks.ErrNotFound, Metrics: m, Logger: log,
		Addresses: webhooks.AddressPolicy{Allow: cfg.WebhookAllow},
	})
	if err != nil {
		return nil, err
	}
	a.alerter = budget.NewAlerter(pool, alertHook(hooks, getenv("TOLLGATE_ALERT_WEBHOOK")), log, func(al budget.Alert) { m.BudgetAlert(al.ThresholdPct) })
	a.svc, err = tasks.New(pool, tasksConfig(cfg, getenv, tasks.Config{Webhooks: hooks, Clients: clients, Metrics: m,
		Alerter: a.alerter, Sealer: sealer, Logger: log}))
	if err != nil {
		return nil, err
	}
	compiled, err := routes.Compile(cfg.Catalog)
	if err != nil {
		return nil, err
	}
	routeSvc := routes.New(routes.Deps{Pool: pool, Tasks: a.svc, Catalog: cfg.Catalog, Routes: compiled, Metrics: m, Log: log})
	a.keys = accounts.NewStore(pool)
	a.handler = server.New(server.Deps{
		Draining: a.draining.Load,
		Routes:   routeSvc, SecureCookies: getenv("TOLLGATE_SECURE_COOKIES") == "on",
		Pool: pool, Tasks: a.svc, Accounts: a.keys, Budgets: budget.NewStore(pool, nil),
		Replays: replay.NewStore(pool), Logger: log, MaxBodyBytes: cfg.MaxBodyBytes, Metrics: m,
		AllowRerun: getenv("TOLLGATE_ALLOW_RERUN") == "on", Catalog: cfg.Catalog, SyncWait: cfg.SyncWait,
		MetricsToken: cfg.MetricsToken, MetricsElsewhere: cfg.MetricsAddr != "", Webhooks: hooks,
	})
	if cfg.MetricsAddr == "" && cfg.MetricsToken == "" {
		log.Warn("GET /metrics needs no key and names owners with their budget use: keep it off public networks, or set TOLLGATE_METRICS_TOKEN or TOLLGATE_METRICS_ADDR")
	}
	ok = true
	return a, nil
}

// alertHook is the budget alerts' webhook at url, delivered as owners'
// webhooks are; nil when url is empty.
func alertHook(hooks *webhooks.Service, url string) budget.Sender {
	if url == "" {
		return nil
	}
	return hooks.Hook(url, webhooks.Retry{Attempts: budget.AlertAttempts, Base: budget.AlertBackoff, Max: budget.AlertBackoffMax})
}

// dataSealer is the sealer of the data key: TOLLGATE_DATA_KEY, or the key
// kept in the database, with a warning.
func dataSealer(ctx context.Context, pool *pgxpool.Pool, getenv func(string) string, log *slog.Logger) (*seal.Sealer, error) {
	key, keyFromDB, err := seal.DataKey(ctx, pool, getenv("TOLLGATE_DATA_KEY"))
	if err != nil {
		return nil, err
	}
	if keyFromDB {
		log.Warn("TOLLGATE_DATA_KEY is not set: prompts and outputs are sealed with a key kept in the database; set it (openssl rand -base64 32) so that database dumps do not carry the key")
	}
	return seal.New(key)
}

// tasksConfig is c, the task service's collaborators, with cfg's settings.
func tasksConfig(cfg config, getenv func(string) string, c tasks.Config) tasks.Config {
	c.Catalog = cfg.Catalog
	c.DefaultMaxTokens, c.RequestTimeout = cfg.DefaultMaxTokens, cfg.RequestTimeout
	c.MaxAttempts, c.MaxWorkers, c.BuildVersion = cfg.MaxAttempts, cfg.Workers, buildVersion()
	// River sends at most one insert notification per queue per
	// FetchCooldown, so a job inserted just after another may wait for
	// the next poll: FetchPoll bounds that wait (one cheap query per
	// queue per poll when idle), which sequential synchronous calls
	// would otherwise see as a 200 ms tail.
	c.FetchCooldown, c.FetchPoll, c.RescueAfter = 20*time.Millisecond, 50*time.Millisecond, cfg.RescueAfter
	// A task's first attempt runs on arrival unless this is off: then
	// every attempt waits for River's fetch.
	c.QueueOnly = getenv("TOLLGATE_RUN_ON_ARRIVAL") == "off"
	// Zero in the environment turns a bound off; zero in Config takes
	// its default.
	c.MaxAdmitting, c.ShedAdmittingAfter, c.ShedQueueWait = orNone(cfg.MaxAdmitting), cfg.MaxAdmissionWait, orNone(cfg.ShedQueueWait)
	c.FailureReplayWindow = orNone(cfg.FailureReplayWindow)
	return c
}

// startWork starts what runs beside the API until ctx ends: the task
// workers (or, for the api role, only the finish listener), alerts, the
// key cache, statistics, and the metrics and profile listeners when
// configured.
func (a *app) startWork(ctx context.Context, role string, cfg config, getenv func(string) string, log *slog.Logger) error {
	if role == "api" {
		a.svc.StartListener(ctx)
	} else if err := a.svc.Start(ctx); err != nil {
		return err
	}
	go a.alerter.Run(ctx)
	// Keys are answered from memory; a revocation anywhere reaches every
	// instance's cache by NOTIFY (accounts.Store.CacheKeys).
	go a.keys.CacheKeys(ctx, accounts.CacheOptions{Logger: log})
	// Statements prepared while a table was empty keep that plan until
	// the table is analyzed; a fresh database gets its first ANALYZE
	// within seconds of holding data, not at autovacuum's first pass.
	go pgstats.Run(ctx, a.pool, 5*time.Second, pgstats.DefaultMinBytes, log)
	if cfg.MetricsAddr != "" {
		if err := startMetrics(ctx, cfg.MetricsAddr, server.MetricsHandler(a.metrics.Registry, cfg.MetricsToken), log); err != nil {
			return err
		}
	}
	if addr := getenv("TOLLGATE_PPROF_ADDR"); addr != "" {
		if err := startPprof(ctx, addr, log); err != nil {
			return err
		}
	}
	return nil
}

// stopServing shuts serve down in order. /readyz answers 503 draining at
// once, while the listener keeps serving (health included) for
// cfg.DrainDelay: a load balancer or a Kubernetes readiness probe must see
// the drain and stop sending before the port closes, or the requests it
// sends meanwhile are refused. Then the listener closes and requests in
// flight get 15 s; running tasks get cfg.DrainTimeout, each limit on a
// fresh context.
func stopServing(srv *http.Server, svc *tasks.Service, draining *atomic.Bool, cfg config, log *slog.Logger) error {
	draining.Store(true)
	log.Info("shutting down: /readyz answers 503 draining; still serving for the drain delay", slog.String("drain_delay", cfg.DrainDelay.String()))
	<-time.After(cfg.DrainDelay)
	log.Info("shutting down: no new requests; waiting for running tasks", slog.String("drain_timeout", cfg.DrainTimeout.String()))
	shutCtx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	httpErr := srv.Shutdown(shutCtx)
	stopCtx, cancel2 := context.WithTimeout(context.Background(), cfg.DrainTimeout)
	defer cancel2()
	workErr := svc.Stop(stopCtx)
	return errors.Join(httpErr, workErr)
}

// startPprof serves Go's profiles (/debug/pprof/) on their own listener,
// only when TOLLGATE_PPROF_ADDR names one: profiles show code paths and
// timings, never request data, but they are for operators, so they stay off
// the API's address. Bind it to localhost.
func startPprof(ctx context.Context, addr string, log *slog.Logger) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("TOLLGATE_PPROF_ADDR: listen on %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	log.Info("pprof listening", slog.String("addr", ln.Addr().String()))
	return nil
}

// startMetrics serves GET /metrics on its own listener
// (TOLLGATE_METRICS_ADDR), for a scraper on a private network: the API's
// address then answers /metrics to admin keys and the token only.
func startMetrics(ctx context.Context, addr string, h http.Handler, log *slog.Logger) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("TOLLGATE_METRICS_ADDR: listen on %s: %w", addr, err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, WriteTimeout: time.Minute,
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	go func() { _ = srv.Serve(ln) }()
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	log.Info("metrics listening", slog.String("addr", ln.Addr().String()))
	return nil
}

// defaultPoolConns is the pool size unless DATABASE_URL sets
// pool_max_conns. Each instance also holds three LISTEN connections
// (River's, the completion listener's and the API key cache's).
const defaultPoolConns = 20

// openDatabase creates and migrates the database unless told not to, then
// opens a pool and pings it: a pool connects lazily, and a service that
// cannot reach its database should fail at start, not at first request.
func openDatabase(ctx context.Context, databaseURL string, migrate bool) (*pgxpool.Pool, error) {
	if migrate {
		if err := migrations.EnsureDatabase(ctx, databaseURL); err != nil {
			return nil, err
		}
		m, err := migrations.New(databaseURL)
		if err != nil {
			return nil, err
		}
		upErr := m.Up()
		if err := errors.Join(upErr, m.Close()); err != nil {
			return nil, err
		}
	}
	pcfg, err := pgxpool.ParseConfig(databaseURL)
	if err != nil {
		return nil, fmt.Errorf("database: %w", err)
	}
	if !strings.Contains(databaseURL, "pool_max_conns") {
		// pgx's default, max(4, CPUs), starves the API, River and the
		// workers on a small machine; the measured knee is past 16.
		pcfg.MaxConns = defaultPoolConns
	}
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, fmt.Errorf("database: %w", err)
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := pool.Ping(pctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("database: ping: %w", err)
	}
	return pool, nil
}

type fakeProc struct {
	fp  *fake.Server
	srv *http.Server
}

func (f *fakeProc) stop() {
	f.fp.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = f.srv.Shutdown(ctx)
}

// startFake serves the in-process fake provider on addr (TOLLGATE_FAKE_ADDR;
// port 0 picks a free one). It fails when addr cannot be listened on.
func startFake(addr string, log *slog.Logger) (*fakeProc, string, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, "", fmt.Errorf("fake provider (TOLLGATE_FAKE_ADDR): listen on %s: %w", addr, err)
	}
	// A long-lived fake keeps no request bodies: its call log would grow
	// without bound.
	fp := fake.New(fake.WithoutCallBodies())
	srv := &http.Server{Handler: fp, ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	go func() { _ = srv.Serve(ln) }()
	return &fakeProc{fp: fp, srv: srv}, ln.Addr().String(), nil
}

// fakeProvider runs the fake provider alone, for tests and demos of other
// tools: `tollgate fakeprovider` with FAKE_ADDR (default 127.0.0.1:9090).
func fakeProvider(ctx context.Context, getenv func(string) string, stderr io.Writer) error {
	log := slog.New(slog.NewJSONHandler(stderr, nil))
	addr := orDefault(getenv("FAKE_ADDR"), "127.0.0.1:9090")
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("fake provider: listen on %s: %w", addr, err)
	}
	fp := fake.New(fake.WithoutCallBodies())
	srv := &http.Server{Handler: fp, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	log.Warn("fake model provider listening: outputs are fake", slog.String("addr", ln.Addr().String()))
	<-ctx.Done()
	fp.Close()
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return srv.Shutdown(sctx)
}

// newHTTPServer bounds every phase of a connection, so that a slow or
// stalled client cannot hold one forever: headers within 10s, the body
// within 30s, the response (a synchronous wait or a stream included)
// within the longest legitimate answer plus a margin, idle keep-alives
// for 2 minutes.
func newHTTPServer(h http.Handler, cfg config, log *slog.Logger) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: cfg.HeaderTimeout,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      max(cfg.SyncWait, cfg.RequestTimeout, 60*time.Second) + 30*time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
}
