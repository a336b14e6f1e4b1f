package tracing

import (
	"context"
	"errors"
	"testing"

	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// TestGroupSpans: a transaction shared by two executions' writes is a root span holding its
// SQL, linked to both executions, and each execution gets a span linked back to it; a failed
// transaction marks them all.
func TestGroupSpans(t *testing.T) {
	for _, failed := range []bool{false, true} {
		exp := tracetest.NewInMemoryExporter()
		p := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
		tr := &Tracing{provider: p, tracer: p.Tracer(scope)}
		a, spanA := tr.tracer.Start(context.Background(), "execute_run a")
		b, spanB := tr.tracer.Start(context.Background(), "execute_run b")
		ctx, end := tr.Groups().StartGroup(context.WithoutCancel(a), []context.Context{a, b})
		_, sql := tr.tracer.Start(ctx, "INSERT run_events")
		sql.End()
		var err error
		if failed {
			err = errors.New("deadlock")
		}
		end(err)
		spanA.End()
		spanB.End()

		byName := map[string][]tracetest.SpanStub{}
		for _, s := range exp.GetSpans() {
			byName[s.Name] = append(byName[s.Name], s)
		}
		if len(byName["commit_group"]) != 1 || len(byName["commit_group_member"]) != 2 {
			t.Fatalf("spans %v: want one commit_group and two commit_group_member", names(exp.GetSpans()))
		}
		group := byName["commit_group"][0]
		if group.Parent.IsValid() {
			t.Errorf("commit_group has parent %s, want a root", group.Parent.SpanID())
		}
		if got := linked(group.Links); len(got) != 2 || !got[spanA.SpanContext().SpanID()] || !got[spanB.SpanContext().SpanID()] {
			t.Errorf("commit_group links to %v, want both executions", got)
		}
		if sql := byName["INSERT run_events"][0]; sql.Parent.SpanID() != group.SpanContext.SpanID() {
			t.Errorf("the SQL's parent is %s, want commit_group %s", sql.Parent.SpanID(), group.SpanContext.SpanID())
		}
		parents := map[trace.SpanID]bool{}
		for _, m := range byName["commit_group_member"] {
			parents[m.Parent.SpanID()] = true
			if got := linked(m.Links); len(got) != 1 || !got[group.SpanContext.SpanID()] {
				t.Errorf("commit_group_member links to %v, want commit_group", got)
			}
		}
		if !parents[spanA.SpanContext().SpanID()] || !parents[spanB.SpanContext().SpanID()] {
			t.Errorf("commit_group_member spans are children of %v, want one of each execution", parents)
		}
		for _, s := range append(byName["commit_group_member"], group) {
			if want := map[bool]codes.Code{false: codes.Unset, true: codes.Error}[failed]; s.Status.Code != want {
				t.Errorf("failed=%v: %s has status %v, want %v", failed, s.Name, s.Status.Code, want)
			}
		}
	}
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
