package tracing

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"interlock/runs"
)

// Runs is the run service's Tracer; nil when tracing is off (runs.Config.Tracer stays nil).
func (t *Tracing) Runs() runs.Tracer {
	if t == nil {
		return nil
	}
	return executions{t: t}
}

type executions struct{ t *Tracing }

var _ runs.Tracer = executions{}

// StartExecution starts the span "execute_run AGENT" of one stretch of a run's loop. It is the
// root of a trace of its own, since the loop runs in the background after the request that
// caused it was answered, with a link to that request's span (or to the execution that delegated
// to this run): from the approveToolCall request a trace viewer goes to the execution that ran
// the tool, and back.
func (e executions) StartExecution(ctx context.Context, x runs.Execution) (context.Context, func(runs.ExecutionEnd)) {
	attrs := []attribute.KeyValue{keyRunID.String(x.RunID), keyAgentID.String(x.AgentID)}
	if x.Cause != "" {
		attrs = append(attrs, attribute.String("interlock.execution.cause", string(x.Cause)))
	}
	if x.ParentRunID != nil {
		attrs = append(attrs, attribute.String("interlock.run.parent_id", *x.ParentRunID))
	}
	opts := []trace.SpanStartOption{trace.WithNewRoot(), trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(attrs...)}
	if x.CausedBy != nil {
		if link := trace.LinkFromContext(x.CausedBy, attribute.String("interlock.link", string(x.Cause))); link.SpanContext.IsValid() {
			opts = append(opts, trace.WithLinks(link))
		}
	}
	ctx, span := e.t.tracer.Start(ctx, "execute_run "+x.AgentID, opts...)
	return ctx, func(end runs.ExecutionEnd) {
		span.SetAttributes(attribute.String("interlock.execution.end", string(end)))
		span.End()
	}
}
