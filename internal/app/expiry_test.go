package app

import (
	"strings"
	"testing"
	"time"

	"interlock/dbtest"
)

// expiryConfig is a config file whose billing agent, on the fake model, calls an HTTP refund
// tool that needs approval within timeout; more is appended (further top-level sections).
func expiryConfig(t *testing.T, timeout string, more ...string) (file string, refunds *refundEndpoint) {
	t.Helper()
	model, refunds := fakeModel(t, "refund"), newRefundEndpoint(t)
	t.Setenv("INTERLOCK_TEST_MODEL_KEY", "sk-test")
	return writeConfig(t, `
agents:
  - id: billing
    model: {provider: openai, baseURL: `+model.URL+`/v1, name: test-model, apiKeyEnv: INTERLOCK_TEST_MODEL_KEY}
    tools: [refund]
tools:
  - name: refund
    inputSchema: {type: object, properties: {orderId: {type: string}, amount: {type: number}}, required: [orderId, amount]}
    requireApproval: true
    approvalTimeout: `+timeout+`
    http: {url: `+refunds.URL+`/refund, timeout: 5s}
`+strings.Join(more, "")), refunds
}

type expiryRun struct {
	RunID       string  `json:"runId"`
	Status      string  `json:"status"`
	SuspendedAt *string `json:"suspendedAt"`
	Output      *string `json:"output"`
	ToolCalls   []struct {
		ToolCallID string  `json:"toolCallId"`
		ExpiresAt  *string `json:"expiresAt"`
	} `json:"toolCalls"`
	Decisions []struct {
		ToolCallID string  `json:"toolCallId"`
		Kind       string  `json:"kind"`
		DecidedBy  *string `json:"decidedBy"`
		Reason     *string `json:"reason"`
	} `json:"decisions"`
}

const expiryRunFields = `runId status suspendedAt output toolCalls { toolCallId expiresAt } decisions { toolCallId kind decidedBy reason }`

func (s *testServer) expiryRun(t *testing.T, id string) expiryRun {
	t.Helper()
	var out struct{ Run expiryRun }
	s.must(t, `query($id: ID!) { run(runId: $id) { `+expiryRunFields+` } }`, map[string]any{"id": id}, &out)
	return out.Run
}

// waitStatus polls a run until it has the status.
func (s *testServer) waitStatus(t *testing.T, id, status string) expiryRun {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		r := s.expiryRun(t, id)
		if r.Status == status {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s is %s after 20s, want %s", id, r.Status, status)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestExpiresAtOverGraphQL: suspendedRuns shows when a waiting call expires (the tool's
// approvalTimeout after the run suspended), and agents show the tool's timeout.
func TestExpiresAtOverGraphQL(t *testing.T) {
	file, _ := expiryConfig(t, "30m")
	eachDB(t, func(t *testing.T, s *testServer) {
		run := s.startRun(t, "refund order 7", map[string]any{"agentId": "billing"})
		s.waitStatus(t, run.RunID, "SUSPENDED")
		var out struct {
			SuspendedRuns struct{ Runs []expiryRun }
			Agent         struct {
				Tools []struct{ ApprovalTimeoutSeconds *int }
			}
		}
		s.must(t, `{ suspendedRuns(agentId: "billing") { runs { `+expiryRunFields+` } } agent(id: "billing") { tools { approvalTimeoutSeconds } } }`, nil, &out)
		if len(out.SuspendedRuns.Runs) != 1 || len(out.SuspendedRuns.Runs[0].ToolCalls) != 1 {
			t.Fatalf("suspendedRuns = %+v", out.SuspendedRuns)
		}
		r := out.SuspendedRuns.Runs[0]
		exp := r.ToolCalls[0].ExpiresAt
		if exp == nil || r.SuspendedAt == nil {
			t.Fatalf("expiresAt %v, suspendedAt %v", exp, r.SuspendedAt)
		}
		e, err1 := time.Parse(time.RFC3339Nano, *exp)
		sa, err2 := time.Parse(time.RFC3339Nano, *r.SuspendedAt)
		if err1 != nil || err2 != nil || e.Sub(sa) != 30*time.Minute || !strings.HasSuffix(*exp, "Z") {
			t.Fatalf("expiresAt %s, suspendedAt %s: want 30m later, in UTC", *exp, *r.SuspendedAt)
		}
		if tools := out.Agent.Tools; len(tools) != 1 || tools[0].ApprovalTimeoutSeconds == nil || *tools[0].ApprovalTimeoutSeconds != 1800 {
			t.Fatalf("agent tools = %+v, want approvalTimeoutSeconds 1800", tools)
		}
	}, "--config", file)
}

// TestExpiryAcrossTwoProcesses: two server processes over one MariaDB/MySQL database, both
// running their expiry loops: each call that nobody approves within its approvalTimeout expires
// exactly once — one TOOL_CALL_EXPIRED event, one EXPIRED decision — the tool never runs, the
// model is told the request timed out, and a late approval is CONFLICT saying it expired.
func TestExpiryAcrossTwoProcesses(t *testing.T) {
	file, refunds := expiryConfig(t, "1s")
	db := dbtest.MySQLURL(dbtest.MySQLDSN(t))
	a, b := startProc(t, db, "--config", file), startProc(t, db, "--config", file)
	var ids []string
	for i := range 4 {
		srv := a
		if i%2 == 1 {
			srv = b
		}
		ids = append(ids, srv.startRun(t, "refund order 7", map[string]any{"agentId": "billing"}).RunID)
	}
	for i, id := range ids {
		done := a.waitStatus(t, id, "COMPLETED")
		if done.Output == nil || !strings.Contains(*done.Output, "The approval request for refund timed out after 1s without a decision; the tool was not run.") {
			t.Fatalf("run %s: output %v, want the model told the request timed out", id, done.Output)
		}
		if len(done.Decisions) != 1 || done.Decisions[0].Kind != "EXPIRED" || done.Decisions[0].DecidedBy != nil {
			t.Fatalf("run %s: decisions %+v, want one EXPIRED by nobody", id, done.Decisions)
		}
		srv := []*proc{a, b}[i%2]
		ws := dialWS(t, srv.url, "graphql-transport-ws")
		evs := follow(t, ws, ws.subscribe(eventsQuery, map[string]any{"runId": id}), nil)
		checkSeqs(t, evs)
		count := map[string]int{}
		for _, e := range evs {
			count[e.Type]++
		}
		if count["TOOL_CALL_EXPIRED"] != 1 || count["TOOL_RESULT"] != 0 || count["TOOL_CALL_DECLINED"] != 0 || count["RUN_FINISHED"] != 1 {
			t.Fatalf("run %s: events %v, want one TOOL_CALL_EXPIRED, no result", id, count)
		}
		r := b.post(t, `mutation($id: ID!) { approveToolCall(runId: $id) { status } }`, map[string]any{"id": id})
		if r.code() != "CONFLICT" || !strings.Contains(r.Errors[0].Message, "expired") {
			t.Fatalf("late approval: %+v, want CONFLICT saying it expired", r.Errors)
		}
	}
	if calls, _ := refunds.got(); len(calls) != 0 {
		t.Fatalf("the refund endpoint was called %d times", len(calls))
	}
}
