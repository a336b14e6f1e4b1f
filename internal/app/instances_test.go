package app_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"interlock/internal/apptest"
	"interlock/internal/dbtest"
)

// twoInstances starts two server processes over one new MySQL database.
func twoInstances(t *testing.T, args ...string) (a, b *apptest.Proc) {
	t.Helper()
	db := dbtest.MySQLURL(dbtest.MySQLDSN(t))
	return apptest.StartProc(t, db, args...), apptest.StartProc(t, db, args...)
}

func TestTwoInstancesSeeTheSameStream(t *testing.T) {
	t.Parallel()
	a, b := twoInstances(t)
	run := a.StartRun(t, "refund order 11 for 5", nil)
	wsA, wsB := apptest.DialWS(t, a.URL, "graphql-transport-ws"), apptest.DialWS(t, b.URL, "graphql-ws")
	opA := wsA.Subscribe(apptest.EventsQuery, map[string]any{"runId": run.RunID, "after": 0})
	opB := wsB.Subscribe(apptest.EventsQuery, map[string]any{"runId": run.RunID, "after": 0})
	evA := apptest.Follow(t, wsA, opA, apptest.IsType("RUN_SUSPENDED"))
	evB := apptest.Follow(t, wsB, opB, apptest.IsType("RUN_SUSPENDED"))
	var out struct{ ApproveToolCall apptest.Run }
	b.Must(t, `mutation($id: ID!) { approveToolCall(runId: $id) { status } }`, map[string]any{"id": run.RunID}, &out)
	evA = append(evA, apptest.Follow(t, wsA, opA, nil)...)
	evB = append(evB, apptest.Follow(t, wsB, opB, nil)...)
	checkSeqs(t, evA)
	if !reflect.DeepEqual(evA, evB) {
		t.Fatalf("instances streamed different events:\nA %+v\nB %+v", evA, evB)
	}
	if last := evA[len(evA)-1]; last.Type != "RUN_FINISHED" || !strings.Contains(apptest.Text(evA), "rf_11") {
		t.Fatalf("stream ends with %s, text %q", last.Type, apptest.Text(evA))
	}
}

func TestHundredApprovalsOverTwoInstancesRunTheToolOnce(t *testing.T) {
	t.Parallel()
	a, b := twoInstances(t)
	run := a.StartRun(t, "refund order 12 for 7", nil)
	ws := apptest.DialWS(t, a.URL, "graphql-transport-ws")
	op := ws.Subscribe(apptest.EventsQuery, map[string]any{"runId": run.RunID})
	apptest.Follow(t, ws, op, apptest.IsType("RUN_SUSPENDED"))
	var wg sync.WaitGroup
	codes := make([]string, 100)
	gate := make(chan struct{})
	for i := range codes {
		srv := a
		if i%2 == 1 {
			srv = b
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-gate
			r := srv.Post(t, `mutation($id: ID!) { approveToolCall(runId: $id) { status } }`, map[string]any{"id": run.RunID})
			codes[i] = r.Code()
		}()
	}
	close(gate)
	wg.Wait()
	count := map[string]int{}
	for _, c := range codes {
		count[c]++
	}
	if count[""] != 1 || count["CONFLICT"] != 99 {
		t.Fatalf("outcomes %v, want 1 success and 99 CONFLICT", count)
	}
	evs := apptest.Follow(t, ws, op, nil)
	results, approvals := 0, 0
	for _, e := range evs {
		switch e.Type {
		case "TOOL_RESULT":
			results++
		case "TOOL_CALL_APPROVED":
			approvals++
		}
	}
	if results != 1 || approvals != 1 {
		t.Fatalf("%d TOOL_RESULT and %d TOOL_CALL_APPROVED events, want 1 each", results, approvals)
	}
}

// TestKilledInstanceRunsAreRecovered: 20 runs whose approved tool calls are executing on
// instance A when A is killed -9 are recovered by B as interrupted calls waiting for a person,
// and run once more each when approved on B. The tool is an HTTP endpoint of the test's that
// holds every call until A is gone: the test kills A once all 20 calls are executing there,
// however long the approvals took to send (with a built-in tool of a fixed 3 s, a busy machine
// finished the first calls before the last approval, and they were not interrupted).
func TestKilledInstanceRunsAreRecovered(t *testing.T) {
	t.Parallel()
	tool := newHeldTool(t)
	model := "agents:\n  - id: slow\n    model: {provider: demo}\n    tools: [slow_task]\n"
	config := apptest.WriteConfig(t, model+`tools:
  - name: slow_task
    inputSchema: {type: object, properties: {seconds: {type: number}}, required: [seconds]}
    http: {url: `+tool.URL+`, timeout: 10m}
`)
	a, b := twoInstances(t, "--lease-ttl", "2s", "--config", config)
	const n = 20
	ids := make([]string, n)
	for i := range ids {
		ids[i] = a.StartRun(t, "run a slow task", map[string]any{"agentId": "slow", "requireToolApproval": true, "threadId": "kill"}).RunID
	}
	waitTotal(t, a, "kill", n, false)
	approve := `mutation($id: ID!) { approveToolCall(runId: $id) { status } }`
	for _, id := range ids {
		var out struct{ ApproveToolCall apptest.Run }
		a.Must(t, approve, map[string]any{"id": id}, &out)
	}
	apptest.Eventually(t, func() bool { return tool.executing.Load() == n }, func() string {
		return fmt.Sprintf("%d of %d approved calls executing at the tool", tool.executing.Load(), n)
	})
	a.Kill9(t)
	runs := waitTotal(t, b, "kill", n, true)
	for _, r := range runs {
		tc := r.ToolCalls[0]
		if !tc.Interrupted || !tc.RequiresApproval || tc.ToolName != "slow_task" {
			t.Fatalf("recovered run %s waits on %+v", r.RunID, tc)
		}
	}
	close(tool.release) // the calls B makes now are answered at once
	for _, id := range ids {
		var out struct{ ApproveToolCall apptest.Run }
		b.Must(t, approve, map[string]any{"id": id}, &out)
	}
	for _, id := range ids {
		ws := apptest.DialWS(t, b.URL, "graphql-transport-ws")
		evs := apptest.Follow(t, ws, ws.Subscribe(apptest.EventsQuery, map[string]any{"runId": id}), nil)
		checkSeqs(t, evs)
		results, interrupted := 0, 0
		for _, e := range evs {
			switch e.Type {
			case "TOOL_RESULT":
				results++
			case "TOOL_CALL_INTERRUPTED":
				interrupted++
			}
		}
		if results != 1 || interrupted != 1 || evs[len(evs)-1].Type != "RUN_FINISHED" {
			t.Fatalf("run %s: %d results, %d interruptions, ends with %s", id, results, interrupted, evs[len(evs)-1].Type)
		}
	}
	if got := tool.calls.Load(); got != 2*n {
		t.Fatalf("the tool was called %d times, want %d (once on A, once more on B)", got, 2*n)
	}
}

// heldTool is an HTTP tool that holds each call until release closes (or its caller goes
// away), counting the calls it holds.
type heldTool struct {
	*httptest.Server
	release          chan struct{}
	calls, executing atomic.Int32
}

func newHeldTool(t *testing.T) *heldTool {
	h := &heldTool{release: make(chan struct{})}
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.calls.Add(1)
		h.executing.Add(1)
		defer h.executing.Add(-1)
		select {
		case <-h.release:
			io.WriteString(w, `{"result": {"done": true}}`)
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(func() {
		select {
		case <-h.release:
		default:
			close(h.release) // a failed test's calls end too
		}
		h.Close()
	})
	return h
}

// waitTotal waits until suspendedRuns of the thread lists n runs (all interrupted, if asked).
func waitTotal(t *testing.T, s *apptest.Proc, thread string, n int, interrupted bool) []apptest.Run {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var out struct {
			SuspendedRuns struct {
				Total int
				Runs  []apptest.Run
			}
		}
		s.Must(t, `query($t: ID) { suspendedRuns(threadId: $t) { total runs { runId toolCalls { toolName requiresApproval interrupted } } } }`, map[string]any{"t": thread}, &out)
		ok := out.SuspendedRuns.Total == n
		list := out.SuspendedRuns.Runs
		for _, r := range list {
			if interrupted && !r.ToolCalls[0].Interrupted {
				ok = false
			}
		}
		if ok {
			return list
		}
		if time.Now().After(deadline) {
			t.Fatalf("suspendedRuns(threadId: %s) = %d runs, want %d (interrupted %v)", thread, out.SuspendedRuns.Total, n, interrupted)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestReconnectingSubscriberMissesNothing(t *testing.T) {
	t.Parallel()
	a, b := twoInstances(t, "--text-flush-bytes", "1") // every number its own event: many events to reconnect between
	run := a.StartRun(t, "count to 1000", nil)
	var got []apptest.Event
	for reconnects := 0; ; reconnects++ {
		if reconnects > 500 {
			t.Fatal("too many reconnects")
		}
		srv := b
		if reconnects%2 == 1 {
			srv = a
		}
		ws := apptest.DialWS(t, srv.URL, "graphql-transport-ws")
		after := 0
		if len(got) > 0 {
			after = got[len(got)-1].Seq
		}
		op := ws.Subscribe(apptest.EventsQuery, map[string]any{"runId": run.RunID, "after": after})
		batch := 1 + reconnects*37%90
		n := 0
		evs := apptest.Follow(t, ws, op, func(apptest.Event) bool { n++; return n == batch })
		got = append(got, evs...)
		ws.Conn.CloseNow() // vanish without a goodbye
		if len(got) > 0 && got[len(got)-1].Type == "RUN_FINISHED" {
			t.Logf("%d events over %d connections", len(got), reconnects+1)
			break
		}
	}
	checkSeqs(t, got)
	if len(got) < 1000 {
		t.Fatalf("only %d events", len(got))
	}
	if want := strings.TrimSpace(apptest.Text(got)); !strings.HasPrefix(want, "1 2 3 ") || !strings.HasSuffix(want, " 999 1000") {
		t.Fatalf("streamed text is not 1..1000: %q…", want[:min(len(want), 40)])
	}
	final := a.Run(t, run.RunID)
	if final.LastEventSeq != len(got) {
		t.Fatalf("received %d events, run has %d", len(got), final.LastEventSeq)
	}
}

func TestSuspendedRunsChangedAcrossInstances(t *testing.T) {
	t.Parallel()
	a, b := twoInstances(t)
	ws := apptest.DialWS(t, b.URL, "graphql-transport-ws")
	op := ws.Subscribe(`subscription { suspendedRunsChanged(agentId: "support-agent", threadId: "inbox-1") { kind run { runId status toolCalls { toolName } } } }`, nil)
	b.WaitWatchers(t, 1)
	a.StartRun(t, "refund order 1", map[string]any{"threadId": "elsewhere"})
	run := a.StartRun(t, "refund order 2", map[string]any{"threadId": "inbox-1"})
	type change struct {
		SuspendedRunsChanged struct {
			Kind string
			Run  apptest.Run
		}
	}
	read := func() change {
		data, _, errs := ws.Next(op)
		if errs != nil {
			t.Fatal(string(errs))
		}
		var c change
		if err := json.Unmarshal(data, &c); err != nil {
			t.Fatal(err)
		}
		return c
	}
	start := time.Now()
	c := read()
	if c.SuspendedRunsChanged.Kind != "SUSPENDED" || c.SuspendedRunsChanged.Run.RunID != run.RunID || c.SuspendedRunsChanged.Run.Status != "SUSPENDED" {
		t.Fatalf("first change %+v", c)
	}
	var out struct{ DeclineToolCall apptest.Run }
	a.Must(t, `mutation($id: ID!) { declineToolCall(runId: $id) { status } }`, map[string]any{"id": run.RunID}, &out)
	decided := time.Now()
	c = read()
	if c.SuspendedRunsChanged.Kind != "LEFT" || c.SuspendedRunsChanged.Run.RunID != run.RunID {
		t.Fatalf("second change %+v", c)
	}
	t.Logf("suspension seen on B after %v, decision after %v", decided.Sub(start), time.Since(decided))
}

func TestGracefulShutdownHandsRunsOver(t *testing.T) {
	t.Parallel()
	// The tool holds its call until A has begun to shut down, however slow the machine (a
	// built-in task of a fixed 2 s could end before the SIGTERM arrived, and A finish the run).
	tool := newHeldTool(t)
	config := apptest.WriteConfig(t, "agents:\n  - id: slow\n    model: {provider: demo}\n    tools: [slow_task]\n"+`tools:
  - name: slow_task
    inputSchema: {type: object, properties: {seconds: {type: number}}, required: [seconds]}
    http: {url: `+tool.URL+`, timeout: 10m}
`)
	a, b := twoInstances(t, "--lease-ttl", "30s", "--config", config)
	run := a.StartRun(t, "run a slow task", map[string]any{"agentId": "slow"})
	wsA, wsB := apptest.DialWS(t, a.URL, "graphql-transport-ws"), apptest.DialWS(t, b.URL, "graphql-transport-ws")
	opA := wsA.Subscribe(apptest.EventsQuery, map[string]any{"runId": run.RunID})
	opB := wsB.Subscribe(apptest.EventsQuery, map[string]any{"runId": run.RunID})
	apptest.Follow(t, wsA, opA, apptest.IsType("TOOL_CALL"))
	apptest.Until(t, "slow_task executing on A", func() bool { return tool.executing.Load() == 1 })
	stopped := time.Now()
	a.Terminate()
	apptest.Until(t, "A shutting down", func() bool { return strings.Contains(a.Output(), "shutting down") })
	close(tool.release) // the step in flight ends now, on A
	// A's subscriber is completed (the stream ends without RUN_FINISHED).
	rest := apptest.Follow(t, wsA, opA, nil)
	if len(rest) > 0 && rest[len(rest)-1].Type == "RUN_FINISHED" {
		t.Fatal("A finished the run instead of handing it over")
	}
	if err := a.Wait(); err != nil {
		t.Fatalf("A exited with %v", err)
	}
	// The step in flight finished on A; B took the run over at once (not after the 30s lease).
	evs := apptest.Follow(t, wsB, opB, nil)
	checkSeqs(t, evs)
	results := 0
	for _, e := range evs {
		if e.Type == "TOOL_RESULT" {
			results++
		}
	}
	if results != 1 || evs[len(evs)-1].Type != "RUN_FINISHED" || time.Since(stopped) > 15*time.Second {
		t.Fatalf("%d results, ends with %s, %v after SIGTERM", results, evs[len(evs)-1].Type, time.Since(stopped))
	}
	if n := tool.calls.Load(); n != 1 {
		t.Fatalf("the tool was called %d times, want once", n)
	}
}
