package tracing

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"interlock/gormstore"
)

// TestGroupSpans: a transaction shared by the writes of executions a and b (and of two
// callers that are not recorded) is a span commit_group under a, holding its SQL and linked to
// b; b gets a span commit_group_member from when its write queued, linked back. A failed
// transaction marks both; one whose writes are made again alone marks only commit_group.
func TestGroupSpans(t *testing.T) {
	for _, tc := range []struct {
		name         string
		end          gormstore.GroupEnd
		group, other codes.Code
	}{
		{"committed", gormstore.GroupEnd{}, codes.Unset, codes.Unset},
		{"commit failed", gormstore.GroupEnd{Err: errors.New("connection lost")}, codes.Error, codes.Error},
		{"written alone", gormstore.GroupEnd{Err: errors.New("lease lost"), Alone: true}, codes.Error, codes.Unset},
	} {
		t.Run(tc.name, func(t *testing.T) {
			exp := tracetest.NewInMemoryExporter()
			tr := testTracing(exp)
			a, spanA := tr.tracer.Start(context.Background(), "execute_run a")
			b, spanB := tr.tracer.Start(context.Background(), "execute_run b")
			queued := time.Now().Add(-time.Second).Truncate(time.Microsecond)
			members := []gormstore.GroupMember{
				{Ctx: unsampled(), Write: "checkpoint", Queued: queued},
				{Ctx: a, Write: "insert run", Queued: queued},
				{Ctx: context.Background(), Write: "finish", Queued: queued},
				{Ctx: b, Write: "checkpoint", Queued: queued},
			}
			ctx, end := tr.Groups().StartGroup(context.Background(), members)
			_, sql := tr.tracer.Start(ctx, "INSERT run_events")
			sql.End()
			end(tc.end)
			spanA.End()
			spanB.End()

			byName := map[string][]tracetest.SpanStub{}
			for _, s := range exp.GetSpans() {
				byName[s.Name] = append(byName[s.Name], s)
			}
			if len(byName["commit_group"]) != 1 || len(byName["commit_group_member"]) != 1 {
				t.Fatalf("spans %v: want one commit_group and one commit_group_member (b's)", names(exp.GetSpans()))
			}
			group, member := byName["commit_group"][0], byName["commit_group_member"][0]
			if group.Parent.SpanID() != spanA.SpanContext().SpanID() {
				t.Errorf("commit_group's parent is %s, want a's execution %s", group.Parent.SpanID(), spanA.SpanContext().SpanID())
			}
			if got := linked(group.Links); len(got) != 1 || !got[spanB.SpanContext().SpanID()] {
				t.Errorf("commit_group links to %v, want b's execution only", got)
			}
			if sql := byName["INSERT run_events"][0]; sql.Parent.SpanID() != group.SpanContext.SpanID() {
				t.Errorf("the SQL's parent is %s, want commit_group %s", sql.Parent.SpanID(), group.SpanContext.SpanID())
			}
			if member.Parent.SpanID() != spanB.SpanContext().SpanID() {
				t.Errorf("commit_group_member's parent is %s, want b's execution", member.Parent.SpanID())
			}
			if got := linked(member.Links); len(got) != 1 || !got[group.SpanContext.SpanID()] {
				t.Errorf("commit_group_member links to %v, want commit_group", got)
			}
			if !member.StartTime.Equal(queued) {
				t.Errorf("commit_group_member starts at %s, want when b's write queued (%s)", member.StartTime, queued)
			}
			if group.Status.Code != tc.group || member.Status.Code != tc.other {
				t.Errorf("statuses: commit_group %v, commit_group_member %v; want %v, %v", group.Status.Code, member.Status.Code, tc.group, tc.other)
			}
			if tc.end.Alone && len(member.Events) != 1 {
				t.Errorf("commit_group_member of a group written alone has events %v, want the rollback", member.Events)
			}
		})
	}
	t.Run("nothing recorded", func(t *testing.T) {
		exp := tracetest.NewInMemoryExporter()
		tr := testTracing(exp)
		base := context.Background()
		ctx, end := tr.Groups().StartGroup(base, []gormstore.GroupMember{{Ctx: unsampled()}, {Ctx: base}})
		end(gormstore.GroupEnd{})
		if ctx != base || len(exp.GetSpans()) != 0 {
			t.Errorf("a group of unrecorded writes made spans %v", names(exp.GetSpans()))
		}
	})
}

func testTracing(exp sdktrace.SpanExporter) *Tracing {
	p := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	return &Tracing{provider: p, tracer: p.Tracer(scope)}
}

// unsampled is a context whose span was not sampled: valid, but not recorded.
func unsampled() context.Context {
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1}, SpanID: trace.SpanID{1}})
	return trace.ContextWithSpanContext(context.Background(), sc)
}

func linked(links []sdktrace.Link) map[trace.SpanID]bool {
	out := map[trace.SpanID]bool{}
	for _, l := range links {
		out[l.SpanContext.SpanID()] = true
	}
	return out
}

func names(spans tracetest.SpanStubs) []string {
	var out []string
	for _, s := range spans {
		out = append(out, s.Name)
	}
	return out
}
