package tracing

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"path"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/tollgate/tollgate/internal/logsafe"
)

// instrumentation names Tollgate's tracer, its instrumentation scope.
const instrumentation = "github.com/tollgate/tollgate"

// Tracer returns Tollgate's tracer from the global TracerProvider. It is
// looked up on each call, not kept, so spans follow the provider Setup
// installs, including one installed after the caller was built. Before
// Setup the global provider is a no-op and spans have no valid ids.
func Tracer() trace.Tracer {
	return otel.Tracer(instrumentation)
}

// Endpoint returns the OTLP/HTTP URL spans are exported to, built from the
// standard variables as the OpenTelemetry specification says:
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT as is, else OTEL_EXPORTER_OTLP_ENDPOINT
// as a base to which /v1/traces is appended. It returns "" when export is
// off: neither is set, or OTEL_TRACES_EXPORTER is "none".
func Endpoint(getenv func(string) string) string {
	if getenv("OTEL_TRACES_EXPORTER") == "none" {
		return ""
	}
	if u := getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"); u != "" {
		return u
	}
	base := getenv("OTEL_EXPORTER_OTLP_ENDPOINT")
	if base == "" {
		return ""
	}
	u, err := url.Parse(base)
	if err != nil {
		return base // Setup reports it
	}
	u.Path = path.Join("/", u.Path, "v1/traces")
	return u.String()
}

// Setup installs the global TracerProvider and the W3C Trace Context
// propagator. With an endpoint (see Endpoint) spans are batched and sent
// over OTLP/HTTP; the exporter reads the other standard variables itself
// (OTEL_EXPORTER_OTLP_HEADERS, _TIMEOUT, _COMPRESSION, certificates), as
// the SDK reads OTEL_TRACES_SAMPLER, OTEL_BSP_* and OTEL_RESOURCE_ATTRIBUTES.
// Without one the provider has no exporter: spans are still sampled and
// get real ids, and go nowhere.
//
// The returned shutdown flushes spans not yet sent; call it once, after
// the work that makes spans has stopped, with a context that bounds the
// wait. Setup returns an error for an endpoint that is not an absolute URL
// or an exporter that cannot be built; nothing is installed then.
func Setup(ctx context.Context, getenv func(string) string, serviceName, version string) (shutdown func(context.Context) error, err error) {
	res, err := resource.New(ctx,
		resource.WithTelemetrySDK(),
		resource.WithAttributes(semconv.ServiceName(serviceName), semconv.ServiceVersion(version)),
		resource.WithFromEnv(), // OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES win over ours
	)
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		// A partial resource (a malformed OTEL_RESOURCE_ATTRIBUTES entry)
		// still names the service; only a failed one stops the start.
		return nil, fmt.Errorf("tracing: resource: %w", err)
	}
	opts := []sdktrace.TracerProviderOption{sdktrace.WithResource(res)}
	if endpoint := Endpoint(getenv); endpoint != "" {
		if u, err := url.Parse(endpoint); err != nil || u.Scheme == "" || u.Host == "" {
			return nil, fmt.Errorf("tracing: OTLP endpoint %q is not an absolute URL such as http://collector:4318", logsafe.URL(endpoint))
		}
		client, err := exportClient(getenv)
		if err != nil {
			return nil, err
		}
		exp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(endpoint), otlptracehttp.WithHTTPClient(client))
		if err != nil {
			return nil, fmt.Errorf("tracing: OTLP exporter: %w", err)
		}
		opts = append(opts, sdktrace.WithBatcher(exp))
	}
	tp := sdktrace.NewTracerProvider(opts...)
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.TraceContext{})
	return tp.Shutdown, nil
}

// LogErrors sends the OpenTelemetry SDK's own errors (a failed export, most
// often) to log as warnings, their text through logsafe: the SDK's default
// prints them to stderr whole, and an export error quotes the endpoint URL.
func LogErrors(log *slog.Logger) {
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		log.Warn("tracing: the OpenTelemetry SDK failed", logsafe.ErrorAttr(err))
	}))
}
