package tasks

import (
	"context"
	"errors"
	"time"

	"github.com/riverqueue/river"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/tollgate/tollgate/provider"
	"github.com/tollgate/tollgate/tracing"
)

// callAndRecord makes begun's provider call and records its outcome.
func (s *runner) callAndRecord(ctx context.Context, r *run, begun *begunAttempt) error {
	started := s.cfg.Now()
	callCtx, cancel := context.WithTimeout(ctx, s.cfg.callTimeout(begun.task))
	callCtx, call := begun.startCall(callCtx)
	resp, callErr := s.callProvider(callCtx, begun)
	endCall(call, resp, callErr)
	cancel()
	latency := s.cfg.Now().Sub(started)

	// Record the outcome even if the job's context was canceled (shutdown):
	// a canceled call is exactly the outcome the journal must keep.
	rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer rcancel()
	return s.recording.recordRun(rctx, s.recording.newFinishedCall(r, begun, resp, callErr, latency))
}

// startCall starts the span of this attempt's provider call. It names the
// provider key, its kind and the model; never the prompt, the output or the
// key's secret.
func (b *begunAttempt) startCall(ctx context.Context) (context.Context, trace.Span) {
	return tracing.Tracer().Start(ctx, "provider.call", trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(
			attribute.String("tollgate.task.id", b.task.ID), attribute.Int("tollgate.task.attempt", b.attempt),
			attribute.String("tollgate.provider.key", b.prov.Key), attribute.String("tollgate.provider.kind", b.prov.Kind),
			attribute.String("tollgate.model", b.model.Name), semconv.GenAIRequestModel(b.model.ProviderModel),
			attribute.Bool("tollgate.probe", b.probe)))
}

// endCall ends a provider call's span with its outcome: the class
// ("success" or the error's class, as recordOutcome classifies it), the
// provider's HTTP status and code, and the reported usage. Never the error's
// text, which may quote the provider's answer.
func endCall(span trace.Span, resp *provider.Response, callErr error) {
	class, status := "success", 0
	if resp != nil {
		status = resp.Status
		if resp.Usage != nil {
			span.SetAttributes(semconv.GenAIUsageInputTokens(int(resp.Usage.InputTokens)), semconv.GenAIUsageOutputTokens(int(resp.Usage.OutputTokens)))
		}
	}
	if callErr != nil {
		class = string(provider.ClassAmbiguous)
		var pe *provider.Error
		if errors.As(callErr, &pe) {
			class, status = string(pe.Class), pe.Status
			span.SetAttributes(attribute.String("tollgate.provider.code", pe.Code))
		}
		span.SetStatus(codes.Error, "")
		span.SetAttributes(semconv.ErrorTypeKey.String(class))
	}
	span.SetAttributes(attribute.String("tollgate.outcome.class", class))
	if status != 0 {
		span.SetAttributes(semconv.HTTPResponseStatusCode(status))
	}
	span.End()
}

// endTaskSpan ends a task run's span. An error that makes River retry the
// job marks it failed, by type only; a snooze is waiting, not failing.
func endTaskSpan(span trace.Span, err error) {
	var snooze *river.JobSnoozeError
	if err != nil && !errors.As(err, &snooze) {
		span.SetStatus(codes.Error, "")
		var pe *provider.Error
		if errors.As(err, &pe) {
			span.SetAttributes(semconv.ErrorTypeKey.String(string(pe.Class)))
		} else {
			span.SetAttributes(semconv.ErrorType(err))
		}
	}
	span.End()
}

// callTimeout is the task's own call deadline (a route's), else the
// service's request timeout; never longer than the latter, which the job
// timeout is sized for.
func (c *Config) callTimeout(t Task) time.Duration {
	if t.callTimeoutMS != nil && *t.callTimeoutMS > 0 {
		return min(time.Duration(*t.callTimeoutMS)*time.Millisecond, c.RequestTimeout)
	}
	return c.RequestTimeout
}
