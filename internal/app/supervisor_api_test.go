package app_test

import (
	"strings"
	"testing"

	"interlock/internal/apptest"
)

// TestSupervisorAPIApproval: the demo supervisor delegates to support-agent; the refund the
// support agent asks for is what the inbox shows for the supervisor's run, and approving the
// supervisor's run runs it and finishes both.
func TestSupervisorAPIApproval(t *testing.T) {
	t.Parallel()
	apptest.EachDB(t, func(t *testing.T, s *apptest.Server) {
		var agents struct {
			Agents []struct {
				ID        string
				Tools     []struct{ Name string }
				SubAgents []struct{ ID string }
			}
		}
		s.Must(t, `{ agents { id tools { name } subAgents { id } } }`, nil, &agents)
		found := false
		for _, a := range agents.Agents {
			if a.ID == "supervisor" {
				found = len(a.SubAgents) == 1 && a.SubAgents[0].ID == "support-agent"
			}
		}
		if !found {
			t.Fatalf("agents = %+v, want supervisor with sub-agent support-agent", agents.Agents)
		}

		sup := startSuspended(t, s, "supervisor", "refund order 42 for 30")
		top := suspendedOf(t, s, nil)
		if top.SuspendedRuns.Total != 1 || top.SuspendedRuns.Runs[0].RunID != sup.RunID {
			t.Fatalf("suspendedRuns() = %+v, want only the supervisor's run", top.SuspendedRuns)
		}
		tc := top.SuspendedRuns.Runs[0].ToolCalls
		if len(tc) != 1 || tc[0].ToolName != "issue_refund" || !tc[0].RequiresApproval || !strings.Contains(string(tc[0].Args), `"orderId":"42"`) {
			t.Fatalf("supervisor's run shows %+v, want the inner issue_refund", tc)
		}
		inner := suspendedOf(t, s, "support-agent")
		if inner.SuspendedRuns.Total != 1 || deref(inner.SuspendedRuns.Runs[0].ParentRunID) != sup.RunID {
			t.Fatalf("suspendedRuns(support-agent) = %+v, want the inner run under %s", inner.SuspendedRuns, sup.RunID)
		}
		if got := suspendedOf(t, s, "supervisor"); got.SuspendedRuns.Total != 1 {
			t.Fatalf("suspendedRuns(supervisor) = %+v", got.SuspendedRuns)
		}

		var dec struct{ ApproveToolCall apptest.Run }
		s.Must(t, `mutation($id: ID!) { approveToolCall(runId: $id) { `+apptest.RunFields+` } }`, map[string]any{"id": sup.RunID}, &dec)
		if dec.ApproveToolCall.RunID != sup.RunID || dec.ApproveToolCall.Status != "RUNNING" {
			t.Fatalf("approveToolCall = %+v", dec.ApproveToolCall)
		}
		s.WantError(t, "CONFLICT", `mutation($id: ID!) { approveToolCall(runId: $id) { status } }`, map[string]any{"id": sup.RunID})
		done := followToEnd(t, s, sup.RunID)
		if done.Status != "COMPLETED" || !strings.Contains(deref(done.Output), "rf_42") {
			t.Fatalf("supervisor run: %s %v", done.Status, deref(done.Output))
		}
		innerRun := followToEnd(t, s, inner.SuspendedRuns.Runs[0].RunID)
		if innerRun.Status != "COMPLETED" || !strings.Contains(deref(innerRun.Output), "rf_42") {
			t.Fatalf("inner run: %s %v", innerRun.Status, deref(innerRun.Output))
		}
	})
}

// TestSupervisorAPIThreeLevels: chief → supervisor → billing, whose HTTP refund needs approval.
// A decline on the chief's run reaches billing's model and the tool never runs; an approval
// runs the tool once, in billing's run.
func TestSupervisorAPIThreeLevels(t *testing.T) {
	t.Parallel()
	refunds := apptest.NewRefundEndpoint(t)
	file := apptest.WriteConfig(t, `
agents:
  - id: chief
    description: Runs the desk.
    model: {provider: demo}
    subAgents: [supervisor]
  - id: supervisor
    description: Hands requests on.
    model: {provider: demo}
    subAgents: [billing]
  - id: billing
    description: Refunds orders.
    model: {provider: demo}
    tools: [issue_refund]
tools:
  - name: issue_refund
    inputSchema: {type: object, properties: {orderId: {type: string}, amount: {type: number}}, required: [orderId, amount]}
    requireApproval: true
    http: {url: `+refunds.URL+`/refund, timeout: 5s}
`)
	apptest.EachDB(t, func(t *testing.T, s *apptest.Server) {
		before, _ := refunds.Got()

		chief := startSuspended(t, s, "chief", "refund order 7 for 5")
		top := suspendedOf(t, s, nil)
		if top.SuspendedRuns.Total != 1 || top.SuspendedRuns.Runs[0].RunID != chief.RunID || top.SuspendedRuns.Runs[0].ToolCalls[0].ToolName != "issue_refund" {
			t.Fatalf("suspendedRuns() = %+v, want the chief's run on issue_refund", top.SuspendedRuns)
		}
		billing := suspendedOf(t, s, "billing")
		if billing.SuspendedRuns.Total != 1 {
			t.Fatalf("suspendedRuns(billing) = %+v", billing.SuspendedRuns)
		}
		s.Must(t, `mutation($id: ID!) { declineToolCall(runId: $id, reason: "needs a receipt") { status } }`, map[string]any{"id": chief.RunID}, &struct{}{})
		done := followToEnd(t, s, chief.RunID)
		inner := s.Run(t, billing.SuspendedRuns.Runs[0].RunID)
		for _, r := range []*apptest.Run{done, inner} {
			if r.Status != "COMPLETED" || !strings.Contains(deref(r.Output), "issue_refund (call_1): needs a receipt") {
				t.Fatalf("run %s: %s %q, want the reason in the answer", r.RunID, r.Status, deref(r.Output))
			}
		}
		if after, _ := refunds.Got(); len(after) != len(before) {
			t.Fatalf("a declined refund reached the endpoint: %v", after[len(before):])
		}

		chief = startSuspended(t, s, "chief", "refund order 8 for 5")
		s.Must(t, `mutation($id: ID!) { approveToolCall(runId: $id) { status } }`, map[string]any{"id": chief.RunID}, &struct{}{})
		done = followToEnd(t, s, chief.RunID)
		if done.Status != "COMPLETED" || !strings.Contains(deref(done.Output), "rf_7") {
			t.Fatalf("approved chain: %s %q", done.Status, deref(done.Output))
		}
		after, _ := refunds.Got()
		if len(after) != len(before)+1 || after[len(after)-1]["agentId"] != "billing" {
			t.Fatalf("refund calls = %v, want one from billing's run", after[len(before):])
		}
		if got := suspendedOf(t, s, nil); got.SuspendedRuns.Total != 0 {
			t.Fatalf("suspended after both chains finished: %+v", got.SuspendedRuns)
		}
	}, "--config", file)
}

// suspendedList is the answer of suspendedRuns with the fields the supervisor tests read.
type suspendedList struct {
	SuspendedRuns struct {
		Total int
		Runs  []struct {
			RunID       string
			AgentID     string
			ParentRunID *string
			ToolCalls   []apptest.ToolCall
		}
	}
}

const suspendedQuery = `query($agentId: ID) { suspendedRuns(agentId: $agentId) { total runs { runId agentId parentRunId
	toolCalls { id toolCallId toolName args requiresApproval suspendPayload interrupted } } } }`

// suspendedOf lists the suspended runs of agentID (nil: of every agent) on s.
func suspendedOf(t *testing.T, s *apptest.Server, agentID any) suspendedList {
	t.Helper()
	var out suspendedList
	s.Must(t, suspendedQuery, map[string]any{"agentId": agentID}, &out)
	return out
}

// startSuspended starts a run of agentID on s and waits for its RUN_SUSPENDED.
func startSuspended(t *testing.T, s *apptest.Server, agentID, prompt string) apptest.Run {
	t.Helper()
	r := s.StartRun(t, prompt, map[string]any{"agentId": agentID})
	ws := apptest.DialWS(t, s.URL, "graphql-transport-ws")
	defer ws.Conn.CloseNow()
	apptest.Follow(t, ws, ws.Subscribe(apptest.EventsQuery, map[string]any{"runId": r.RunID}), apptest.IsType("RUN_SUSPENDED"))
	return r
}

// followToEnd follows a run on s to its end and returns it.
func followToEnd(t *testing.T, s *apptest.Server, runID string) *apptest.Run {
	t.Helper()
	ws := apptest.DialWS(t, s.URL, "graphql-transport-ws")
	defer ws.Conn.CloseNow()
	apptest.Follow(t, ws, ws.Subscribe(apptest.EventsQuery, map[string]any{"runId": runID, "after": 0}), nil)
	return s.Run(t, runID)
}
