package tracing

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"interlock/gormstore"
)

// Groups is the store's GroupTracer; nil when tracing is off.
func (t *Tracing) Groups() gormstore.GroupTracer {
	if t == nil {
		return nil
	}
	return groups{t: t}
}

type groups struct{ t *Tracing }

var _ gormstore.GroupTracer = groups{}

// StartGroup starts the span "commit_group" of a transaction shared by the writes of several
// callers. Like a batch a consumer receives, it belongs to none of them: it is the root of a
// trace of its own, holding the transaction's SQL, with a link to the span of each caller. In
// each caller's trace a span "commit_group_member" covers the same time, with a link back to it,
// so that from an execution a trace viewer finds the SQL its checkpoint was written by.
func (g groups) StartGroup(base context.Context, members []context.Context) (context.Context, func(error)) {
	links := make([]trace.Link, 0, len(members))
	for _, m := range members {
		if l := trace.LinkFromContext(m); l.SpanContext.IsValid() {
			links = append(links, l)
		}
	}
	writes := attribute.Int("interlock.group.writes", len(members))
	ctx, span := g.t.tracer.Start(base, "commit_group", trace.WithNewRoot(), trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(writes), trace.WithLinks(links...))
	back := trace.WithLinks(trace.LinkFromContext(ctx))
	var theirs []trace.Span
	for _, m := range members {
		if trace.SpanFromContext(m).IsRecording() {
			_, s := g.t.tracer.Start(m, "commit_group_member", trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(writes), back)
			theirs = append(theirs, s)
		}
	}
	return ctx, func(err error) {
		for _, s := range append(theirs, span) {
			if err != nil {
				s.RecordError(err)
				s.SetStatus(codes.Error, "the shared transaction failed")
			}
			s.End()
		}
	}
}
