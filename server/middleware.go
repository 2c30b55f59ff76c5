package server

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/tollgate/tollgate/accounts"
	"github.com/tollgate/tollgate/metrics"
	"github.com/tollgate/tollgate/tracing"
)

const (
	ctxTraceID   = "tollgate.trace_id"
	ctxPrincipal = "tollgate.principal"
)

// traceID starts the request's server span, its parent taken from a W3C
// traceparent header when one is sent so the request joins the caller's
// trace. The span's trace id is the request's trace id: in X-Trace-Id, in
// problems, in logs, and carried to the task (tasks read the span from the
// request context). Should no tracer provider be installed, spans have no
// ids and a random trace id stands in.
func traceID(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		req := c.Request()
		method, route := spanMethod(req.Method), c.Path()
		name := method
		if route != "" {
			name += " " + route // the pattern, never the raw path, which holds ids
		}
		ctx, span := tracing.Tracer().Start(tracing.ExtractHTTP(req.Context(), req.Header), name,
			trace.WithSpanKind(trace.SpanKindServer),
			trace.WithAttributes(semconv.HTTPRequestMethodKey.String(method), semconv.HTTPRoute(route)))
		defer span.End()
		c.SetRequest(req.WithContext(ctx))

		id := span.SpanContext().TraceID().String()
		if !span.SpanContext().IsValid() {
			var b [16]byte
			_, _ = rand.Read(b[:])
			id = hex.EncodeToString(b[:])
		}
		c.Set(ctxTraceID, id)
		c.Response().Header().Set("X-Trace-Id", id)
		tracing.InjectHTTP(ctx, c.Response().Header())

		err := next(c)
		status := c.Response().Status
		span.SetAttributes(semconv.HTTPResponseStatusCode(status))
		// Only the error's type or the status: messages may quote the request.
		switch {
		case err != nil:
			span.SetStatus(codes.Error, "")
			span.SetAttributes(semconv.ErrorType(err))
		case status >= 500:
			span.SetStatus(codes.Error, "")
			span.SetAttributes(semconv.ErrorTypeKey.String(strconv.Itoa(status)))
		}
		return err
	}
}

// spanMethod keeps span names and attributes to the methods HTTP defines.
func spanMethod(m string) string {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodConnect, http.MethodOptions, http.MethodTrace:
		return m
	}
	return "_OTHER"
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
	return authenticateBy(keys, limit, bearerKey)
}

// authenticateAnthropic is authenticate for the Anthropic routes, whose
// SDKs send the key as x-api-key: that header, or Authorization: Bearer
// as on every other route. Both at once must name the same key.
func authenticateAnthropic(keys *accounts.Store, limit *authLimiter) echo.MiddlewareFunc {
	return authenticateBy(keys, limit, func(h http.Header) (string, bool) {
		x := strings.TrimSpace(h.Get("x-api-key"))
		bearer, ok := bearerKey(h)
		switch {
		case x == "":
			return bearer, ok
		case h.Get("Authorization") != "" && (!ok || bearer != x):
			return "", false
		}
		return x, true
	})
}

// bearerKey reads Authorization: Bearer <key>.
func bearerKey(h http.Header) (string, bool) {
	scheme, key, ok := strings.Cut(h.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	return strings.TrimSpace(key), true
}

// authenticateBy authenticates the key keyOf reads from the request.
func authenticateBy(keys *accounts.Store, limit *authLimiter, keyOf func(http.Header) (string, bool)) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			addr := c.RealIP()
			if blocked, wait := limit.blocked(addr); blocked {
				return tooManyAuthFailures(wait)
			}
			key, ok := keyOf(c.Request().Header)
			if !ok {
				limit.failed(addr)
				return accounts.ErrUnauthenticated
			}
			p, err := keys.Authenticate(c.Request().Context(), key)
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
// which holds ids), method and final status, and times it: from here, once
// routed, to its answer written, a problem's included.
func countRequests(m *metrics.Metrics) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			start := time.Now()
			err := next(c)
			if err != nil {
				c.Error(err) // render the problem now, so its status is counted
			}
			route := c.Path()
			if route == "" {
				route = "unmatched"
			}
			m.HTTPRequest(route, c.Request().Method, c.Response().Status, time.Since(start))
			return nil
		}
	}
}
