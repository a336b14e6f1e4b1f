package runs_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"interlock/agent"
	"interlock/llm"
	"interlock/runs"
	"interlock/runtype"
)

// TestALateResultIsShownWithTheInterruptedCall: instance a runs a tool, and the tool finishes
// while a is cut off from the database. b takes the run over and reports the call interrupted,
// saying where a's answer will appear if a holds one. Once the database answers a again, a
// records the answer it held as the late result of the call as it ran (tc_1), without touching
// the run b now holds: the run waits on the call under its new id (tc_2), which names tc_1 and
// shows the answer. The tool ran once. A person who approves the call again may: it runs a
// second time, and the run completes, the late result still there, on tc_1 only.
//
// Not parallel: what it checks turns on leases of a few seconds, renewed (or not) in time;
// the load of other tests must not decide it.
func TestALateResultIsShownWithTheInterruptedCall(t *testing.T) {
	direct, proxied, proxy := cutOffPair(t)
	tl := newTimeline()
	var c counted
	release := make(chan struct{})
	ttl := 2 * time.Second
	a := setupWith(t, proxied, runs.Config{LeaseTTL: ttl, InstanceID: "a", RecoveryInterval: time.Hour, Logger: slog.New(timelineLog{name: "a", tl: tl})},
		setupOpts{agents: []*agent.Agent{blockingAgent("a", tl, &c, release)}})
	b := setupWith(t, direct, runs.Config{LeaseTTL: ttl, InstanceID: "b", RecoveryInterval: 50 * time.Millisecond, Logger: slog.New(timelineLog{name: "b", tl: tl})},
		setupOpts{agents: []*agent.Agent{blockingAgent("b", tl, &c, release)}})
	t.Cleanup(proxy.Restore)

	r := a.start(t, runs.StartParams{AgentID: "fence-agent", Prompt: "refund order 1"})
	tl.wait(t, "a: tool started", 10*time.Second)
	proxy.Cut(true)
	close(release) // the refund is made while a cannot store it
	tl.wait(t, "a: run: storing a tool result failed", 10*time.Second)
	evs := b.until(t, r.ID, 0, runtype.StatusSuspended)
	interrupted := ofType(evs, runtype.EventToolCallInterrupted)
	if len(interrupted) != 1 {
		t.Fatalf("events %s, want one TOOL_CALL_INTERRUPTED", typesOf(evs))
	}
	why, call := interrupted[0].Reason, interrupted[0].ToolCall
	if call.ToolCallID != "tc_2" || call.InterruptedToolCallID != "tc_1" {
		t.Fatalf("the interrupted call is %s, interrupted as %q; want tc_2, which ran as tc_1", call.ToolCallID, call.InterruptedToolCallID)
	}
	if !strings.Contains(why, "issue_refund may have been sent to the tool: instance a, which was executing it, stored that it was starting it") ||
		!strings.Contains(why, "If it holds the answer, it records it once it reaches the database, as the late result of tc_1 shown with this call") {
		t.Fatalf("reason %q does not say where a late answer will appear", why)
	}

	proxy.Restore()
	tl.wait(t, "a: run: a tool's result is recorded as the call's late result", 30*time.Second)
	got, err := b.svc.Get(bg(), r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != runtype.StatusSuspended || len(got.ToolCalls) != 1 || got.ToolCalls[0].ToolCallID != "tc_2" || got.ToolCalls[0].InterruptedToolCallID != "tc_1" {
		t.Fatalf("after the late result: run %s waits on %+v; want SUSPENDED on tc_2, which ran as tc_1", got.Status, got.ToolCalls)
	}
	if len(got.LateResults) != 1 || got.LateResults[0].ToolCallID != "tc_1" || got.LateResults[0].InstanceID != "a" ||
		string(got.LateResults[0].Result) != `{"refunded":true}` || got.LateResults[0].Error != nil {
		t.Fatalf("late results %+v; want tc_1's refund, recorded by a", got.LateResults)
	}
	if got.LastSeq != evs[len(evs)-1].Seq {
		t.Fatalf("the run's last seq moved from %d to %d: a late result must not touch the run", evs[len(evs)-1].Seq, got.LastSeq)
	}
	if n := c.executed.Load(); n != 1 {
		t.Fatalf("the tool ran %d times before anyone approved it again; want once", n)
	}

	if _, err := b.svc.Approve(bg(), runs.DecideParams{RunID: r.ID, ToolCallID: ptr("tc_2")}); err != nil {
		t.Fatalf("approving the interrupted call again: %v", err)
	}
	done := b.finished(t, r.ID)
	if done.Status != runtype.StatusCompleted || c.executed.Load() != 2 {
		t.Fatalf("approved again: run %s, the tool ran %d times; want COMPLETED, twice", done.Status, c.executed.Load())
	}
	if len(done.LateResults) != 1 || done.LateResults[0].ToolCallID != "tc_1" {
		t.Fatalf("late results of the finished run %+v; want tc_1's only", done.LateResults)
	}
}

// TestRecoverySaysWhatALateResultHolds: the database is out of reach for everyone for longer
// than twice the lease while a tool fails; the instance that ran it keeps its answer and records
// it as a late result when the database is back. The instance that recovers the run afterwards
// finds it, and its reason says what is known: the answer was recorded, when, and what it was.
//
// Not parallel: what it checks turns on leases of a few seconds, renewed (or not) in time;
// the load of other tests must not decide it.
func TestRecoverySaysWhatALateResultHolds(t *testing.T) {
	direct, proxied, proxy := cutOffPair(t)
	tl := newTimeline()
	var executed atomic.Int64
	release := make(chan struct{})
	declined := &agent.Agent{
		ID: "fence-agent", Name: "Fence", Model: &llm.Demo{},
		Tools: []*agent.Tool{{
			Name: "issue_refund", InputSchema: json.RawMessage(`{"type":"object"}`),
			ExecuteFunc: func(ctx context.Context, _ *agent.Call) (any, error) {
				executed.Add(1)
				tl.add("tool started")
				<-release
				return nil, errors.New("the payment provider refused: card expired")
			},
		}},
	}
	ttl := 2 * time.Second
	a := setupWith(t, proxied, runs.Config{LeaseTTL: ttl, InstanceID: "a", RecoveryInterval: time.Hour, Logger: slog.New(timelineLog{name: "a", tl: tl})},
		setupOpts{agents: []*agent.Agent{declined}})
	t.Cleanup(proxy.Restore)

	r := a.start(t, runs.StartParams{AgentID: "fence-agent", Prompt: "refund order 1"})
	tl.wait(t, "tool started", 10*time.Second)
	proxy.Cut(true)
	close(release)
	tl.wait(t, "a: run: a tool ran but its result could not be stored with the run; keeping it", 20*time.Second)
	proxy.Restore()
	tl.wait(t, "a: run: a tool's result is recorded as the call's late result", 30*time.Second)

	b := setupWith(t, direct, runs.Config{LeaseTTL: ttl, InstanceID: "b", RecoveryInterval: 50 * time.Millisecond, Logger: slog.New(timelineLog{name: "b", tl: tl})},
		setupOpts{agents: []*agent.Agent{declined}})
	evs := b.until(t, r.ID, 0, runtype.StatusSuspended)
	interrupted := ofType(evs, runtype.EventToolCallInterrupted)
	if len(interrupted) != 1 {
		t.Fatalf("events %s, want one TOOL_CALL_INTERRUPTED", typesOf(evs))
	}
	why := interrupted[0].Reason
	for _, want := range []string{
		"issue_refund was sent to the tool, and instance a, which was executing it, lost the run before it could store the tool's answer; it recorded the answer later (",
		"UTC), as the late result of tc_1 shown with this call: the tool failed: the payment provider refused: card expired. Approving runs the tool again",
	} {
		if !strings.Contains(why, want) {
			t.Fatalf("reason %q does not say %q", why, want)
		}
	}
	got, err := b.svc.Get(bg(), r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.LateResults) != 1 || got.LateResults[0].Result != nil || got.LateResults[0].Error == nil ||
		*got.LateResults[0].Error != "the payment provider refused: card expired" {
		t.Fatalf("late results %+v; want tc_1's error", got.LateResults)
	}
	if n := executed.Load(); n != 1 {
		t.Fatalf("the tool ran %d times; want once", n)
	}
}

// TestALoneInstanceSaysWhatItHeld: a lone instance (as with SQLite) loses the database for
// longer than twice its lease while a tool finishes; when the database is back it recovers the
// run itself, before its own retry of the late result came round. Its reason still says what
// the tool answered: recovery records the result the instance holds before it says anything.
//
// Not parallel: what it checks turns on leases of a few seconds, renewed (or not) in time;
// the load of other tests must not decide it.
func TestALoneInstanceSaysWhatItHeld(t *testing.T) {
	_, proxied, proxy := cutOffPair(t)
	tl := newTimeline()
	var c counted
	release := make(chan struct{})
	a := setupWith(t, proxied, runs.Config{LeaseTTL: 2 * time.Second, InstanceID: "a", RecoveryInterval: 50 * time.Millisecond,
		Logger: slog.New(timelineLog{name: "a", tl: tl})}, setupOpts{agents: []*agent.Agent{blockingAgent("a", tl, &c, release)}})
	t.Cleanup(proxy.Restore)

	r := a.start(t, runs.StartParams{AgentID: "fence-agent", Prompt: "refund order 1"})
	tl.wait(t, "a: tool started", 10*time.Second)
	proxy.Cut(true)
	close(release)
	tl.wait(t, "a: run: recording a late result failed; trying again", 20*time.Second)
	time.Sleep(3 * time.Second) // the outage goes on: the next try to record it is seconds away
	proxy.Restore()

	evs := a.until(t, r.ID, 0, runtype.StatusSuspended)
	interrupted := ofType(evs, runtype.EventToolCallInterrupted)
	if len(interrupted) != 1 || !strings.Contains(interrupted[0].Reason, "it recorded the answer later (") ||
		!strings.Contains(interrupted[0].Reason, "as the late result of tc_1 shown with this call: the tool finished") {
		t.Fatalf("interrupted %+v; want a reason that says the answer was recorded", interrupted)
	}
	if n := c.executed.Load(); n != 1 {
		t.Fatalf("the tool ran %d times; want once", n)
	}
}
