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

// StartGroup traces a transaction shared by the writes of several runs' executions. Its span,
// "commit_group", holds the transaction's SQL. It is a child of the first member whose span is
// recorded, so it is sampled with that execution and a link to it never points at a span that
// was dropped; it links to every other recorded member, and each of those gets a span
// "commit_group_member", from the moment its write joined the queue (its wait is part of it)
// until the transaction ended, linked back to commit_group. When no member is recorded there
// is nothing to record.
func (g groups) StartGroup(base context.Context, members []gormstore.GroupMember) (context.Context, func(gormstore.GroupEnd)) {
	var first trace.Span
	var others []gormstore.GroupMember
	for _, m := range members {
		switch span := trace.SpanFromContext(m.Ctx); {
		case !span.IsRecording():
		case first == nil:
			first = span
		default:
			others = append(others, m)
		}
	}
	if first == nil {
		return base, func(gormstore.GroupEnd) {}
	}
	links := make([]trace.Link, len(others))
	for i, m := range others {
		links[i] = trace.LinkFromContext(m.Ctx)
	}
	writes := attribute.Int("interlock.group.writes", len(members))
	ctx, group := g.t.tracer.Start(trace.ContextWithSpan(base, first), "commit_group",
		trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(writes), trace.WithLinks(links...))
	back := trace.WithLinks(trace.LinkFromContext(ctx))
	spans := []trace.Span{group}
	for _, m := range others {
		_, s := g.t.tracer.Start(m.Ctx, "commit_group_member", trace.WithSpanKind(trace.SpanKindInternal), back,
			trace.WithTimestamp(m.Queued), trace.WithAttributes(writes, attribute.String("interlock.group.write", m.Write)))
		spans = append(spans, s)
	}
	return ctx, func(end gormstore.GroupEnd) {
		for i, s := range spans {
			switch {
			case end.Err == nil:
			case end.Alone && i > 0:
				// Its write is made again alone: the group's error is not its own.
				s.AddEvent("the shared transaction was rolled back; the write is made alone")
			default:
				s.RecordError(end.Err)
				s.SetStatus(codes.Error, "the shared transaction failed")
			}
			s.End()
		}
	}
}
