package runs_test

import (
	"context"
	"strings"
	"testing"

	"gorm.io/gorm"

	"interlock/internal/dbtest"
	"interlock/runs"
	"interlock/runtype"
)

// TestTheSameDecisionAgainReturnsTheStoredResult: a client whose approval was committed but
// answered with an error (or timed out) retries it; the retry gets the run as stored, not
// CONFLICT, and changes nothing: one decision, the tool run once. A decision that differs in
// anything — the principal, the kind, the reason — is another decision and gets the CONFLICT
// naming who decided and when.
func TestTheSameDecisionAgainReturnsTheStoredResult(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		f := setup(t, db, runs.Config{})
		alice, bob := as("alice", nil, runtype.RoleAdmin), as("bob", nil, runtype.RoleAdmin)

		r := f.suspended(t, runs.StartParams{AgentID: "counter-agent", Prompt: "refund order 3"})
		call := r.ToolCalls[0].ToolCallID
		if _, err := f.svc.Approve(alice, runs.DecideParams{RunID: r.ID, ToolCallID: &call}); err != nil {
			t.Fatal(err)
		}
		for _, retry := range []*string{&call, nil} { // with the call's id, and without (one call waited)
			got, err := f.svc.Approve(alice, runs.DecideParams{RunID: r.ID, ToolCallID: retry})
			if err != nil || got.ID != r.ID || len(got.Decisions) != 1 {
				t.Fatalf("alice's approval again (call id %v): %+v, %v; want the run with its one decision", retry != nil, got, err)
			}
		}
		_, err := f.svc.Approve(bob, runs.DecideParams{RunID: r.ID, ToolCallID: &call})
		wantCode(t, err, runtype.CodeConflict)
		if !strings.Contains(err.Error(), "approved by alice") {
			t.Errorf("bob's approval: %v, want it to name alice", err)
		}
		_, err = f.svc.Decline(alice, runs.DecideParams{RunID: r.ID, ToolCallID: &call}, "no")
		wantCode(t, err, runtype.CodeConflict)
		// Nobody in particular (authentication off) cannot be told from a second person.
		_, err = f.svc.Approve(runtype.WithPrincipal(context.Background(), runtype.Anonymous()), runs.DecideParams{RunID: r.ID, ToolCallID: &call})
		wantCode(t, err, runtype.CodeConflict)
		done := f.finished(t, r.ID)
		if done.Status != runtype.StatusCompleted || len(done.Decisions) != 1 || f.executed.Load() != 1 {
			t.Fatalf("after the retries: %s, %d decisions, executed %d times; want COMPLETED, 1, 1", done.Status, len(done.Decisions), f.executed.Load())
		}

		// A decline repeated with its reason is the same decision; with another reason it is not.
		r = f.suspended(t, runs.StartParams{AgentID: "counter-agent", Prompt: "refund order 4"})
		call = r.ToolCalls[0].ToolCallID
		for range 2 {
			if _, err := f.svc.Decline(alice, runs.DecideParams{RunID: r.ID, ToolCallID: &call}, "not today"); err != nil {
				t.Fatalf("alice's decline (again): %v", err)
			}
		}
		_, err = f.svc.Decline(alice, runs.DecideParams{RunID: r.ID, ToolCallID: &call}, "never")
		wantCode(t, err, runtype.CodeConflict)
		if done := f.finished(t, r.ID); len(done.Decisions) != 1 || f.executed.Load() != 1 {
			t.Fatalf("after the declines: %d decisions, executed %d; want 1 and still 1", len(done.Decisions), f.executed.Load())
		}
	})
}
