package app_test

import (
	"strings"
	"testing"
	"time"

	"interlock/internal/apptest"
	"interlock/internal/dbtest"
)

// TestExpiresAtOverGraphQL: suspendedRuns shows when a waiting call expires (the tool's
// approvalTimeout after the run suspended), and agents show the tool's timeout.
func TestExpiresAtOverGraphQL(t *testing.T) {
	t.Parallel()
	file, _ := apptest.ExpiryConfig(t, "30m")
	apptest.EachDB(t, func(t *testing.T, s *apptest.Server) {
		run := s.StartRun(t, "refund order 7", map[string]any{"agentId": "billing"})
		s.WaitStatus(t, run.RunID, "SUSPENDED")
		var out struct {
			SuspendedRuns struct{ Runs []apptest.ExpiryRun }
			Agent         struct {
				Tools []struct{ ApprovalTimeoutSeconds *int }
			}
		}
		s.Must(t, `{ suspendedRuns(agentId: "billing") { runs { `+apptest.ExpiryRunFields+` } } agent(id: "billing") { tools { approvalTimeoutSeconds } } }`, nil, &out)
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
	t.Parallel()
	file, refunds := apptest.ExpiryConfig(t, "1s")
	db := dbtest.MySQLURL(dbtest.MySQLDSN(t))
	a, b := apptest.StartProc(t, db, "--config", file), apptest.StartProc(t, db, "--config", file)
	var ids []string
	for i := range 4 {
		srv := a
		if i%2 == 1 {
			srv = b
		}
		ids = append(ids, srv.StartRun(t, "refund order 7", map[string]any{"agentId": "billing"}).RunID)
	}
	for i, id := range ids {
		done := a.WaitStatus(t, id, "COMPLETED")
		if done.Output == nil || !strings.Contains(*done.Output, "The approval request for refund timed out after 1s without a decision; the tool was not run.") {
			t.Fatalf("run %s: output %v, want the model told the request timed out", id, done.Output)
		}
		if len(done.Decisions) != 1 || done.Decisions[0].Kind != "EXPIRED" || done.Decisions[0].DecidedBy != nil {
			t.Fatalf("run %s: decisions %+v, want one EXPIRED by nobody", id, done.Decisions)
		}
		srv := []*apptest.Proc{a, b}[i%2]
		ws := apptest.DialWS(t, srv.URL, "graphql-transport-ws")
		evs := apptest.Follow(t, ws, ws.Subscribe(apptest.EventsQuery, map[string]any{"runId": id}), nil)
		checkSeqs(t, evs)
		count := map[string]int{}
		for _, e := range evs {
			count[e.Type]++
		}
		if count["TOOL_CALL_EXPIRED"] != 1 || count["TOOL_RESULT"] != 0 || count["TOOL_CALL_DECLINED"] != 0 || count["RUN_FINISHED"] != 1 {
			t.Fatalf("run %s: events %v, want one TOOL_CALL_EXPIRED, no result", id, count)
		}
		r := b.Post(t, `mutation($id: ID!) { approveToolCall(runId: $id) { status } }`, map[string]any{"id": id})
		if r.Code() != "CONFLICT" || !strings.Contains(r.Errors[0].Message, "expired") {
			t.Fatalf("late approval: %+v, want CONFLICT saying it expired", r.Errors)
		}
	}
	if calls, _ := refunds.Got(); len(calls) != 0 {
		t.Fatalf("the refund endpoint was called %d times", len(calls))
	}
}
