// Package tracing owns Tollgate's OpenTelemetry set-up and the W3C trace
// context that ties one request to the task it creates and to every
// provider call the task makes.
//
// Spans always carry real ids, whether or not they are exported: the trace
// id a client sees in X-Trace-Id, in a problem's trace_id and in our logs is
// the trace id of the request's span, so an operator can find the request
// in the trace backend by the id a customer quotes. Export is off unless
// OTEL_EXPORTER_OTLP_ENDPOINT (or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) is set.
//
// A task is worked later by a River job, possibly on another instance, so
// the context crosses the queue as a traceparent string stored in the job's
// arguments (TraceParent and Extract). Propagation is always W3C Trace
// Context, whatever the global propagator is: a traceparent must round-trip
// through the job even in a process that never called Setup.
//
// Spans name routes, task ids, provider keys, models, outcome classes and
// statuses. They never hold prompts, outputs, API keys or error messages
// that may quote client data.
package tracing
