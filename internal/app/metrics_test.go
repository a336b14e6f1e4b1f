package app_test

import (
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"interlock/internal/app"
	"interlock/internal/apptest"
)

// TestMetricsFollowTheDemoFlow: a run started, suspended on its refund, approved and finished
// over HTTP and a WebSocket moves every metric it should, read from /metrics before, while it
// waits, and after.
func TestMetricsFollowTheDemoFlow(t *testing.T) {
	apptest.EachDB(t, func(t *testing.T, s *apptest.Server) {
		before := s.Scrape(t)
		for _, name := range []string{"go_goroutines", "process_cpu_seconds_total", "interlock_db_open_connections", "interlock_runs", "interlock_graphql_subscriptions_open"} {
			if before[name] == nil {
				t.Errorf("/metrics has no %s", name)
			}
		}
		for name, fam := range before {
			if strings.HasPrefix(name, "interlock_") && len(fam.GetHelp()) < 20 {
				t.Errorf("%s has no useful HELP text: %q", name, fam.GetHelp())
			}
		}
		if got := before.Value(t, "interlock_build_info", "version="+app.Version()); got != 1 {
			t.Errorf("interlock_build_info{version=%q} = %v", app.Version(), got)
		}
		if got := before.Value(t, "interlock_runs_stats_up"); got != 1 {
			t.Fatalf("interlock_runs_stats_up = %v before the flow", got)
		}

		var started struct{ StartRun apptest.Run }
		s.Must(t, `mutation Start($input: StartRunInput!) { startRun(input: $input) { runId } }`,
			map[string]any{"input": map[string]any{"agentId": "support-agent", "prompt": "refund order 42 for 30"}}, &started)
		id := started.StartRun.RunID
		c := apptest.DialWS(t, s.URL, "graphql-transport-ws")
		sub := c.Subscribe(`subscription Follow($runId: ID!) { runEvents(runId: $runId, after: 0) { seq type } }`, map[string]any{"runId": id})
		apptest.Follow(t, c, sub, apptest.IsType("RUN_SUSPENDED"))

		waiting := s.Scrape(t)
		for _, w := range []struct {
			name   string
			labels []string
			want   float64
		}{
			{"interlock_graphql_subscriptions_open", []string{"transport=websocket"}, 1},
			{"interlock_runs", []string{"status=SUSPENDED"}, 1},
			{"interlock_runs", []string{"status=RUNNING"}, 0},
			{"interlock_suspended_runs", nil, 1},
			{"interlock_model_call_duration_seconds", []string{"model=demo/support-v1"}, 1},
			{"interlock_graphql_operations_total", []string{"operation=Start", "type=mutation", "outcome=ok"}, 1},
			{"interlock_graphql_operation_duration_seconds", []string{"operation=Start", "type=mutation", "outcome=ok"}, 1},
		} {
			if got := waiting.Value(t, w.name, w.labels...) - before.Value(t, w.name, w.labels...); got != w.want {
				t.Errorf("while the run waits: %s%v changed by %v, want %v", w.name, w.labels, got, w.want)
			}
		}

		s.Must(t, `mutation Approve($id: ID!) { approveToolCall(runId: $id) { status } }`, map[string]any{"id": id}, &struct{}{})
		apptest.Follow(t, c, sub, apptest.IsType("RUN_FINISHED"))
		if _, done, _ := c.Next(sub); !done {
			t.Fatal("the stream did not complete after RUN_FINISHED")
		}
		s.App.Service.Wait()
		s.WantError(t, "NOT_FOUND", `mutation Approve($id: ID!) { approveToolCall(runId: $id) { status } }`, map[string]any{"id": "no-such-run"})
		run := s.Run(t, id)

		after := s.Scrape(t)
		for deadline := time.Now().Add(10 * time.Second); after.Value(t, "interlock_graphql_subscriptions_open", "transport=websocket") != 0 && time.Now().Before(deadline); {
			time.Sleep(20 * time.Millisecond) // the subscription's end is recorded as its stream closes
			after = s.Scrape(t)
		}
		for _, w := range []struct {
			name   string
			labels []string
			want   float64
		}{
			{"interlock_graphql_subscriptions_open", []string{"transport=websocket"}, 0},
			{"interlock_graphql_operations_total", []string{"operation=Follow", "type=subscription", "outcome=ok"}, 1},
			{"interlock_graphql_operations_total", []string{"operation=Approve", "type=mutation", "outcome=ok"}, 1},
			{"interlock_graphql_operations_total", []string{"operation=Approve", "type=mutation", "outcome=NOT_FOUND"}, 1},
			{"interlock_graphql_operation_duration_seconds", []string{"operation=Approve"}, 2},
			{"interlock_graphql_operation_duration_seconds", []string{"operation=Follow"}, 0}, // streams are not timed
			{"interlock_runs", []string{"status=COMPLETED"}, 1},
			{"interlock_runs", []string{"status=SUSPENDED"}, 0},
			{"interlock_suspended_runs", nil, 0},
			{"interlock_decision_wait_seconds", []string{"kind=APPROVED"}, 1},
			{"interlock_decision_wait_seconds", []string{"kind=DECLINED"}, 0},
			{"interlock_run_events_written_total", nil, float64(run.LastEventSeq)},
			{"interlock_model_call_duration_seconds", []string{"model=demo/support-v1"}, 2},
			{"interlock_model_call_errors_total", []string{"model=demo/support-v1"}, 0},
			{"interlock_tool_call_duration_seconds", []string{"tool=issue_refund"}, 1},
			{"interlock_tool_call_errors_total", []string{"tool=issue_refund"}, 0},
		} {
			if got := after.Value(t, w.name, w.labels...) - before.Value(t, w.name, w.labels...); got != w.want {
				t.Errorf("after the flow: %s%v changed by %v, want %v", w.name, w.labels, got, w.want)
			}
		}
		if run.LastEventSeq < 6 {
			t.Fatalf("the run has %d events; the flow wrote more", run.LastEventSeq)
		}
		if after.Value(t, "interlock_db_open_connections") < 1 || after.Value(t, "interlock_db_max_open_connections") < 1 {
			t.Errorf("pool metrics: open %v, max %v", after.Value(t, "interlock_db_open_connections"), after.Value(t, "interlock_db_max_open_connections"))
		}
	})
}

// TestOperationNamesAreBounded: however many names clients make up, the metrics keep at most
// 200 of them as labels (the rest are "other"); names of refused requests never take a label,
// and anonymous operations are "anonymous".
func TestOperationNamesAreBounded(t *testing.T) {
	s := apptest.Start(t, "sqlite:"+t.TempDir()+"/interlock.db")
	for i := range 230 {
		s.Post(t, fmt.Sprintf(`query Op%d { agents { id } }`, i), nil)
	}
	resp, err := http.Post(s.URL+"/graphql", "application/json", strings.NewReader(`{"query":"query Bogus1 { nosuchfield }","operationName":"Bogus1"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	s.Post(t, `{ agents { id } }`, nil)
	sc := s.Scrape(t)
	names := map[string]bool{}
	for _, m := range sc["interlock_graphql_operations_total"].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "operation" {
				names[l.GetValue()] = true
			}
		}
	}
	if len(names) > 202 || !names["Op0"] || !names["Op199"] || names["Op200"] || !names["other"] || !names["anonymous"] || names["Bogus1"] {
		t.Fatalf("%d operation labels: %v", len(names), names)
	}
	if got := sc.Value(t, "interlock_graphql_operations_total", "operation=other", "type=query", "outcome=ok"); got != 30 {
		t.Fatalf("other = %v, want the 30 names past the bound", got)
	}
	if got := sc.Value(t, "interlock_graphql_operations_total", "operation=other", "outcome=GRAPHQL_VALIDATION_FAILED"); got != 1 {
		t.Fatalf("the refused Bogus1 counted %v times as other", got)
	}
}

// TestMetricsAddr: with --metrics-addr, /metrics is served there and not on the API's port.
func TestMetricsAddr(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	s, _ := serveOnPort(t, "--metrics-addr", addr)
	resp, err := http.Get(s.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode == http.StatusOK {
		t.Fatal("/metrics is still served on the API's port")
	}
	var sc apptest.Scrape
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if r, err := http.Get("http://" + addr + "/metrics"); err == nil {
			r.Body.Close()
			sc = apptest.ScrapeURL(t, "http://"+addr+"/metrics")
			break
		}
	}
	if sc["interlock_runs"] == nil || sc["go_goroutines"] == nil {
		t.Fatalf("--metrics-addr serves %d families", len(sc))
	}
}
