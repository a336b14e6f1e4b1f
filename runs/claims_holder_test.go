package runs_test

import (
	"encoding/json"
	"strings"
	"testing"

	"gorm.io/gorm"

	"interlock/agent"
	"interlock/internal/dbtest"
	"interlock/llm"
	"interlock/runs"
	"interlock/runtype"
)

// TestClaimASupervisorsRunByTheSubAgentToolsRole: a supervisor's run waiting on its sub-agent's
// call is claimed by a person whose only right to decide is the sub-agent tool's approverRoles
// (the call's holder decides who may, as for a decision); a viewer still may not.
func TestClaimASupervisorsRunByTheSubAgentToolsRole(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		refund := &agent.Tool{Name: "issue_refund", RequireApproval: true, ApproverRoles: []string{"refunds"}, InputSchema: json.RawMessage(`{"type":"object"}`)}
		refunds := &agent.Agent{ID: "refunds", Name: "Refunds", Model: &llm.Demo{}, Tools: []*agent.Tool{refund}}
		boss := &agent.Agent{ID: "boss", Name: "Boss", Model: &llm.Demo{}, SubAgents: []*agent.Agent{refunds}}
		f := setupWith(t, db, runs.Config{}, setupOpts{agents: []*agent.Agent{refunds, boss}})
		r := f.suspended(t, runs.StartParams{AgentID: "boss", Prompt: "refund order 1 for 5"})
		if len(r.ToolCalls) != 1 || !strings.Contains(r.ToolCalls[0].ToolCallID, "/") {
			t.Fatalf("boss waits on %+v, want its sub-agent's call", r.ToolCalls)
		}
		if _, err := f.svc.ClaimRun(as("rita", nil, "refunds"), r.ID); err != nil {
			t.Fatalf("rita (refunds) claims the supervisor's run: %v", err)
		}
		claims, err := f.svc.RunClaims(bg(), r.ID, runtype.StatusSuspended)
		if err != nil || len(claims) != 1 || claims[0].Subject != "rita" {
			t.Fatalf("claims %+v, %v; want rita's", claims, err)
		}
		_, err = f.svc.ClaimRun(as("vic", nil, runtype.RoleViewer), r.ID)
		wantCode(t, err, runtype.CodeForbidden)
	})
}
