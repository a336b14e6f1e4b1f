package app_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"interlock/internal/app"
	"interlock/internal/apptest"
	"interlock/internal/dbtest"
)

// spanSet finds received spans.
type spanSet []*gotSpan

// named returns the spans of that name whose attributes have the values given (key, value, …).
func (ss spanSet) named(name string, kv ...string) spanSet {
	var out spanSet
next:
	for _, s := range ss {
		if s.Name != name {
			continue
		}
		for i := 0; i+1 < len(kv); i += 2 {
			if s.attr(kv[i]) != kv[i+1] {
				continue next
			}
		}
		out = append(out, s)
	}
	return out
}

// childrenOf returns the spans whose parent is p.
func (ss spanSet) childrenOf(p *gotSpan) spanSet {
	var out spanSet
	for _, s := range ss {
		if s.traceID() == p.traceID() && s.parentID() == p.spanID() {
			out = append(out, s)
		}
	}
	return out
}

// one returns the only span of ss, failing the test otherwise.
func (ss spanSet) one(t *testing.T, what string) *gotSpan {
	t.Helper()
	if len(ss) != 1 {
		t.Fatalf("%s: %d spans, want 1", what, len(ss))
	}
	return ss[0]
}

// linksTo reports whether s links to the span target.
func linksTo(s, target *gotSpan) bool {
	for _, l := range s.Links {
		if hex.EncodeToString(l.TraceId) == target.traceID() && hex.EncodeToString(l.SpanId) == target.spanID() {
			return true
		}
	}
	return false
}

// waitSpans flushes the app's spans to the collector until done says all that is wanted is there.
func waitSpans(t *testing.T, s *apptest.Server, c *otlpCollector, done func(spanSet) bool) spanSet {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		if err := s.App.Tracing().Flush(context.Background()); err != nil {
			t.Fatalf("flush: %v", err)
		}
		got, _ := c.received()
		if done(got) {
			return got
		}
		if time.Now().After(deadline) {
			names := map[string]int{}
			for _, sp := range got {
				names[sp.Name]++
			}
			t.Fatalf("the collector did not get the spans wanted; it got %v", names)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

const (
	startTrace   = "4bf92f3577b34da6a3ce929d0e0e4736"
	startParent  = "00f067aa0ba902b7"
	approveTrace = "5cf92f3577b34da6a3ce929d0e0e4737"
	approveCall  = "10f067aa0ba902b8"
)

// TestTracingOfAnApproval: with an OTLP endpoint set, an in-process collector receives the spans
// of one approval: the startRun request (continuing the caller's traceparent), the execution it
// caused (its own trace, linked to the request) with the model call and SQL, the approve request,
// and the execution that ran the tool, linked to the approve request. On SQLite and MySQL.
func TestTracingOfAnApproval(t *testing.T) {
	for _, db := range []struct{ name, system string }{{"sqlite", "sqlite"}, {"mysql", "mysql"}} {
		t.Run(db.name, func(t *testing.T) {
			c := startCollector(t)
			t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", c.url)
			t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
			t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
			t.Setenv("OTEL_SERVICE_NAME", "")
			t.Setenv("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment.name=test")
			t.Setenv("OTEL_TRACES_SAMPLER", "always_on")
			url := "sqlite:" + filepath.Join(t.TempDir(), "interlock.db")
			if db.name == "mysql" {
				url = dbtest.MySQLURL(dbtest.MySQLDSN(t))
			}
			s := apptest.Start(t, url)
			if s.App.Tracing() == nil {
				t.Fatal("tracing is off with OTEL_EXPORTER_OTLP_ENDPOINT set")
			}
			const prompt = "refund order 42 for 30"
			var started struct{ StartRun apptest.Run }
			postTraced(t, s, "00-"+startTrace+"-"+startParent+"-01",
				`mutation StartRun($input: StartRunInput!) { startRun(input: $input) { id status } }`,
				map[string]any{"input": map[string]any{"agentId": "support-agent", "prompt": prompt}}, &started)
			runID := started.StartRun.ID
			s.WaitStatus(t, runID, "SUSPENDED")
			var approved struct{ ApproveToolCall apptest.Run }
			postTraced(t, s, "00-"+approveTrace+"-"+approveCall+"-01",
				`mutation Approve($id: ID!) { approveToolCall(runId: $id) { status } }`, map[string]any{"id": runID}, &approved)
			s.WaitStatus(t, runID, "COMPLETED")
			refused := postTraced(t, s, "00-"+approveTrace+"-"+approveCall+"-01",
				`mutation Approve($id: ID!) { approveToolCall(runId: $id) { status } }`, map[string]any{"id": runID}, nil)
			if refused.Code() == "" {
				t.Fatalf("approving a finished run: %+v", refused)
			}
			s.App.Service.Wait()

			spans := spanSet(waitSpans(t, s, c, func(ss spanSet) bool {
				http := map[string]int{}
				for _, sp := range spanSet(ss).named("POST /graphql") {
					http[sp.traceID()]++
				}
				return len(spanSet(ss).named("execute_run support-agent", "interlock.execution.end", "finished")) == 1 &&
					http[startTrace] == 1 && http[approveTrace] == 2 && len(spanSet(ss).named("mutation Approve")) == 2
			}))

			// The startRun request continues the caller's trace: HTTP span, then the operation.
			startHTTP := spans.childrenOf(&gotSpan{Span: &tracepb.Span{TraceId: mustHex(t, startTrace), SpanId: mustHex(t, startParent)}}).
				named("POST /graphql").one(t, "HTTP span of startRun")
			startOp := spans.childrenOf(startHTTP).named("mutation StartRun", "graphql.operation.type", "mutation", "graphql.operation.name", "StartRun").
				one(t, "operation span of startRun")
			if startOp.Status.GetCode() == tracepb.Status_STATUS_CODE_ERROR {
				t.Errorf("startRun's span is failed: %v", startOp.Status)
			}
			insert := spans.childrenOf(startOp).named("INSERT agent_runs", "db.system.name", db.system)
			if len(insert) != 1 || !strings.Contains(insert[0].attr("db.query.text"), "?") {
				t.Errorf("startRun's INSERT INTO agent_runs: %d spans (%v)", len(insert), insert)
			}
			for _, sp := range spans {
				if strings.Contains(sp.attr("db.query.text"), "order 42") {
					t.Errorf("a SQL span shows a value bound to its statement: %s", sp.attr("db.query.text"))
				}
			}

			// The first execution: its own trace, linked to startRun's operation, with the model call.
			first := spans.named("execute_run support-agent", "interlock.run.id", runID, "interlock.execution.cause", "start").one(t, "execution after startRun")
			if first.traceID() == startTrace || len(first.ParentSpanId) != 0 || !linksTo(first, startOp) {
				t.Errorf("the first execution is not a root linked to startRun's operation: trace %s parent %q links %v", first.traceID(), first.parentID(), first.Links)
			}
			if first.attr("interlock.agent.id") != "support-agent" || first.attr("interlock.execution.end") != "suspended" {
				t.Errorf("first execution's attributes: %v", first.Attributes)
			}
			model := spans.childrenOf(first).named("chat demo/support-v1", "gen_ai.request.model", "demo/support-v1", "interlock.outcome", "ok")
			if len(model) != 1 {
				t.Errorf("model calls under the first execution: %d", len(model))
			}
			if len(spans.childrenOf(first).named("UPDATE agent_runs", "db.system.name", db.system)) == 0 {
				t.Error("no SQL span of the suspension under the first execution")
			}
			if len(spans.childrenOf(first).named("execute_tool issue_refund")) != 0 {
				t.Error("the tool ran before it was approved")
			}

			// The approve request, and the execution that ran the tool, linked to it.
			approveHTTP := spans.childrenOf(&gotSpan{Span: &tracepb.Span{TraceId: mustHex(t, approveTrace), SpanId: mustHex(t, approveCall)}}).
				named("POST /graphql")
			var approveOp, refusedOp *gotSpan
			for _, h := range approveHTTP {
				for _, op := range spans.childrenOf(h).named("mutation Approve") {
					if op.Status.GetCode() == tracepb.Status_STATUS_CODE_ERROR {
						refusedOp = op
					} else {
						approveOp = op
					}
				}
			}
			if approveOp == nil || refusedOp == nil {
				t.Fatalf("approve operations: ok %v, refused %v", approveOp, refusedOp)
			}
			if len(refusedOp.Events) == 0 || refusedOp.Events[0].Name != "exception" || attrText(refusedOp.Events[0].Attributes, "graphql.error.code") != refused.Code() {
				t.Errorf("the refused approve's error is not recorded: %v", refusedOp.Events)
			}
			second := spans.named("execute_run support-agent", "interlock.run.id", runID, "interlock.execution.cause", "decision").one(t, "execution after approve")
			if second.traceID() == approveTrace || len(second.ParentSpanId) != 0 || !linksTo(second, approveOp) || linksTo(second, startOp) {
				t.Errorf("the execution after approve is not a root linked to the approve operation: trace %s links %v", second.traceID(), second.Links)
			}
			if second.attr("interlock.execution.end") != "finished" {
				t.Errorf("second execution ended %q", second.attr("interlock.execution.end"))
			}
			tool := spans.childrenOf(second).named("execute_tool issue_refund", "gen_ai.tool.name", "issue_refund", "interlock.outcome", "ok", "interlock.run.id", runID).
				one(t, "tool call under the execution after approve")
			if tool.attr("gen_ai.tool.call.id") == "" {
				t.Errorf("tool span without its call id: %v", tool.Attributes)
			}
			if len(spans.childrenOf(second).named("chat demo/support-v1")) != 1 {
				t.Error("no model call after the tool under the second execution")
			}

			// Every span comes from one resource: the default service name and the variables'.
			for _, sp := range spans {
				if sp.resource["service.name"] != "interlock" || sp.resource["deployment.environment.name"] != "test" {
					t.Fatalf("resource of %s: %v", sp.Name, sp.resource)
				}
			}
		})
	}
}

func mustHex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestTracingOffWithoutEndpoint: without an OTLP endpoint (or with traces turned off by the
// standard variables) the server exports nothing and starts no part of the SDK, even with a
// collector listening and every other OTEL_* variable set; a protocol the exporter cannot speak
// is refused at start, naming the variable.
func TestTracingOffWithoutEndpoint(t *testing.T) {
	c := startCollector(t)
	t.Setenv("OTEL_SERVICE_NAME", "interlock-test")
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
	for _, tc := range []struct{ name, endpoint, traces, disabled, exporter string }{
		{name: "no endpoint"},
		{name: "OTEL_SDK_DISABLED", endpoint: c.url, disabled: "true"},
		{name: "OTEL_TRACES_EXPORTER=none", traces: c.url + "/v1/traces", exporter: "none"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", tc.endpoint)
			t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", tc.traces)
			t.Setenv("OTEL_SDK_DISABLED", tc.disabled)
			t.Setenv("OTEL_TRACES_EXPORTER", tc.exporter)
			s := apptest.Start(t, "sqlite:"+filepath.Join(t.TempDir(), "interlock.db"))
			if s.App.Tracing() != nil {
				t.Fatal("tracing is on")
			}
			run := s.SuspendAs(t, "", "refund order 7 for 3", nil)
			s.Must(t, `mutation($id: ID!) { approveToolCall(runId: $id) { status } }`, map[string]any{"id": run.ID}, &struct{}{})
			s.WaitStatus(t, run.ID, "COMPLETED")
			s.App.Service.Wait()
			buf := make([]byte, 1<<22)
			if stacks := string(buf[:runtime.Stack(buf, true)]); strings.Contains(stacks, "go.opentelemetry.io/otel/sdk") {
				t.Errorf("an OpenTelemetry SDK goroutine runs with tracing off:\n%s", stacks)
			}
		})
	}
	// Traces to the collector only where they were asked for: none above. (Shutdown flushes.)
	if spans, requests := c.received(); requests != 0 || len(spans) != 0 {
		t.Errorf("the collector received %d exports (%d spans) with tracing off", requests, len(spans))
	}

	t.Run("unsupported protocol", func(t *testing.T) {
		t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", c.url)
		t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json")
		cfg, err := app.ParseConfig([]string{"--auth=off", "--db", "sqlite:" + filepath.Join(t.TempDir(), "interlock.db")}, func(string) string { return "" })
		if err != nil {
			t.Fatal(err)
		}
		app, err := app.NewApp(context.Background(), cfg, apptest.DiscardLog())
		if err == nil {
			app.Close()
			t.Fatal("NewApp accepted OTEL_EXPORTER_OTLP_PROTOCOL=http/json")
		}
		if !strings.Contains(err.Error(), "OTEL_EXPORTER_OTLP_PROTOCOL") {
			t.Errorf("error does not name the variable: %v", err)
		}
	})
}

// TestTracingFlushedOnShutdown: a real server process, over either protocol, exports the spans
// still batched when it stops on SIGTERM (the batch delay is far longer than the test), the
// execution's included.
func TestTracingFlushedOnShutdown(t *testing.T) {
	for _, protocol := range []string{"http/protobuf", "grpc"} {
		t.Run(strings.ReplaceAll(protocol, "/", "-"), func(t *testing.T) {
			c := startCollector(t)
			if protocol == "grpc" {
				c = startGRPCCollector(t)
			}
			t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
			t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", c.url+map[string]string{"http/protobuf": "/v1/traces"}[protocol])
			t.Setenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", protocol)
			t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "600000")
			t.Setenv("OTEL_SERVICE_NAME", "interlock-"+strings.ReplaceAll(protocol, "/", "-"))
			p := apptest.StartProc(t, "sqlite:"+filepath.Join(t.TempDir(), "interlock.db"))
			run := p.SuspendAs(t, "", "refund order 9 for 4", nil)
			if spans, _ := c.received(); len(spans) != 0 {
				t.Fatalf("%d spans exported before the batch delay or shutdown", len(spans))
			}
			p.Terminate()
			if err := p.Wait(); err != nil {
				t.Fatalf("server exit: %v", err)
			}
			spans, _ := c.received()
			exec := spanSet(spans).named("execute_run support-agent", "interlock.run.id", run.ID, "interlock.execution.end", "suspended")
			if len(exec) != 1 || len(spanSet(spans).named("mutation")) == 0 {
				t.Fatalf("after shutdown the collector has %d spans, %d of the run's execution", len(spans), len(exec))
			}
			if got := exec[0].resource["service.name"]; got != "interlock-"+strings.ReplaceAll(protocol, "/", "-") {
				t.Errorf("service.name %q: OTEL_SERVICE_NAME not honoured", got)
			}
		})
	}
}

// TestTracingOfAnExpiry: the execution that an approval timeout resumes is a root span with the
// cause "expiry", and it ends with the run finished (the model told the request timed out).
func TestTracingOfAnExpiry(t *testing.T) {
	c := startCollector(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", c.url)
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
	t.Setenv("OTEL_TRACES_SAMPLER", "always_on")
	file, _ := apptest.ExpiryConfig(t, "1s")
	s := apptest.Start(t, "sqlite:"+filepath.Join(t.TempDir(), "interlock.db"), "--config", file)
	run := s.StartRun(t, "refund order 7", map[string]any{"agentId": "billing"})
	s.WaitStatus(t, run.RunID, "COMPLETED")
	s.App.Service.Wait()
	spans := waitSpans(t, s, c, func(ss spanSet) bool {
		return len(ss.named("execute_run billing", "interlock.run.id", run.RunID, "interlock.execution.cause", "expiry")) == 1
	})
	resumed := spans.named("execute_run billing", "interlock.run.id", run.RunID, "interlock.execution.cause", "expiry").one(t, "execution after the expiry")
	if len(resumed.ParentSpanId) != 0 || resumed.attr("interlock.execution.end") != "finished" {
		t.Errorf("the execution after the expiry: parent %q, end %q; want a root that finished the run", resumed.parentID(), resumed.attr("interlock.execution.end"))
	}
	first := spans.named("execute_run billing", "interlock.run.id", run.RunID, "interlock.execution.cause", "start").one(t, "execution after startRun")
	if first.attr("interlock.execution.end") != "suspended" {
		t.Errorf("the first execution ended %q, want suspended", first.attr("interlock.execution.end"))
	}
}

// TestTracingOfAGroupCommit: when runs started at the same moment have their writes committed
// in one shared transaction, the collector receives its span commit_group under one of their
// executions, holding the SQL, linked to each other execution of the group, and each of those
// has a commit_group_member span linked back. Runs are started 16 at a time until a group
// forms (on SQLite one transaction commits at a time, so the others queue behind it).
func TestTracingOfAGroupCommit(t *testing.T) {
	c := startCollector(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", c.url)
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
	t.Setenv("OTEL_TRACES_SAMPLER", "always_on")
	s := apptest.Start(t, "sqlite:"+filepath.Join(t.TempDir(), "interlock.db"), "--mutation-rate", "0")
	var spans spanSet
	for round := 0; len(spans.named("commit_group")) == 0; round++ {
		if round == 20 {
			t.Fatal("20 rounds of 16 runs started at once made no commit_group span")
		}
		var wg sync.WaitGroup
		for range 16 {
			wg.Go(func() {
				r := s.Post(t, `mutation($input: StartRunInput!) { startRun(input: $input) { runId } }`,
					map[string]any{"input": map[string]any{"agentId": "support-agent", "prompt": "hello"}})
				if len(r.Errors) > 0 {
					t.Errorf("startRun: %+v", r.Errors)
				}
			})
		}
		wg.Wait()
		s.App.Service.Wait()
		if err := s.App.Tracing().Flush(context.Background()); err != nil {
			t.Fatal(err)
		}
		spans, _ = c.received()
	}
	byID := map[string]*gotSpan{}
	for _, sp := range spans {
		byID[sp.spanID()] = sp
	}
	group := spans.named("commit_group")[0]
	if byID[group.parentID()] == nil {
		t.Fatalf("commit_group's parent %s was not received: it should be a write's caller (its request or execution)", group.parentID())
	}
	if len(spans.childrenOf(group)) == 0 {
		t.Error("commit_group holds no SQL")
	}
	if n := group.attr("interlock.group.writes"); n == "" || n == "1" {
		t.Errorf("commit_group of %q writes", n)
	}
	if len(group.Links) == 0 {
		t.Fatal("commit_group links to none of the other writes' callers")
	}
	for _, l := range group.Links {
		other := byID[hex.EncodeToString(l.SpanId)]
		if other == nil {
			t.Fatalf("commit_group links to span %x, which was not received", l.SpanId)
		}
		back := false
		for _, m := range spans.childrenOf(other).named("commit_group_member") {
			back = back || linksTo(m, group)
		}
		if !back {
			t.Errorf("%s, linked from commit_group, has no commit_group_member linking back", other.Name)
		}
	}
}

// postTraced sends a GraphQL request to s over POST with a W3C traceparent header and decodes
// the answer (into v, when given, which fails the test on errors).
func postTraced(t testing.TB, s *apptest.Server, traceparent, query string, vars map[string]any, v any) apptest.Response {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"query": query, "variables": vars})
	req, _ := http.NewRequest(http.MethodPost, s.URL+"/graphql", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("traceparent", traceparent)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	out := apptest.DecodeGQL(t, resp)
	if v != nil {
		if len(out.Errors) > 0 {
			t.Fatalf("errors %+v", out.Errors)
		}
		if err := json.Unmarshal(out.Data, v); err != nil {
			t.Fatal(err)
		}
	}
	return out
}
