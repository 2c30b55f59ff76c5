package tracing_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/tollgate/tollgate/tracing"
)

func env(vars map[string]string) func(string) string {
	return func(k string) string { return vars[k] }
}

func TestEndpoint(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		vars map[string]string
		want string
	}{
		{"unset", nil, ""},
		{"base", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, "http://collector:4318/v1/traces"},
		{"base with slash", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318/"}, "http://collector:4318/v1/traces"},
		{"base with path", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "https://otel.example/otlp"}, "https://otel.example/otlp/v1/traces"},
		{"per signal wins, as is", map[string]string{
			"OTEL_EXPORTER_OTLP_ENDPOINT":        "http://collector:4318",
			"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://traces:4318/custom",
		}, "http://traces:4318/custom"},
		{"exporter none", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318", "OTEL_TRACES_EXPORTER": "none"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := tracing.Endpoint(env(tt.vars)); got != tt.want {
				t.Errorf("Endpoint = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestTraceParentRoundTrip(t *testing.T) {
	t.Parallel()
	tp := sdktrace.NewTracerProvider()
	ctx, span := tp.Tracer("test").Start(context.Background(), "request")
	defer span.End()

	h := tracing.TraceParent(ctx)
	if len(h) != 55 {
		t.Fatalf("TraceParent = %q, want a 55-character version-00 traceparent", h)
	}
	got := trace.SpanContextFromContext(tracing.Extract(context.Background(), h))
	if !got.IsRemote() || got.TraceID() != span.SpanContext().TraceID() || got.SpanID() != span.SpanContext().SpanID() {
		t.Errorf("Extract(%q) = %v, want the remote context of %v", h, got, span.SpanContext())
	}

	for _, bad := range []string{"", "garbage", "00-00000000000000000000000000000000-0000000000000001-01"} {
		if sc := trace.SpanContextFromContext(tracing.Extract(context.Background(), bad)); sc.IsValid() {
			t.Errorf("Extract(%q) = %v, want no span context", bad, sc)
		}
	}
	if h := tracing.TraceParent(context.Background()); h != "" {
		t.Errorf("TraceParent without a span = %q, want \"\"", h)
	}
}

func TestHTTPHeaders(t *testing.T) {
	t.Parallel()
	in := http.Header{}
	in.Set("Traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	ctx := tracing.ExtractHTTP(context.Background(), in)
	out := http.Header{}
	tracing.InjectHTTP(ctx, out)
	if diff := cmp.Diff(in.Get("traceparent"), out.Get("traceparent")); diff != "" {
		t.Errorf("traceparent mismatch (-want +got):\n%s", diff)
	}
}

// restoreGlobals puts back the global provider and propagator a test
// replaces. Tests that call it must not run in parallel.
func restoreGlobals(t *testing.T) {
	t.Helper()
	tp, prop := otel.GetTracerProvider(), otel.GetTextMapPropagator()
	t.Cleanup(func() {
		otel.SetTracerProvider(tp)
		otel.SetTextMapPropagator(prop)
	})
}

// TestSetupWithoutExporter: with export off, spans still get real ids, and
// the global propagator speaks W3C Trace Context. Not parallel, like every
// test that calls Setup: it replaces the global provider.
func TestSetupWithoutExporter(t *testing.T) {
	restoreGlobals(t)
	shutdown, err := tracing.Setup(context.Background(), env(nil), "tollgate-test", "v0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, span := tracing.Tracer().Start(context.Background(), "request")
	if !span.SpanContext().IsValid() || !span.SpanContext().IsSampled() {
		t.Errorf("span context %v, want valid and sampled", span.SpanContext())
	}
	carrier := http.Header{}
	otel.GetTextMapPropagator().Inject(ctx, propagation.HeaderCarrier(carrier))
	if got, want := carrier.Get("traceparent"), tracing.TraceParent(ctx); got != want || got == "" {
		t.Errorf("global propagator wrote traceparent %q, want %q", got, want)
	}
	span.End()
	if err := shutdown(context.Background()); err != nil {
		t.Errorf("shutdown: %v", err)
	}
}

// TestSetupExportsOTLP: with OTEL_EXPORTER_OTLP_ENDPOINT set, ended spans
// reach the collector at <endpoint>/v1/traces by shutdown at the latest.
func TestSetupExportsOTLP(t *testing.T) {
	restoreGlobals(t)
	var mu sync.Mutex
	var paths []string
	var bodies int
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		paths = append(paths, r.URL.Path)
		if len(b) > 0 && r.Header.Get("Content-Type") == "application/x-protobuf" {
			bodies++
		}
		mu.Unlock()
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	defer collector.Close()

	shutdown, err := tracing.Setup(context.Background(), env(map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": collector.URL}), "tollgate-test", "v0")
	if err != nil {
		t.Fatal(err)
	}
	_, span := tracing.Tracer().Start(context.Background(), "request")
	span.End()
	if err := shutdown(context.Background()); err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if diff := cmp.Diff([]string{"/v1/traces"}, paths); diff != "" || bodies != 1 {
		t.Errorf("collector requests mismatch (-want +got):\n%s(protobuf bodies: %d, want 1)", diff, bodies)
	}
}

// TestSetupRejectsBadEndpoint: a misconfigured endpoint stops the start
// rather than losing every span.
func TestSetupRejectsBadEndpoint(t *testing.T) {
	restoreGlobals(t)
	if _, err := tracing.Setup(context.Background(), env(map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "collector:4318"}), "tollgate-test", "v0"); err == nil {
		t.Error("Setup accepted an endpoint without a scheme, want an error")
	}
}

// TestExportNeverFollowsARedirect: a collector answering 307 or 308 gets
// the spans' export refused, and the location it names receives nothing,
// neither the spans nor the exporter's headers.
func TestExportNeverFollowsARedirect(t *testing.T) {
	for _, status := range []int{http.StatusTemporaryRedirect, http.StatusPermanentRedirect} {
		t.Run(strconv.Itoa(status), func(t *testing.T) {
			restoreGlobals(t)
			var mu sync.Mutex
			elsewhere := 0
			target := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
				mu.Lock()
				elsewhere++
				mu.Unlock()
			}))
			defer target.Close()
			collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				http.Redirect(w, r, target.URL+"/v1/traces", status)
			}))
			defer collector.Close()

			shutdown, err := tracing.Setup(context.Background(), env(map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": collector.URL}), "tollgate-test", "v0")
			if err != nil {
				t.Fatal(err)
			}
			_, span := tracing.Tracer().Start(context.Background(), "request")
			span.End()
			_ = shutdown(context.Background()) // the export fails: that is the point
			mu.Lock()
			defer mu.Unlock()
			if elsewhere != 0 {
				t.Errorf("the redirect's target received %d requests, want 0", elsewhere)
			}
		})
	}
}
