package server_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/tollgate/tollgate/accounts"
)

// recordSpans installs a global tracer provider that keeps every ended span
// in memory, and puts the previous one back when the test ends. Tests that
// call it must not be parallel: the provider is process-wide.
func recordSpans(t *testing.T) *tracetest.SpanRecorder {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	prev := otel.GetTracerProvider()
	otel.SetTracerProvider(tp)
	t.Cleanup(func() {
		otel.SetTracerProvider(prev)
		_ = tp.Shutdown(context.Background())
	})
	return rec
}

// spanNamed returns the ended span with the name and trace id, or nil.
func spanNamed(rec *tracetest.SpanRecorder, name string, tid trace.TraceID) sdktrace.ReadOnlySpan {
	for _, s := range rec.Ended() {
		if s.Name() == name && s.SpanContext().TraceID() == tid {
			return s
		}
	}
	return nil
}

func attr(s sdktrace.ReadOnlySpan, key string) attribute.Value {
	for _, kv := range s.Attributes() {
		if string(kv.Key) == key {
			return kv.Value
		}
	}
	return attribute.Value{}
}

const (
	callerTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
	callerSpan  = "00f067aa0ba902b7"
)

// The request's server span continues the caller's trace: its trace id is
// the caller's, it is the one in the problem, in X-Trace-Id and in the
// traceparent we send back, which names our span as the parent to use.
func TestRequestSpanContinuesCallersTrace(t *testing.T) {
	rec := recordSpans(t) // not parallel: replaces the global provider
	e := newEnv(t, envOptions{noWorkers: true})
	key := e.owner("acme", accounts.RoleClient, 1_000_000)

	r := e.post(key, "k1", []byte(`{"messages":[]}`), map[string]string{"traceparent": "00-" + callerTrace + "-" + callerSpan + "-01"})
	if got := r.problemCode(t); got != "invalid_request" {
		t.Fatalf("code = %q, want invalid_request (status %d)", got, r.status)
	}
	tid, _ := trace.TraceIDFromHex(callerTrace)
	span := spanNamed(rec, "POST /v1/tasks", tid)
	if span == nil {
		t.Fatalf("no server span POST /v1/tasks in trace %s; ended: %v", callerTrace, names(rec))
	}
	if span.SpanKind() != trace.SpanKindServer || span.Parent().SpanID().String() != callerSpan || !span.Parent().IsRemote() {
		t.Errorf("span kind %v, parent %v; want a server span whose remote parent is %s", span.SpanKind(), span.Parent(), callerSpan)
	}
	if got := attr(span, "http.response.status_code").AsInt64(); got != int64(r.status) {
		t.Errorf("http.response.status_code = %d, want %d", got, r.status)
	}
	if got := attr(span, "http.route").AsString(); got != "/v1/tasks" {
		t.Errorf("http.route = %q, want /v1/tasks", got)
	}
	if got, _ := r.json(t)["trace_id"].(string); got != callerTrace {
		t.Errorf("problem trace_id = %q, want %q", got, callerTrace)
	}
	if got := r.header.Get("X-Trace-Id"); got != callerTrace {
		t.Errorf("X-Trace-Id = %q, want %q", got, callerTrace)
	}
	want := "00-" + callerTrace + "-" + span.SpanContext().SpanID().String() + "-01"
	if got := r.header.Get("traceparent"); got != want {
		t.Errorf("response traceparent = %q, want %q (our span as parent)", got, want)
	}
}

// Without a traceparent the request starts a trace, and the problem's
// trace_id is that trace's id: a support engineer finds the span by it.
func TestProblemTraceIDIsTheSpansTraceID(t *testing.T) {
	rec := recordSpans(t) // not parallel: replaces the global provider
	e := newEnv(t, envOptions{noWorkers: true})

	r := e.do(http.MethodGet, "/v1/tasks/nope", "", nil, nil)
	if got := r.problemCode(t); got != "unauthorized" {
		t.Fatalf("code = %q, want unauthorized (status %d)", got, r.status)
	}
	got, _ := r.json(t)["trace_id"].(string)
	tid, err := trace.TraceIDFromHex(got)
	if err != nil {
		t.Fatalf("problem trace_id %q: %v", got, err)
	}
	span := spanNamed(rec, "GET /v1/tasks/:id", tid)
	if span == nil {
		t.Fatalf("no span GET /v1/tasks/:id in trace %s; ended: %v", got, names(rec))
	}
	if span.Parent().IsValid() {
		t.Errorf("span has parent %v, want a root span", span.Parent())
	}
	if r.header.Get("X-Trace-Id") != got {
		t.Errorf("X-Trace-Id = %q, want the problem's %q", r.header.Get("X-Trace-Id"), got)
	}
}

// The task's job runs later, on a worker: its spans still join the
// request's trace, the provider call under the task under the request, and
// the worker's logs carry the same trace id. Spans hold no prompt, no
// output and no provider key.
func TestProviderCallSpanJoinsRequestTrace(t *testing.T) {
	rec := recordSpans(t) // not parallel: replaces the global provider
	logs := &syncBuffer{}
	e := newEnv(t, envOptions{logs: logs})
	key := e.owner("acme", accounts.RoleClient, 1_000_000)

	const prompt = "tracing canary prompt"
	r := e.post(key, "k1", taskBody(prompt, 10), map[string]string{"traceparent": "00-" + callerTrace + "-" + callerSpan + "-01"})
	if r.status != http.StatusAccepted {
		t.Fatalf("POST: %d %s", r.status, r.body)
	}
	id := r.task(t).ID
	if task := e.waitFinished(key, id); task.Status != "succeeded" {
		t.Fatalf("task %s, want succeeded", task.Status)
	}
	// The job's span ends after the task is visible as finished.
	var task sdktrace.ReadOnlySpan
	e.waitFor("the task's span to end", func() bool {
		for _, s := range rec.Ended() {
			if s.Name() == "task" && attr(s, "tollgate.task.id").AsString() == id {
				task = s
			}
		}
		return task != nil
	})
	tid, _ := trace.TraceIDFromHex(callerTrace)
	if task.SpanContext().TraceID() != tid {
		t.Fatalf("task span in trace %s, want the request's %s", task.SpanContext().TraceID(), callerTrace)
	}
	server, call := spanNamed(rec, "POST /v1/tasks", tid), spanNamed(rec, "provider.call", tid)
	if server == nil || call == nil {
		t.Fatalf("trace %s lacks the server or provider.call span; ended: %v", callerTrace, names(rec))
	}
	if task.Parent().SpanID() != server.SpanContext().SpanID() {
		t.Errorf("task span's parent = %s, want the request's span %s", task.Parent().SpanID(), server.SpanContext().SpanID())
	}
	if call.Parent().SpanID() != task.SpanContext().SpanID() || call.SpanKind() != trace.SpanKindClient {
		t.Errorf("provider.call parent %s kind %v, want client span under task %s", call.Parent().SpanID(), call.SpanKind(), task.SpanContext().SpanID())
	}
	for k, want := range map[string]string{"tollgate.outcome.class": "success", "tollgate.provider.key": "default", "tollgate.model": testModel} {
		if got := attr(call, k).String(); got != want {
			t.Errorf("provider.call %s = %q, want %q", k, got, want)
		}
	}
	if got := attr(call, "http.response.status_code").AsInt64(); got != http.StatusOK {
		t.Errorf("provider.call http.response.status_code = %d, want 200", got)
	}
	for _, s := range rec.Ended() {
		for _, kv := range s.Attributes() {
			if v := kv.Value.String(); strings.Contains(v, prompt) || strings.Contains(v, "sk-test-canary") {
				t.Errorf("span %s attribute %s = %q holds the prompt or a key", s.Name(), kv.Key, v)
			}
		}
	}
	finished := false
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, `"msg":"task finished"`) {
			finished = true
			if !strings.Contains(line, `"trace_id":"`+callerTrace+`"`) {
				t.Errorf("worker log line lacks trace_id %s: %s", callerTrace, line)
			}
		}
	}
	if !finished {
		t.Errorf("no task finished log line:\n%s", logs)
	}
}

// A streamed completion runs its task inline, in the request: the task's
// span is a child of the request's, the provider call a child of the task's.
func TestStreamedTaskSpansNestUnderTheRequest(t *testing.T) {
	rec := recordSpans(t) // not parallel: replaces the global provider
	e := newEnv(t, envOptions{})
	key := e.owner("acme", accounts.RoleClient, 1_000_000)

	r := e.do(http.MethodPost, "/v1/chat/completions", key,
		[]byte(`{"model":"test-model","stream":true,"messages":[{"role":"user","content":"stream please"}]}`),
		map[string]string{"traceparent": "00-" + callerTrace + "-" + callerSpan + "-01"})
	if r.status != http.StatusOK {
		t.Fatalf("POST: %d %s", r.status, r.body)
	}
	tid, _ := trace.TraceIDFromHex(callerTrace)
	e.waitFor("the request's span to end", func() bool { return spanNamed(rec, "POST /v1/chat/completions", tid) != nil })
	server, task, call := spanNamed(rec, "POST /v1/chat/completions", tid), spanNamed(rec, "task", tid), spanNamed(rec, "provider.call", tid)
	if task == nil || call == nil {
		t.Fatalf("trace %s lacks the task or provider.call span; ended: %v", callerTrace, names(rec))
	}
	if task.Parent().SpanID() != server.SpanContext().SpanID() || !attr(task, "tollgate.task.inline").AsBool() {
		t.Errorf("task span parent %s inline %v, want an inline task under the request's span %s",
			task.Parent().SpanID(), attr(task, "tollgate.task.inline").AsBool(), server.SpanContext().SpanID())
	}
	if call.Parent().SpanID() != task.SpanContext().SpanID() {
		t.Errorf("provider.call parent %s, want the task's span %s", call.Parent().SpanID(), task.SpanContext().SpanID())
	}
	if got := attr(call, "tollgate.outcome.class").AsString(); got != "success" {
		t.Errorf("provider.call tollgate.outcome.class = %q, want success", got)
	}
}

func names(rec *tracetest.SpanRecorder) []string {
	var out []string
	for _, s := range rec.Ended() {
		out = append(out, s.Name()+" "+s.SpanContext().TraceID().String())
	}
	return out
}
