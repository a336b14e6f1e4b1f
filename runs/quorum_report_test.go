package runs_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"gorm.io/gorm"

	"interlock/agent"
	"interlock/internal/dbtest"
	"interlock/llm"
	"interlock/runs"
	"interlock/runtype"
)

// TestBatchReportsARecordedApproval: decideToolCalls' first approval of a quorum's call is
// recorded, not final: its outcome says so (Recorded, 1 of 2); the second one runs the tool and
// is not "recorded" (2 of 2). A call that needs one approval carries no count.
func TestBatchReportsARecordedApproval(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		q := quorumSetup(t, db)
		r := q.held(t)
		one := q.suspended(t, runs.StartParams{AgentID: "counter-agent", Prompt: "refund order 9"})
		items := []runs.BatchDecision{
			{DecideParams: runs.DecideParams{RunID: r.ID}, Kind: runs.BatchApprove},
			{DecideParams: runs.DecideParams{RunID: one.ID}, Kind: runs.BatchApprove},
		}
		out, err := q.svc.DecideMany(alice, items)
		if err != nil {
			t.Fatal(err)
		}
		if !out[0].OK() || !out[0].Recorded || out[0].ApprovalsCount != 1 || out[0].ApprovalsRequired != 2 {
			t.Fatalf("the quorum's first approval: %+v; want recorded, 1 of 2", out[0])
		}
		if !out[1].OK() || out[1].Recorded || out[1].ApprovalsRequired != 0 {
			t.Fatalf("a one-approval call: %+v; want final, no count", out[1])
		}
		out, err = q.svc.DecideMany(dave, items[:1])
		if err != nil {
			t.Fatal(err)
		}
		if !out[0].OK() || out[0].Recorded || out[0].ApprovalsCount != 2 || out[0].ApprovalsRequired != 2 {
			t.Fatalf("the quorum's final approval: %+v; want not recorded-only, 2 of 2", out[0])
		}
		q.finished(t, r.ID)
		if n := len(q.executions()); n != 1 {
			t.Fatalf("the tool ran %d times", n)
		}
	})
}

// TestSupervisorShowsASubAgentsQuorumCount: a supervisor's run that shows its sub-agent's call
// of a tool needing two approvals shows the quorum there too (0 of 2 before, 1 of 2 after the
// first approval, in the approval's answer and when read again), while the approvals are
// recorded on the sub-agent's run; the second approval runs the tool.
func TestSupervisorShowsASubAgentsQuorumCount(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		refund := &agent.Tool{Name: "issue_refund", RequireApproval: true, RequiredApprovals: 2, InputSchema: json.RawMessage(`{"type":"object"}`)}
		refunds := &agent.Agent{ID: "refunds", Name: "Refunds", Model: &llm.Demo{}, Tools: []*agent.Tool{refund}}
		boss := &agent.Agent{ID: "boss", Name: "Boss", Model: &llm.Demo{}, SubAgents: []*agent.Agent{refunds}}
		f := setupWith(t, db, runs.Config{}, setupOpts{agents: []*agent.Agent{refunds, boss}})
		r := f.suspended(t, runs.StartParams{AgentID: "boss", Prompt: "refund order 1 for 5"})
		if len(r.ToolCalls) != 1 || !strings.Contains(r.ToolCalls[0].ToolCallID, "/") {
			t.Fatalf("boss waits on %+v, want its sub-agent's call", r.ToolCalls)
		}
		if a := r.ToolCalls[0].Approvals; a == nil || a.Required != 2 || a.Count() != 0 {
			t.Fatalf("before any approval the supervisor's call shows %+v, want 0 of 2", a)
		}
		call := r.ToolCalls[0].ToolCallID
		p := runs.DecideParams{RunID: r.ID, ToolCallID: &call}
		got, err := f.svc.Approve(alice, p)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status != runtype.StatusSuspended || len(got.ToolCalls) != 1 || got.ToolCalls[0].Approvals.Count() != 1 || got.ToolCalls[0].Approvals.Required != 2 {
			t.Fatalf("the approval's answer: %s, calls %+v; want the call still waiting, 1 of 2", got.Status, got.ToolCalls)
		}
		again, err := f.svc.Get(bg(), r.ID)
		if err != nil {
			t.Fatal(err)
		}
		if a := again.ToolCalls[0].Approvals; a.Count() != 1 || a.Required != 2 || a.By[0].Subject != "alice" {
			t.Fatalf("read again: %+v, want alice's approval, 1 of 2", a)
		}
		if _, err := f.svc.Approve(dave, p); err != nil {
			t.Fatal(err)
		}
		if done := f.finished(t, r.ID); done.Status != runtype.StatusCompleted {
			t.Fatalf("boss: %s", done.Status)
		}
	})
}

// TestAuditReadsAQuorumsApprovers: the audit trail's record of a quorum's final decision holds
// every approval that counted (the other approver's too), in the order given, read from the
// store with the decision; a decision that needed one approval holds none.
func TestAuditReadsAQuorumsApprovers(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		q := quorumSetup(t, db)
		r := q.held(t)
		p := runs.DecideParams{RunID: r.ID}
		if _, err := q.svc.Approve(alice, p); err != nil {
			t.Fatal(err)
		}
		if _, err := q.svc.Approve(dave, p); err != nil {
			t.Fatal(err)
		}
		q.finished(t, r.ID)
		one := q.suspended(t, runs.StartParams{AgentID: "counter-agent", Prompt: "refund order 9"})
		if _, err := q.svc.Approve(alice, runs.DecideParams{RunID: one.ID}); err != nil {
			t.Fatal(err)
		}
		q.finished(t, one.ID)
		got := map[string]runs.DecisionRecord{}
		err := q.svc.AuditDecisions(as("auditor", nil, runtype.RoleAdmin), r.CreatedAt.Add(-time.Minute), time.Now().Add(time.Minute), func(d runs.DecisionRecord) error {
			if d.Kind != runtype.DecisionAutoApproved {
				got[d.RunID] = d
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		qd, od := got[r.ID], got[one.ID]
		if qd.Approvals == nil || strings.Join(subjects(qd.Approvals), ",") != "alice,dave" || qd.Approvals.By[0].At.IsZero() {
			t.Fatalf("the quorum's decision in the audit: %+v, approvals %+v; want alice's and dave's", qd.Decision, qd.Approvals)
		}
		if od.RunID == "" || od.Approvals != nil {
			t.Fatalf("the one-approval decision in the audit: %+v", od)
		}
	})
}
