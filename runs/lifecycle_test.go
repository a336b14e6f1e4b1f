package runs_test

import (
	"encoding/json"
	"strings"
	"testing"

	"gorm.io/gorm"

	"interlock/agent"
	"interlock/gormstore"
	"interlock/internal/dbtest"
	"interlock/runs"
	"interlock/runtype"
)

func TestApproveRunsTheToolAndCompletes(t *testing.T) {
	t.Parallel()
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
		after, err := f.svc.Approve(as("alice", nil, runtype.RoleAdmin), runs.DecideParams{RunID: r.ID})
		if err != nil {
			t.Fatal(err)
		}
		if after.Status != runtype.StatusRunning || len(after.ToolCalls) != 0 || after.SuspendedAt != nil {
			t.Fatalf("after approve: %+v", after)
		}
		done := f.finished(t, r.ID)
		if done.Status != runtype.StatusCompleted || done.Output == nil || !strings.Contains(*done.Output, "rf_42") {
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
	ch, err := f.svc.Follow(bg(), runID, 0)
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	var lastType runtype.EventType
	for ev := range ch {
		n++
		if ev.Seq != n {
			t.Fatalf("event %d has seq %d", n, ev.Seq)
		}
		if n == 1 && ev.Type != runtype.EventRunStarted {
			t.Fatalf("first event is %s", ev.Type)
		}
		lastType = ev.Type
	}
	if n != last || !lastType.Terminal() {
		t.Fatalf("read %d events ending with %s; run says lastSeq %d", n, lastType, last)
	}
}

func TestDeclineTellsTheModelAndSkipsTheTool(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		f := setup(t, db, runs.Config{})
		for _, tc := range []struct{ reason, want string }{
			{"order was already refunded", "order was already refunded"},
			{"", agent.DeclinedMessage},
		} {
			r := f.suspended(t, runs.StartParams{Prompt: "refund order 9"})
			if _, err := f.svc.Decline(bg(), runs.DecideParams{RunID: r.ID}, tc.reason); err != nil {
				t.Fatal(err)
			}
			done := f.finished(t, r.ID)
			if done.Status != runtype.StatusCompleted || !strings.Contains(*done.Output, tc.want) || strings.Contains(*done.Output, "rf_9") {
				t.Fatalf("reason %q: output %q", tc.reason, *done.Output)
			}
		}
	})
}

func TestResumeValidatesAgainstResumeSchema(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		f := setup(t, db, runs.Config{})
		ctx := bg()
		r := f.suspended(t, runs.StartParams{Prompt: "ask the customer for their favourite colour"})
		tc := r.ToolCalls[0]
		if tc.ToolName != "ask_customer" || tc.RequiresApproval || !strings.Contains(string(tc.SuspendPayload), "favourite colour") {
			t.Fatalf("pending call = %+v payload %s", tc, tc.SuspendPayload)
		}
		_, err := f.svc.Approve(ctx, runs.DecideParams{RunID: r.ID})
		wantCode(t, err, runtype.CodeBadUserInput)
		_, err = f.svc.Decline(ctx, runs.DecideParams{RunID: r.ID}, "")
		wantCode(t, err, runtype.CodeBadUserInput)
		_, err = f.svc.Resume(ctx, runs.DecideParams{RunID: r.ID}, json.RawMessage(`{"answr":"blue"}`))
		wantCode(t, err, runtype.CodeBadUserInput)
		if !strings.Contains(err.Error(), "answer") {
			t.Fatalf("validation message does not name the field: %q", err)
		}
		still, _ := f.svc.Get(ctx, r.ID)
		if still.Status != runtype.StatusSuspended || len(still.ToolCalls) != 1 {
			t.Fatalf("after a bad resume the run is %s with %d calls", still.Status, len(still.ToolCalls))
		}
		if _, err := f.svc.Resume(ctx, runs.DecideParams{RunID: r.ID, ToolCallID: &tc.ToolCallID}, json.RawMessage(`{"answer":"blue"}`)); err != nil {
			t.Fatal(err)
		}
		done := f.finished(t, r.ID)
		if done.Status != runtype.StatusCompleted || !strings.Contains(*done.Output, "blue") {
			t.Fatalf("output %v", done.Output)
		}
		var call gormstore.ToolCall
		db.First(&call, "run_id = ? AND state <> ?", r.ID, gormstore.ToolCallAutoApproved) // its policy let it run, then it asked
		if call.State != gormstore.ToolCallResumed || call.ResumeData == nil || !strings.Contains(*call.ResumeData, "blue") {
			t.Fatalf("decision row = %+v", call)
		}
	})
}

// TestSeveralApprovalsWaitTogether: a step that asks for two calls needing approval suspends on
// both at once; deciding one keeps the run SUSPENDED on the other, nothing runs yet, and the last
// decision resumes the run, which then runs the calls in the model's order.
func TestSeveralApprovalsWaitTogether(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		f := setup(t, db, runs.Config{})
		ctx := bg()
		r := f.suspended(t, runs.StartParams{Prompt: "refund orders 7 and 8"})
		if len(r.ToolCalls) != 2 || !strings.Contains(string(r.ToolCalls[0].Args), `"7"`) || !strings.Contains(string(r.ToolCalls[1].Args), `"8"`) {
			t.Fatalf("suspension: %+v, want calls for 7 and 8", r.ToolCalls)
		}
		evs := allEvents(t, f, r.ID)
		if n := countType(evs, runtype.EventToolCallApproval); n != 2 || countType(evs, runtype.EventRunSuspended) != 1 {
			t.Fatalf("events %s: want two TOOL_CALL_APPROVAL and one RUN_SUSPENDED", typesOf(evs))
		}
		// Two calls wait: a decision must say which.
		_, err := f.svc.Approve(ctx, runs.DecideParams{RunID: r.ID})
		wantCode(t, err, runtype.CodeBadUserInput)

		first := r.ToolCalls[0].ToolCallID
		got, err := f.svc.Approve(as("alice", nil, runtype.RoleAdmin), runs.DecideParams{RunID: r.ID, ToolCallID: &first})
		if err != nil {
			t.Fatal(err)
		}
		if got.Status != runtype.StatusSuspended || len(got.ToolCalls) != 1 || got.ToolCalls[0].ToolCallID == first || len(got.Decisions) != 1 {
			t.Fatalf("after the first approval: %s, pending %+v, decisions %+v; want SUSPENDED on the second", got.Status, got.ToolCalls, got.Decisions)
		}
		f.svc.Wait()
		held, _ := f.svc.Get(ctx, r.ID)
		if held.Status != runtype.StatusSuspended || !held.SuspendedAt.Equal(*r.SuspendedAt) || len(held.ToolCalls) != 1 {
			t.Fatalf("held run: %s, suspendedAt %v (was %v), pending %+v", held.Status, held.SuspendedAt, r.SuspendedAt, held.ToolCalls)
		}
		evs = allEvents(t, f, r.ID)
		if countType(evs, runtype.EventToolCallApproved) != 1 || countType(evs, runtype.EventRunResumed) != 0 || countType(evs, runtype.EventToolResult) != 0 {
			t.Fatalf("events after the first approval %s: want it approved, not resumed, nothing run", typesOf(evs))
		}
		n, err := f.svc.ListSuspended(ctx, runs.ListSuspendedParams{})
		if err != nil || n.Total != 1 || len(n.Runs[0].ToolCalls) != 1 {
			t.Fatalf("suspendedRuns after the first approval: %+v, %v", n, err)
		}

		// The first call is decided: naming it again is a conflict.
		_, err = f.svc.Approve(ctx, runs.DecideParams{RunID: r.ID, ToolCallID: &first})
		wantCode(t, err, runtype.CodeConflict)
		if _, err := f.svc.Decline(ctx, runs.DecideParams{RunID: r.ID}, "only one refund per day"); err != nil {
			t.Fatal(err)
		}
		done := f.finished(t, r.ID)
		if !strings.Contains(*done.Output, "rf_7") || !strings.Contains(*done.Output, "only one refund per day") || len(done.Decisions) != 2 {
			t.Fatalf("output %q, decisions %+v", *done.Output, done.Decisions)
		}
		checkGapless(t, f, r.ID, done.LastSeq)
	})
}

// TestSubAgentApprovalsSurfaceOneAtATime: a supervisor's delegate call shows one call of its
// sub-agent, so a sub-agent's run with two approvals waits on them in turn.
func TestSubAgentApprovalsSurfaceOneAtATime(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		f := setup(t, db, runs.Config{})
		ctx := bg()
		r := f.suspended(t, runs.StartParams{AgentID: "supervisor", Prompt: "refund orders 7 and 8"})
		for _, order := range []string{`"7"`, `"8"`} {
			if len(r.ToolCalls) != 1 || !strings.Contains(string(r.ToolCalls[0].Args), order) {
				t.Fatalf("supervisor waits on %+v, want the refund of order %s alone", r.ToolCalls, order)
			}
			if _, err := f.svc.Approve(ctx, runs.DecideParams{RunID: r.ID}); err != nil {
				t.Fatal(err)
			}
			if order == `"7"` {
				f.until(t, r.ID, r.LastSeq, runtype.StatusSuspended)
				r, _ = f.svc.Get(ctx, r.ID)
			}
		}
		done := f.finished(t, r.ID)
		if done.Status != runtype.StatusCompleted || !strings.Contains(*done.Output, "rf_7") || !strings.Contains(*done.Output, "rf_8") {
			t.Fatalf("supervisor: %s, output %v", done.Status, show(done.Output))
		}
	})
}

func typesOf(evs []runtype.Event) string {
	var b strings.Builder
	for _, ev := range evs {
		b.WriteString(string(ev.Type) + " ")
	}
	return b.String()
}

func TestDecisionErrors(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		f := setup(t, db, runs.Config{})
		ctx := bg()
		_, err := f.svc.Approve(ctx, runs.DecideParams{RunID: "no-such-run"})
		wantCode(t, err, runtype.CodeNotFound)
		_, err = f.svc.Decline(ctx, runs.DecideParams{RunID: "no-such-run"}, "x")
		wantCode(t, err, runtype.CodeNotFound)
		_, err = f.svc.Resume(ctx, runs.DecideParams{RunID: "no-such-run"}, json.RawMessage(`{}`))
		wantCode(t, err, runtype.CodeNotFound)
		_, err = f.svc.Get(ctx, "no-such-run")
		wantCode(t, err, runtype.CodeNotFound)
		_, err = f.svc.Follow(ctx, "no-such-run", 0)
		wantCode(t, err, runtype.CodeNotFound)

		_, err = f.svc.StartRun(ctx, runs.StartParams{AgentID: "nobody", Prompt: "hi"})
		wantCode(t, err, runtype.CodeNotFound)
		_, err = f.svc.StartRun(ctx, runs.StartParams{AgentID: "support-agent", Prompt: "  "})
		wantCode(t, err, runtype.CodeBadUserInput)

		r := f.suspended(t, runs.StartParams{Prompt: "refund order 1"})
		_, err = f.svc.Approve(ctx, runs.DecideParams{RunID: r.ID, ToolCallID: ptr("call_99")})
		wantCode(t, err, runtype.CodeBadUserInput)
		_, err = f.svc.Resume(ctx, runs.DecideParams{RunID: r.ID}, json.RawMessage(`{"answer":"x"}`))
		wantCode(t, err, runtype.CodeBadUserInput)
		if _, err := f.svc.Approve(ctx, runs.DecideParams{RunID: r.ID}); err != nil {
			t.Fatal(err)
		}
		f.finished(t, r.ID)
		_, err = f.svc.Approve(ctx, runs.DecideParams{RunID: r.ID})
		wantCode(t, err, runtype.CodeConflict)

		// A run that completes without suspending cannot be decided.
		plain := f.start(t, runs.StartParams{Prompt: "hello"})
		f.finished(t, plain.ID)
		_, err = f.svc.Decline(ctx, runs.DecideParams{RunID: plain.ID}, "")
		wantCode(t, err, runtype.CodeConflict)
	})
}

func TestRequireToolApprovalHoldsEveryCall(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		f := setup(t, db, runs.Config{})
		free := f.start(t, runs.StartParams{Prompt: "what is the status of order 5"})
		if done := f.finished(t, free.ID); done.Status != runtype.StatusCompleted || !strings.Contains(*done.Output, "shipped") {
			t.Fatalf("lookup without approval: %s %v", done.Status, done.Output)
		}
		r := f.suspended(t, runs.StartParams{Prompt: "what is the status of order 5", RequireToolApproval: true})
		if r.ToolCalls[0].ToolName != "lookup_order" || !r.ToolCalls[0].RequiresApproval {
			t.Fatalf("call = %+v", r.ToolCalls[0])
		}
	})
}
