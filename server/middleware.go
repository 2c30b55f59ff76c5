package server

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/tollgate/tollgate/accounts"
	"github.com/tollgate/tollgate/metrics"
)

const (
	ctxTraceID   = "tollgate.trace_id"
	ctxPrincipal = "tollgate.principal"
)

// traceID takes the trace id from a W3C traceparent header when one is sent,
// so our logs join the caller's trace, and makes one otherwise.
func traceID(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		id := parseTraceparent(c.Request().Header.Get("traceparent"))
		if id == "" {
			var b [16]byte
			_, _ = rand.Read(b[:])
			id = hex.EncodeToString(b[:])
		}
		c.Set(ctxTraceID, id)
		c.Response().Header().Set("X-Trace-Id", id)
		return next(c)
	}
}

// parseTraceparent returns the trace id of a valid version-00 traceparent,
// or "".
func parseTraceparent(h string) string {
	parts := strings.Split(strings.TrimSpace(h), "-")
	if len(parts) != 4 || parts[0] != "00" || len(parts[1]) != 32 || len(parts[2]) != 16 || len(parts[3]) != 2 {
		return ""
	}
	id := parts[1]
	if _, err := hex.DecodeString(id); err != nil || id != strings.ToLower(id) || id == strings.Repeat("0", 32) {
		return ""
	}
	return id
}

func traceIDOf(c echo.Context) string {
	id, _ := c.Get(ctxTraceID).(string)
	return id
}

// recoverPanics turns a handler panic into a 500 problem, logged by the
// error handler with its trace id.
func recoverPanics(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) (err error) {
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("panic: %v", r)
			}
		}()
		return next(c)
	}
}

// authenticate requires Authorization: Bearer <key> on every route it wraps.
// An address that keeps failing is slowed down (429) for a while.
func authenticate(keys *accounts.Store, limit *authLimiter) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			addr := c.RealIP()
			if blocked, wait := limit.blocked(addr); blocked {
				return tooManyAuthFailures(wait)
			}
			scheme, key, ok := strings.Cut(c.Request().Header.Get("Authorization"), " ")
			if !ok || !strings.EqualFold(scheme, "Bearer") {
				limit.failed(addr)
				return accounts.ErrUnauthenticated
			}
			p, err := keys.Authenticate(c.Request().Context(), strings.TrimSpace(key))
			if errors.Is(err, accounts.ErrUnauthenticated) {
				limit.failed(addr)
			}
			if err != nil {
				return err
			}
			c.Set(ctxPrincipal, p)
			return next(c)
		}
	}
}

func principalOf(c echo.Context) accounts.Principal {
	p, _ := c.Get(ctxPrincipal).(accounts.Principal)
	return p
}

// countRequests counts every request by route pattern (never the raw path,
// which holds ids), method and final status.
func countRequests(m *metrics.Metrics) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			err := next(c)
			if err != nil {
				c.Error(err) // render the problem now, so its status is counted
			}
			route := c.Path()
			if route == "" {
				route = "unmatched"
			}
			m.HTTPRequest(route, c.Request().Method, c.Response().Status)
			return nil
		}
	}
}
