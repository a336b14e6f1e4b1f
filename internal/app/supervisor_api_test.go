package app

import (
	"strings"
	"testing"
)

// suspendedList is the answer of suspendedRuns with the fields the supervisor tests read.
type suspendedList struct {
	SuspendedRuns struct {
		Total int
		Runs  []struct {
			RunID       string
			AgentID     string
			ParentRunID *string
			ToolCalls   []apiToolCall
		}
	}
}

const suspendedQuery = `query($agentId: ID) { suspendedRuns(agentId: $agentId) { total runs { runId agentId parentRunId
	toolCalls { id toolCallId toolName args requiresApproval suspendPayload interrupted } } } }`

func (s *testServer) suspendedOf(t *testing.T, agentID any) suspendedList {
	t.Helper()
	var out suspendedList
	s.must(t, suspendedQuery, map[string]any{"agentId": agentID}, &out)
	return out
}

// startSuspended starts a run of agentID and waits for its RUN_SUSPENDED.
func (s *testServer) startSuspended(t *testing.T, agentID, prompt string) apiRun {
	t.Helper()
	r := s.startRun(t, prompt, map[string]any{"agentId": agentID})
	ws := dialWS(t, s.url, "graphql-transport-ws")
	defer ws.conn.CloseNow()
	follow(t, ws, ws.subscribe(eventsQuery, map[string]any{"runId": r.RunID}), isType("RUN_SUSPENDED"))
	return r
}

// finish follows a run to its end and returns it.
func (s *testServer) finish(t *testing.T, runID string) *apiRun {
	t.Helper()
	ws := dialWS(t, s.url, "graphql-transport-ws")
	defer ws.conn.CloseNow()
	follow(t, ws, ws.subscribe(eventsQuery, map[string]any{"runId": runID, "after": 0}), nil)
	return s.run(t, runID)
}

// TestSupervisorAPIApproval: the demo supervisor delegates to support-agent; the refund the
// support agent asks for is what the inbox shows for the supervisor's run, and approving the
// supervisor's run runs it and finishes both.
func TestSupervisorAPIApproval(t *testing.T) {
	eachDB(t, func(t *testing.T, s *testServer) {
		var agents struct {
			Agents []struct {
				ID        string
				Tools     []struct{ Name string }
				SubAgents []struct{ ID string }
			}
		}
		s.must(t, `{ agents { id tools { name } subAgents { id } } }`, nil, &agents)
		found := false
		for _, a := range agents.Agents {
			if a.ID == "supervisor" {
				found = len(a.SubAgents) == 1 && a.SubAgents[0].ID == "support-agent"
			}
		}
		if !found {
			t.Fatalf("agents = %+v, want supervisor with sub-agent support-agent", agents.Agents)
		}

		sup := s.startSuspended(t, "supervisor", "refund order 42 for 30")
		top := s.suspendedOf(t, nil)
		if top.SuspendedRuns.Total != 1 || top.SuspendedRuns.Runs[0].RunID != sup.RunID {
			t.Fatalf("suspendedRuns() = %+v, want only the supervisor's run", top.SuspendedRuns)
		}
		tc := top.SuspendedRuns.Runs[0].ToolCalls
		if len(tc) != 1 || tc[0].ToolName != "issue_refund" || !tc[0].RequiresApproval || !strings.Contains(string(tc[0].Args), `"orderId":"42"`) {
			t.Fatalf("supervisor's run shows %+v, want the inner issue_refund", tc)
		}
		inner := s.suspendedOf(t, "support-agent")
		if inner.SuspendedRuns.Total != 1 || deref(inner.SuspendedRuns.Runs[0].ParentRunID) != sup.RunID {
			t.Fatalf("suspendedRuns(support-agent) = %+v, want the inner run under %s", inner.SuspendedRuns, sup.RunID)
		}
		if got := s.suspendedOf(t, "supervisor"); got.SuspendedRuns.Total != 1 {
			t.Fatalf("suspendedRuns(supervisor) = %+v", got.SuspendedRuns)
		}

		var dec struct{ ApproveToolCall apiRun }
		s.must(t, `mutation($id: ID!) { approveToolCall(runId: $id) { `+runFields+` } }`, map[string]any{"id": sup.RunID}, &dec)
		if dec.ApproveToolCall.RunID != sup.RunID || dec.ApproveToolCall.Status != "RUNNING" {
			t.Fatalf("approveToolCall = %+v", dec.ApproveToolCall)
		}
		s.wantError(t, "CONFLICT", `mutation($id: ID!) { approveToolCall(runId: $id) { status } }`, map[string]any{"id": sup.RunID})
		done := s.finish(t, sup.RunID)
		if done.Status != "COMPLETED" || !strings.Contains(deref(done.Output), "rf_42") {
			t.Fatalf("supervisor run: %s %v", done.Status, deref(done.Output))
		}
		innerRun := s.finish(t, inner.SuspendedRuns.Runs[0].RunID)
		if innerRun.Status != "COMPLETED" || !strings.Contains(deref(innerRun.Output), "rf_42") {
			t.Fatalf("inner run: %s %v", innerRun.Status, deref(innerRun.Output))
		}
	})
}

// TestSupervisorAPIThreeLevels: chief → supervisor → billing, whose HTTP refund needs approval.
// A decline on the chief's run reaches billing's model and the tool never runs; an approval
// runs the tool once, in billing's run.
func TestSupervisorAPIThreeLevels(t *testing.T) {
	refunds := newRefundEndpoint(t)
	file := writeConfig(t, `
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
	eachDB(t, func(t *testing.T, s *testServer) {
		before, _ := refunds.got()

		chief := s.startSuspended(t, "chief", "refund order 7 for 5")
		top := s.suspendedOf(t, nil)
		if top.SuspendedRuns.Total != 1 || top.SuspendedRuns.Runs[0].RunID != chief.RunID || top.SuspendedRuns.Runs[0].ToolCalls[0].ToolName != "issue_refund" {
			t.Fatalf("suspendedRuns() = %+v, want the chief's run on issue_refund", top.SuspendedRuns)
		}
		billing := s.suspendedOf(t, "billing")
		if billing.SuspendedRuns.Total != 1 {
			t.Fatalf("suspendedRuns(billing) = %+v", billing.SuspendedRuns)
		}
		s.must(t, `mutation($id: ID!) { declineToolCall(runId: $id, reason: "needs a receipt") { status } }`, map[string]any{"id": chief.RunID}, &struct{}{})
		done := s.finish(t, chief.RunID)
		inner := s.run(t, billing.SuspendedRuns.Runs[0].RunID)
		for _, r := range []*apiRun{done, inner} {
			if r.Status != "COMPLETED" || !strings.Contains(deref(r.Output), "issue_refund (call_1): needs a receipt") {
				t.Fatalf("run %s: %s %q, want the reason in the answer", r.RunID, r.Status, deref(r.Output))
			}
		}
		if after, _ := refunds.got(); len(after) != len(before) {
			t.Fatalf("a declined refund reached the endpoint: %v", after[len(before):])
		}

		chief = s.startSuspended(t, "chief", "refund order 8 for 5")
		s.must(t, `mutation($id: ID!) { approveToolCall(runId: $id) { status } }`, map[string]any{"id": chief.RunID}, &struct{}{})
		done = s.finish(t, chief.RunID)
		if done.Status != "COMPLETED" || !strings.Contains(deref(done.Output), "rf_7") {
			t.Fatalf("approved chain: %s %q", done.Status, deref(done.Output))
		}
		after, _ := refunds.got()
		if len(after) != len(before)+1 || after[len(after)-1]["agentId"] != "billing" {
			t.Fatalf("refund calls = %v, want one from billing's run", after[len(before):])
		}
		if got := s.suspendedOf(t, nil); got.SuspendedRuns.Total != 0 {
			t.Fatalf("suspended after both chains finished: %+v", got.SuspendedRuns)
		}
	}, "--config", file)
}
