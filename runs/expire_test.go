package runs_test

import (
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"gorm.io/gorm"

	"interlock/agent"
	"interlock/internal/dbtest"
	"interlock/llm"
	"interlock/runs"
	"interlock/runtype"
)

// testClock is a clock the test moves forward.
type testClock struct{ offset atomic.Int64 }

func (c *testClock) now() time.Time          { return time.Now().Add(time.Duration(c.offset.Load())) }
func (c *testClock) advance(d time.Duration) { c.offset.Add(int64(d)) }

// expiringAgents are the demo support agent's refund and question tools with a 30m
// approvalTimeout, as "expiring-agent", and a supervisor that delegates to it.
func expiringAgents() []*agent.Agent {
	var tools []*agent.Tool
	for _, t := range agent.DemoAgents(&llm.Demo{})[0].Tools {
		if t.Name == "issue_refund" || t.Name == "ask_customer" {
			c := *t
			c.ApprovalTimeout = 30 * time.Minute
			tools = append(tools, &c)
		}
	}
	inner := &agent.Agent{ID: "expiring-agent", Name: "Expiring", Model: &llm.Demo{}, Tools: tools}
	boss := &agent.Agent{ID: "expiring-supervisor", Name: "Boss", Model: &llm.Demo{}, SubAgents: []*agent.Agent{inner}}
	return []*agent.Agent{inner, boss}
}

func expirySetup(t *testing.T, db *gorm.DB, clock *testClock, interval time.Duration) *fixture {
	t.Helper()
	return setupWith(t, db, runs.Config{NowFunc: clock.now, ExpiryInterval: interval}, setupOpts{agents: expiringAgents()})
}

func countType(evs []runtype.Event, typ runtype.EventType) int {
	n := 0
	for _, ev := range evs {
		if ev.Type == typ {
			n++
		}
	}
	return n
}

// checkExpired checks a finished run whose one call expired: one TOOL_CALL_EXPIRED, one EXPIRED
// decision by nobody, no tool result, and the model was told want.
func checkExpired(t *testing.T, f *fixture, runID, want string) *runtype.Run {
	t.Helper()
	done := f.finished(t, runID)
	if done.Status != runtype.StatusCompleted || done.Output == nil || !strings.Contains(*done.Output, want) {
		t.Fatalf("run %s: %s, output %v; want COMPLETED with %q", runID, done.Status, show(done.Output), want)
	}
	if strings.Contains(*done.Output, agent.DeclinedMessage) {
		t.Fatalf("the model was told the call was declined: %q", *done.Output)
	}
	evs := allEvents(t, f, runID)
	if n := countType(evs, runtype.EventToolCallExpired); n != 1 {
		t.Fatalf("%d TOOL_CALL_EXPIRED events, want 1", n)
	}
	if n := countType(evs, runtype.EventToolResult) + countType(evs, runtype.EventToolCallDeclined) + countType(evs, runtype.EventToolCallApproved); n != 0 {
		t.Fatalf("%d results or decisions besides the expiry", n)
	}
	// A tool that asked for input ran first: its policy let it (AUTO_APPROVED), then nobody answered.
	decided := slices.DeleteFunc(slices.Clone(done.Decisions), func(d runtype.Decision) bool { return d.Kind == runtype.DecisionAutoApproved })
	if len(decided) != 1 || decided[0].Kind != runtype.DecisionExpired || decided[0].DecidedBy != nil {
		t.Fatalf("decisions = %+v, want one EXPIRED by nobody", done.Decisions)
	}
	return done
}

func show(s *string) string {
	if s == nil {
		return "nil"
	}
	return *s
}

// TestApprovalExpires: a call of a tool with a 30m approvalTimeout shows when it expires, waits
// that long and no longer: then it is EXPIRED, the model is told the request timed out, and a
// late approval is CONFLICT saying it expired.
func TestApprovalExpires(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		clock := &testClock{}
		var passes *loopPasses
		f := setupWith(t, db, runs.Config{NowFunc: clock.now, ExpiryInterval: 10 * time.Millisecond}, setupOpts{agents: expiringAgents(),
			wrap: func(st runs.Store) runs.Store { passes = &loopPasses{Store: st}; return passes }})
		r := f.suspended(t, runs.StartParams{AgentID: "expiring-agent", Prompt: "refund order 42 for 30"})
		call := r.ToolCalls[0]
		if call.ExpiresAt == nil || !call.ExpiresAt.Equal(r.SuspendedAt.Add(30*time.Minute)) {
			t.Fatalf("expiresAt = %v, want suspendedAt %v + 30m", call.ExpiresAt, r.SuspendedAt)
		}
		waitPasses(t, "the expiry loop", &passes.expiry, 3) // several passes of the loop: nothing is due yet
		if got, _ := f.svc.Get(bg(), r.ID); got.Status != runtype.StatusSuspended {
			t.Fatalf("run is %s before its deadline", got.Status)
		}
		clock.advance(31 * time.Minute)
		checkExpired(t, f, r.ID, "The approval request for issue_refund timed out after 30m without a decision; the tool was not run.")
		for _, id := range []*string{&call.ToolCallID, nil} {
			_, err := f.svc.Approve(bg(), runs.DecideParams{RunID: r.ID, ToolCallID: id})
			wantCode(t, err, runtype.CodeConflict)
			if !strings.Contains(err.Error(), "expired") {
				t.Fatalf("late approval: %q does not say the call expired", err)
			}
		}
	})
}

// TestDecisionAfterTheDeadlineIsRefused: past the deadline, before the expiry loop has looked,
// a decision is CONFLICT (expired), and the call is expired there and then.
func TestDecisionAfterTheDeadlineIsRefused(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		clock := &testClock{}
		f := expirySetup(t, db, clock, time.Hour) // the loop never runs
		r := f.suspended(t, runs.StartParams{AgentID: "expiring-agent", Prompt: "refund order 7 for 5"})
		clock.advance(30 * time.Minute)
		_, err := f.svc.Approve(bg(), runs.DecideParams{RunID: r.ID})
		wantCode(t, err, runtype.CodeConflict)
		if !strings.Contains(err.Error(), "expired") {
			t.Fatalf("approval at the deadline: %q does not say the call expired", err)
		}
		checkExpired(t, f, r.ID, "timed out after 30m")
		if f.executed.Load() != 0 {
			t.Fatal("a tool ran")
		}
	})
}

// TestSuspendedCallExpires: a call waiting for resume data expires the same way, and the model
// is told the request for input timed out.
func TestSuspendedCallExpires(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		clock := &testClock{}
		f := expirySetup(t, db, clock, 10*time.Millisecond)
		r := f.suspended(t, runs.StartParams{AgentID: "expiring-agent", Prompt: "ask which size they want"})
		if c := r.ToolCalls[0]; c.RequiresApproval || c.ExpiresAt == nil {
			t.Fatalf("call = %+v, want a suspension with expiresAt", c)
		}
		clock.advance(time.Hour)
		checkExpired(t, f, r.ID, "The request for input of ask_customer timed out after 30m")
		_, err := f.svc.Resume(bg(), runs.DecideParams{RunID: r.ID}, []byte(`{"answer":"M"}`))
		wantCode(t, err, runtype.CodeConflict)
	})
}

// TestSubAgentCallExpires: a sub-agent's call surfaces on the supervisor's run with its
// expiresAt; its expiry resolves both, once each, and the supervisor goes on.
func TestSubAgentCallExpires(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		clock := &testClock{}
		f := expirySetup(t, db, clock, 10*time.Millisecond)
		top := f.suspended(t, runs.StartParams{AgentID: "expiring-supervisor", Prompt: "refund order 9 for 3"})
		if c := top.ToolCalls[0]; c.ExpiresAt == nil || c.ToolName != "issue_refund" {
			t.Fatalf("supervisor's call = %+v, want the sub-agent's refund with expiresAt", c)
		}
		clock.advance(31 * time.Minute)
		done := f.finished(t, top.ID)
		if done.Status != runtype.StatusCompleted || !strings.Contains(show(done.Output), "timed out") {
			t.Fatalf("supervisor run: %s, output %q", done.Status, show(done.Output))
		}
		if len(done.Decisions) != 1 || done.Decisions[0].Kind != runtype.DecisionExpired {
			t.Fatalf("supervisor decisions = %+v, want one EXPIRED", done.Decisions)
		}
		if n := countType(allEvents(t, f, top.ID), runtype.EventToolCallExpired); n != 1 {
			t.Fatalf("supervisor: %d TOOL_CALL_EXPIRED, want 1", n)
		}
		_, err := f.svc.Approve(bg(), runs.DecideParams{RunID: top.ID})
		wantCode(t, err, runtype.CodeConflict)
		if !strings.Contains(err.Error(), "expired") {
			t.Fatalf("late approval on the supervisor: %q", err)
		}
	})
}

// TestTwoServicesExpireOnce: two instances over one database, both running the expiry loop
// often: the call expires once.
func TestTwoServicesExpireOnce(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		clock := &testClock{}
		a := expirySetup(t, db, clock, 5*time.Millisecond)
		b := expirySetup(t, db, clock, 5*time.Millisecond)
		var ids []string
		for _, p := range []string{"refund order 1 for 2", "refund order 3 for 4", "refund order 5 for 6"} {
			ids = append(ids, a.suspended(t, runs.StartParams{AgentID: "expiring-agent", Prompt: p}).ID)
		}
		clock.advance(31 * time.Minute)
		for _, id := range ids {
			a.until(t, id, 0, runtype.StatusCompleted, runtype.StatusFailed)
			a.svc.Wait()
			b.svc.Wait()
			checkExpired(t, a, id, "timed out after 30m")
		}
	})
}

// TestExpiryOfOneOfSeveralCalls: of a run waiting on two approvals, the one nobody decided
// expires and the run goes on with the other's decision; when neither is decided, the first
// expiry keeps the run waiting on the second and the second resumes it.
func TestExpiryOfOneOfSeveralCalls(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		clock := &testClock{}
		f := expirySetup(t, db, clock, 10*time.Millisecond)
		ctx := bg()
		one := f.suspended(t, runs.StartParams{AgentID: "expiring-agent", Prompt: "refund orders 7 and 8"})
		both := f.suspended(t, runs.StartParams{AgentID: "expiring-agent", Prompt: "refund orders 5 and 6"})
		if len(one.ToolCalls) != 2 || one.ToolCalls[1].ExpiresAt == nil {
			t.Fatalf("pending calls %+v, want two with expiresAt", one.ToolCalls)
		}
		first := one.ToolCalls[0].ToolCallID
		if _, err := f.svc.Approve(ctx, runs.DecideParams{RunID: one.ID, ToolCallID: &first}); err != nil {
			t.Fatal(err)
		}
		clock.advance(31 * time.Minute)
		done := f.finished(t, one.ID)
		if done.Status != runtype.StatusCompleted || !strings.Contains(show(done.Output), "rf_7") || !strings.Contains(show(done.Output), "timed out") {
			t.Fatalf("run with one call approved: %s, output %q", done.Status, show(done.Output))
		}
		if len(done.Decisions) != 2 || done.Decisions[0].Kind != runtype.DecisionApproved || done.Decisions[1].Kind != runtype.DecisionExpired {
			t.Fatalf("decisions = %+v, want approved then expired", done.Decisions)
		}
		done = f.finished(t, both.ID)
		evs := allEvents(t, f, both.ID)
		if done.Status != runtype.StatusCompleted || countType(evs, runtype.EventToolCallExpired) != 2 || countType(evs, runtype.EventRunResumed) != 1 || countType(evs, runtype.EventToolResult) != 0 {
			t.Fatalf("run with neither decided: %s, events %s; want two expiries, one resume, no result", done.Status, typesOf(evs))
		}
		checkGapless(t, f, both.ID, done.LastSeq)
	})
}
