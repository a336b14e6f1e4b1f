package runs_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"gorm.io/gorm"

	"interlock/agent"
	"interlock/dbtest"
	"interlock/events"
	"interlock/gormstore"
	"interlock/runs"
)

func TestApproveRunsTheToolAndCompletes(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		f := setup(t, db, runs.Config{})
		r := f.suspended(t, runs.StartParams{Prompt: "refund order 42 for 30", ThreadID: ptr("t1"), ResourceID: ptr("u1")})
		if len(r.ToolCalls) != 1 {
			t.Fatalf("tool calls = %d, want 1", len(r.ToolCalls))
		}
		tc := r.ToolCalls[0]
		if tc.ToolName != "issue_refund" || !tc.RequiresApproval || r.SuspendedAt == nil {
			t.Fatalf("pending call = %+v, suspendedAt %v", tc, r.SuspendedAt)
		}
		var args map[string]any
		json.Unmarshal(tc.Args, &args)
		if args["orderId"] != "42" || args["amount"] != 30.0 {
			t.Fatalf("args = %s", tc.Args)
		}
		after, err := f.svc.Approve(context.Background(), runs.DecideParams{RunID: r.ID, DecidedBy: "alice"})
		if err != nil {
			t.Fatal(err)
		}
		if after.Status != runs.StatusRunning || len(after.ToolCalls) != 0 || after.SuspendedAt != nil {
			t.Fatalf("after approve: %+v", after)
		}
		done := f.finished(t, r.ID)
		if done.Status != runs.StatusCompleted || done.Output == nil || !strings.Contains(*done.Output, "rf_42") {
			t.Fatalf("finished run: status %s output %v", done.Status, done.Output)
		}
		var row gormstore.Run
		db.First(&row, "id = ?", r.ID)
		if row.Snapshot != nil || row.LeaseOwner != nil {
			t.Fatalf("finished run keeps snapshot or lease: %+v", row)
		}
		var call gormstore.ToolCall
		db.First(&call, "run_id = ?", r.ID)
		if call.State != gormstore.ToolCallApproved || call.DecidedBy == nil || *call.DecidedBy != "alice" || call.DecidedAt == nil {
			t.Fatalf("decision row = %+v", call)
		}
		checkGapless(t, f, r.ID, done.LastSeq)
	})
}

// checkGapless reads every event of a run and checks seq runs 1..last without gaps, from
// RUN_STARTED to a terminal event.
func checkGapless(t *testing.T, f *fixture, runID string, last int64) {
	t.Helper()
	ch, err := f.svc.Follow(context.Background(), runID, 0)
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	var lastType events.Type
	for ev := range ch {
		n++
		if ev.Seq != n {
			t.Fatalf("event %d has seq %d", n, ev.Seq)
		}
		if n == 1 && ev.Type != events.RunStarted {
			t.Fatalf("first event is %s", ev.Type)
		}
		lastType = ev.Type
	}
	if n != last || !lastType.Terminal() {
		t.Fatalf("read %d events ending with %s; run says lastSeq %d", n, lastType, last)
	}
}

func TestDeclineTellsTheModelAndSkipsTheTool(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		f := setup(t, db, runs.Config{})
		for _, tc := range []struct{ reason, want string }{
			{"order was already refunded", "order was already refunded"},
			{"", agent.DeclinedMessage},
		} {
			r := f.suspended(t, runs.StartParams{Prompt: "refund order 9"})
			if _, err := f.svc.Decline(context.Background(), runs.DecideParams{RunID: r.ID}, tc.reason); err != nil {
				t.Fatal(err)
			}
			done := f.finished(t, r.ID)
			if done.Status != runs.StatusCompleted || !strings.Contains(*done.Output, tc.want) || strings.Contains(*done.Output, "rf_9") {
				t.Fatalf("reason %q: output %q", tc.reason, *done.Output)
			}
		}
	})
}

func TestResumeValidatesAgainstResumeSchema(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		f := setup(t, db, runs.Config{})
		ctx := context.Background()
		r := f.suspended(t, runs.StartParams{Prompt: "ask the customer for their favourite colour"})
		tc := r.ToolCalls[0]
		if tc.ToolName != "ask_customer" || tc.RequiresApproval || !strings.Contains(string(tc.SuspendPayload), "favourite colour") {
			t.Fatalf("pending call = %+v payload %s", tc, tc.SuspendPayload)
		}
		_, err := f.svc.Approve(ctx, runs.DecideParams{RunID: r.ID})
		wantCode(t, err, runs.CodeBadUserInput)
		_, err = f.svc.Decline(ctx, runs.DecideParams{RunID: r.ID}, "")
		wantCode(t, err, runs.CodeBadUserInput)
		_, err = f.svc.Resume(ctx, runs.DecideParams{RunID: r.ID}, json.RawMessage(`{"answr":"blue"}`))
		wantCode(t, err, runs.CodeBadUserInput)
		if !strings.Contains(err.Error(), "answer") {
			t.Fatalf("validation message does not name the field: %q", err)
		}
		still, _ := f.svc.Get(ctx, r.ID)
		if still.Status != runs.StatusSuspended || len(still.ToolCalls) != 1 {
			t.Fatalf("after a bad resume the run is %s with %d calls", still.Status, len(still.ToolCalls))
		}
		if _, err := f.svc.Resume(ctx, runs.DecideParams{RunID: r.ID, ToolCallID: &tc.ToolCallID}, json.RawMessage(`{"answer":"blue"}`)); err != nil {
			t.Fatal(err)
		}
		done := f.finished(t, r.ID)
		if done.Status != runs.StatusCompleted || !strings.Contains(*done.Output, "blue") {
			t.Fatalf("output %v", done.Output)
		}
		var call gormstore.ToolCall
		db.First(&call, "run_id = ?", r.ID)
		if call.State != gormstore.ToolCallResumed || call.ResumeData == nil || !strings.Contains(*call.ResumeData, "blue") {
			t.Fatalf("decision row = %+v", call)
		}
	})
}

func TestSeveralApprovalsAreTakenOneAtATime(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		f := setup(t, db, runs.Config{})
		ctx := context.Background()
		r := f.suspended(t, runs.StartParams{Prompt: "refund orders 7 and 8"})
		if len(r.ToolCalls) != 1 || !strings.Contains(string(r.ToolCalls[0].Args), `"7"`) {
			t.Fatalf("first suspension: %+v", r.ToolCalls)
		}
		first := r.ToolCalls[0].ToolCallID
		if _, err := f.svc.Approve(ctx, runs.DecideParams{RunID: r.ID, ToolCallID: &first}); err != nil {
			t.Fatal(err)
		}
		f.until(t, r.ID, r.LastSeq+2, runs.StatusSuspended)
		f.svc.Wait()
		r2, _ := f.svc.Get(ctx, r.ID)
		if r2.Status != runs.StatusSuspended || len(r2.ToolCalls) != 1 || !strings.Contains(string(r2.ToolCalls[0].Args), `"8"`) {
			t.Fatalf("second suspension: %s %+v", r2.Status, r2.ToolCalls)
		}
		if !r2.SuspendedAt.After(*r.SuspendedAt) && !r2.SuspendedAt.Equal(*r.SuspendedAt) || !r2.CreatedAt.Equal(r.CreatedAt) {
			t.Fatalf("suspendedAt/createdAt: %v→%v, %v→%v", r.SuspendedAt, r2.SuspendedAt, r.CreatedAt, r2.CreatedAt)
		}
		// The first call is decided: naming it again is a conflict.
		_, err := f.svc.Approve(ctx, runs.DecideParams{RunID: r.ID, ToolCallID: &first})
		wantCode(t, err, runs.CodeConflict)
		if _, err := f.svc.Decline(ctx, runs.DecideParams{RunID: r.ID}, "only one refund per day"); err != nil {
			t.Fatal(err)
		}
		done := f.finished(t, r.ID)
		if !strings.Contains(*done.Output, "rf_7") || !strings.Contains(*done.Output, "only one refund per day") {
			t.Fatalf("output %q", *done.Output)
		}
		checkGapless(t, f, r.ID, done.LastSeq)
	})
}

func TestDecisionErrors(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		f := setup(t, db, runs.Config{})
		ctx := context.Background()
		_, err := f.svc.Approve(ctx, runs.DecideParams{RunID: "no-such-run"})
		wantCode(t, err, runs.CodeNotFound)
		_, err = f.svc.Decline(ctx, runs.DecideParams{RunID: "no-such-run"}, "x")
		wantCode(t, err, runs.CodeNotFound)
		_, err = f.svc.Resume(ctx, runs.DecideParams{RunID: "no-such-run"}, json.RawMessage(`{}`))
		wantCode(t, err, runs.CodeNotFound)
		_, err = f.svc.Get(ctx, "no-such-run")
		wantCode(t, err, runs.CodeNotFound)
		_, err = f.svc.Follow(ctx, "no-such-run", 0)
		wantCode(t, err, runs.CodeNotFound)

		_, err = f.svc.StartRun(ctx, runs.StartParams{AgentID: "nobody", Prompt: "hi"})
		wantCode(t, err, runs.CodeNotFound)
		_, err = f.svc.StartRun(ctx, runs.StartParams{AgentID: "support-agent", Prompt: "  "})
		wantCode(t, err, runs.CodeBadUserInput)

		r := f.suspended(t, runs.StartParams{Prompt: "refund order 1"})
		_, err = f.svc.Approve(ctx, runs.DecideParams{RunID: r.ID, ToolCallID: ptr("call_99")})
		wantCode(t, err, runs.CodeBadUserInput)
		_, err = f.svc.Resume(ctx, runs.DecideParams{RunID: r.ID}, json.RawMessage(`{"answer":"x"}`))
		wantCode(t, err, runs.CodeBadUserInput)
		if _, err := f.svc.Approve(ctx, runs.DecideParams{RunID: r.ID}); err != nil {
			t.Fatal(err)
		}
		f.finished(t, r.ID)
		_, err = f.svc.Approve(ctx, runs.DecideParams{RunID: r.ID})
		wantCode(t, err, runs.CodeConflict)

		// A run that completes without suspending cannot be decided.
		plain := f.start(t, runs.StartParams{Prompt: "hello"})
		f.finished(t, plain.ID)
		_, err = f.svc.Decline(ctx, runs.DecideParams{RunID: plain.ID}, "")
		wantCode(t, err, runs.CodeConflict)
	})
}

func TestRequireToolApprovalHoldsEveryCall(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		f := setup(t, db, runs.Config{})
		free := f.start(t, runs.StartParams{Prompt: "what is the status of order 5"})
		if done := f.finished(t, free.ID); done.Status != runs.StatusCompleted || !strings.Contains(*done.Output, "shipped") {
			t.Fatalf("lookup without approval: %s %v", done.Status, done.Output)
		}
		r := f.suspended(t, runs.StartParams{Prompt: "what is the status of order 5", RequireToolApproval: true})
		if r.ToolCalls[0].ToolName != "lookup_order" || !r.ToolCalls[0].RequiresApproval {
			t.Fatalf("call = %+v", r.ToolCalls[0])
		}
	})
}
