package tracing

import (
	"context"
	"net/http"

	"go.opentelemetry.io/otel/propagation"
)

// w3c is the one propagation format Tollgate speaks. It is used directly
// rather than through the global propagator, so that a traceparent stored
// in a job is read back the same way in any process.
var w3c propagation.TraceContext

// TraceParent returns the W3C traceparent of the span in ctx, to be stored
// where the work continues later (a River job's arguments). It returns ""
// when ctx holds no span with valid ids.
func TraceParent(ctx context.Context) string {
	c := propagation.MapCarrier{}
	w3c.Inject(ctx, c)
	return c.Get("traceparent")
}

// Extract returns ctx with the remote span context of a traceparent made by
// TraceParent as the parent of spans started from it. An empty or invalid
// traceparent returns ctx unchanged: spans started from it begin a trace.
func Extract(ctx context.Context, traceparent string) context.Context {
	if traceparent == "" {
		return ctx
	}
	return w3c.Extract(ctx, propagation.MapCarrier{"traceparent": traceparent})
}

// ExtractHTTP is Extract for the traceparent (and tracestate) headers of
// an incoming request.
func ExtractHTTP(ctx context.Context, h http.Header) context.Context {
	return w3c.Extract(ctx, propagation.HeaderCarrier(h))
}

// InjectHTTP sets the traceparent (and tracestate) headers of the span in
// ctx on h; it sets nothing when ctx holds no span with valid ids.
func InjectHTTP(ctx context.Context, h http.Header) {
	w3c.Inject(ctx, propagation.HeaderCarrier(h))
}
