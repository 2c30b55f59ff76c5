package console

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"time"
)

// Prefix is the path the console is mounted at. The handler New returns
// expects full request paths (it does not strip the prefix itself).
const Prefix = "/console/"

// SessionTTL is how long a sign-in lasts. Sessions end at this age however
// active they are, so a key left signed in on a shared machine stops
// working the same working day.
const SessionTTL = 8 * time.Hour

// Principal is who an API key authenticates as.
type Principal struct {
	KeyID    string
	OwnerID  string
	Role     string // client, support, finance or admin
	Workload string // "" when the key has none
}

// ErrUnauthenticated is the error an Authenticator returns, or wraps, for a
// key it does not know or that was revoked.
var ErrUnauthenticated = errors.New("console: unknown or revoked key")

// Authenticator resolves an API key to its principal. It returns an error
// wrapping ErrUnauthenticated for an unknown or revoked key; any other
// error is taken to mean the key store is unavailable, and sign-in answers
// 503 rather than calling a good key bad.
type Authenticator func(ctx context.Context, key string) (Principal, error)

// Config is what the console needs from the server.
type Config struct {
	// API is the Tollgate API handler. The console calls it in process for
	// every /console/api/... read, with the session's key as bearer token.
	API http.Handler
	// Auth checks a key at sign-in.
	Auth Authenticator
	// SecureCookies marks the session cookie Secure; set it when the
	// console is served over TLS.
	SecureCookies bool
	// Now is the clock for session expiry; nil means time.Now.
	Now func() time.Time
	// AlertThresholds are the budget alert thresholds in percent spent,
	// marked on the finance page's utilisation bars; pass the ones the
	// server alerts on. nil means 70 and 90, budget.DefaultThresholds.
	AlertThresholds []int
	// Logger receives failures of Auth other than ErrUnauthenticated; nil
	// discards them.
	Logger *slog.Logger
	// Limiter counts failed sign-ins per client address and refuses an
	// address that failed too often (429). Pass the API's own, so that
	// guesses at the console and at the API count together. nil: no limit.
	Limiter FailureLimiter
}

// FailureLimiter slows down an address that keeps failing authentication.
type FailureLimiter interface {
	// Blocked reports whether addr must wait before trying again, and how
	// long.
	Blocked(addr string) (bool, time.Duration)
	// Failed records one failed attempt from addr.
	Failed(addr string)
}

type noLimit struct{}

func (noLimit) Blocked(string) (bool, time.Duration) { return false, 0 }
func (noLimit) Failed(string)                        {}

// console serves the front end, the session endpoints and the proxy.
type console struct {
	api        http.Handler
	auth       Authenticator
	secure     bool
	thresholds []int
	log        *slog.Logger
	limit      FailureLimiter
	sessions   *sessions
	assets     map[string]asset
}

// New returns the console's handler, to be mounted at Prefix (and at
// "/console", which it redirects to Prefix). It panics if cfg.API or
// cfg.Auth is nil or the embedded assets are unreadable: those are wiring
// mistakes, not run-time conditions.
func New(cfg Config) http.Handler {
	if cfg.API == nil || cfg.Auth == nil {
		panic("console: Config.API and Config.Auth are required")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.AlertThresholds == nil {
		cfg.AlertThresholds = []int{70, 90}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Limiter == nil {
		cfg.Limiter = noLimit{}
	}
	assets, err := loadAssets()
	if err != nil {
		panic(err)
	}
	c := &console{
		api:        cfg.API,
		auth:       cfg.Auth,
		secure:     cfg.SecureCookies,
		thresholds: append([]int(nil), cfg.AlertThresholds...),
		log:        cfg.Logger,
		limit:      cfg.Limiter,
		sessions:   newSessions(cfg.Now),
		assets:     assets,
	}
	cop := http.NewCrossOriginProtection()
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeProblem(w, http.StatusForbidden, "forbidden", "Cross-origin requests may not change the console's state.")
	}))
	return securityHeaders(cop.Handler(c.routes()))
}

// problem is the console's own error document, shaped like the API's
// (RFC 9457 with a code) so that the front end handles both alike.
type problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Code   string `json:"code"`
	Detail string `json:"detail,omitempty"`
}

func writeProblem(w http.ResponseWriter, status int, code, detail string) {
	w.Header().Set("Content-Type", "application/problem+json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(problem{Type: "about:blank", Title: http.StatusText(status), Status: status, Code: code, Detail: detail})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
