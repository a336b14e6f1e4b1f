package storetest

import (
	"encoding/json"
	"testing"

	"interlock/runs"
	"interlock/runtype"
)

// testPolicy checks what is stored of the judgement of calls (runs/policy.go): the decisions of
// calls a policy let through, written with the checkpoint that shows the calls, and the reason and
// revision of a call a policy held, kept once a person decides it.
func testPolicy(t *testing.T, open Opener) {
	each(t, open, "AutoApprovedCallsAreDecisions", func(t *testing.T, f *fixture) {
		r := f.insert(runOpts{})
		calls := []runtype.ToolCall{
			{ToolCallID: "tc_1", ToolName: "lookup", Args: json.RawMessage(`{"order":1}`)},
			{ToolCallID: "tc_2", ToolName: "lookup", Args: json.RawMessage(`{"order":2}`)},
		}
		c := cp(r, at(10), runtype.Event{Type: runtype.EventToolCallRequested, ToolCall: &calls[0]}, runtype.Event{Type: runtype.EventToolCallRequested, ToolCall: &calls[1]})
		for i, call := range calls {
			reason := "policy: requireApproval \"args.order > 5\" is false for this call"
			c.AutoApproved = append(c.AutoApproved, runtype.Decision{RunID: r.ID, ToolCallID: call.ToolCallID, ToolName: call.ToolName,
				Kind: runtype.DecisionAutoApproved, DecidedAt: at(10), Reason: &reason, Args: call.Args,
				Receipt: ptr("receipt-" + itoa(int64(i))), PolicyRevision: ptr("sha256:abc")})
		}
		if err := f.s.Checkpoint(f.ctx, c); err != nil {
			t.Fatal(err)
		}
		got := f.get(r.ID)
		if len(got.Decisions) != 2 || len(got.ToolCalls) != 0 {
			t.Fatalf("decisions %+v, waiting calls %+v", got.Decisions, got.ToolCalls)
		}
		for i, d := range got.Decisions {
			if d.Kind != runtype.DecisionAutoApproved || d.ToolCallID != calls[i].ToolCallID || d.DecidedBy != nil || !d.DecidedAt.Equal(runtype.StoredTime(at(10))) ||
				d.Reason == nil || string(d.Args) != string(calls[i].Args) || d.Receipt == nil || *d.Receipt != "receipt-"+itoa(int64(i)) ||
				d.PolicyRevision == nil || *d.PolicyRevision != "sha256:abc" {
				t.Fatalf("decision %d = %+v", i, d)
			}
		}
		// A checkpoint that loses the lease stores none of them.
		lost := cp(&live{ID: r.ID, Lease: "another", Seq: r.Seq + 2}, at(11))
		lost.AutoApproved = []runtype.Decision{{RunID: r.ID, ToolCallID: "tc_3", ToolName: "lookup", Kind: runtype.DecisionAutoApproved, DecidedAt: at(11), Args: json.RawMessage(`{}`)}}
		wantLeaseLost(t, "Checkpoint under another lease", f.s.Checkpoint(f.ctx, lost))
		if n := len(f.get(r.ID).Decisions); n != 2 {
			t.Fatalf("%d decisions after a refused checkpoint, want 2", n)
		}
		recent, _, err := f.s.ListRecent(f.ctx, runs.RecentParams{Statuses: []runtype.Status{runtype.StatusRunning}, Decision: ptr(runtype.DecisionAutoApproved), PerPage: 10})
		if err != nil || len(recent) != 1 || recent[0].ID != r.ID {
			t.Fatalf("ListRecent(decision: AUTO_APPROVED) = %v, %v", recent, err)
		}
	})

	each(t, open, "AHeldCallKeepsWhyAndWhichPolicy", func(t *testing.T, f *fixture) {
		r := f.insert(runOpts{})
		call := approval("tc_1")
		call.ApprovalReason, call.PolicyRevision = `policy requireApproval "args.amount > 10" is true for this call`, "sha256:def"
		got := f.suspend(r, call, at(10), "instance-1")
		if len(got.ToolCalls) != 1 || got.ToolCalls[0].ApprovalReason != call.ApprovalReason || got.ToolCalls[0].PolicyRevision != "sha256:def" {
			t.Fatalf("waiting call %+v", got.ToolCalls)
		}
		f.decide(got, decision(got, runtype.DecisionApproved, "lease-2", at(20)))
		if d := f.get(r.ID).Decisions; len(d) != 1 || d[0].Kind != runtype.DecisionApproved || d[0].PolicyRevision == nil || *d[0].PolicyRevision != "sha256:def" {
			t.Fatalf("decision %+v", d)
		}
	})
}
