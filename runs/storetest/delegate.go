package storetest

import (
	"testing"

	"interlock/runs"
	"interlock/runtype"
)

// delegation is the Delegate by the holder of parent that starts child number n of agent
// "helper", leased to "child-lease".
func delegation(f *fixture, parent *live, n int) runs.Delegation {
	snap := `{"delegated":true}`
	ck := cp(parent, at(20))
	ck.Snapshot = &snap
	lease := "child-lease"
	f.n = max(f.n, n)
	child := runtype.Run{
		ID: id(n), AgentID: "helper", ParentRunID: &parent.ID, Prompt: "the task", Status: runtype.StatusRunning,
		CreatedAt: at(20), UpdatedAt: at(20), LastSeq: 1,
	}
	return runs.Delegation{Checkpoint: ck, Child: runs.NewRun{
		Run: child, Snapshot: `{"child":true}`, Lease: lease, TTL: hour,
		Events: []runtype.Event{{Type: runtype.EventRunStarted, Status: string(runtype.StatusRunning)}},
	}}
}

// delegated inserts a parent of agent "boss" and has it delegate to a child: the parent as
// stored (WAITING) and the child as its holder knows it.
func (f *fixture) delegated() (*runs.Record, *live) {
	f.t.Helper()
	parent := f.insert(runOpts{AgentID: "boss"})
	f.n++
	d := delegation(f, parent, f.n)
	if err := f.s.Delegate(f.ctx, d); err != nil {
		f.t.Fatalf("Delegate %s: %v", parent.ID, err)
	}
	return f.get(parent.ID), &live{ID: d.Child.Run.ID, Lease: d.Child.Lease, Seq: 1}
}

// surfaced is the ancestor write that shows c on parent's delegate call "delegate-1".
func surfaced(parent *runs.Record, c runtype.ToolCall) runs.AncestorWrite {
	c.ToolCallID = "delegate-1"
	return runs.AncestorWrite{RunID: parent.ID, Version: parent.Version, After: parent.LastSeq, ToolCallID: c.ToolCallID, Call: c, Events: suspendEvents(c)}
}

func testDelegate(t *testing.T, open Opener) {
	each(t, open, "ParentWaitsAndTheChildRuns", func(t *testing.T, f *fixture) {
		parent := f.insert(runOpts{AgentID: "boss"})
		before := f.get(parent.ID)
		d := delegation(f, parent, 50)
		if err := f.s.Delegate(f.ctx, d); err != nil {
			t.Fatal(err)
		}
		got := f.get(parent.ID)
		if got.Status != runtype.StatusWaiting || got.LeaseOwner != nil || got.Version <= before.Version || got.SuspendedAt != nil {
			t.Fatalf("parent = %s lease %v version %d→%d suspendedAt %v; want WAITING, unleased, version moved", got.Status, got.LeaseOwner, before.Version, got.Version, got.SuspendedAt)
		}
		wantStr(t, "parent snapshot", got.Snapshot, d.Snapshot)
		child := f.get(id(50))
		if child.Status != runtype.StatusRunning || child.ParentRunID == nil || *child.ParentRunID != parent.ID || child.AgentID != "helper" || child.LastSeq != 1 {
			t.Fatalf("child = %+v", child)
		}
		wantStr(t, "child lease", child.LeaseOwner, ptr("child-lease"))
		if ids := f.expiredIDs(); len(ids) != 0 {
			t.Fatalf("expired runs = %v: a WAITING run is not recovered, and the child is leased", ids)
		}
		if n, err := f.s.CountSuspended(f.ctx, runs.ListSuspendedParams{}); err != nil || n != 0 {
			t.Fatalf("CountSuspended = %d, %v; a WAITING run is not suspended", n, err)
		}
	})

	each(t, open, "NeedsTheLease", func(t *testing.T, f *fixture) {
		parent := f.insert(runOpts{AgentID: "boss"})
		before := f.get(parent.ID)
		d := delegation(f, parent, 50)
		d.Lease = "someone-else"
		wantLeaseLost(t, "Delegate with another lease", f.s.Delegate(f.ctx, d))
		wantUnchanged(t, "parent", f.get(parent.ID), before)
		if r, err := f.s.GetRun(f.ctx, id(50)); err != nil || r != nil {
			t.Fatalf("child = %v, %v; want none", r, err)
		}
	})

	each(t, open, "SuspensionSurfacesOnTheParentAndTheDecisionTakesItBack", func(t *testing.T, f *fixture) {
		parent, child := f.delegated()
		call := approval("inner-1")
		s := suspension(child, call, at(30), "instance-1")
		s.Ancestors = []runs.AncestorWrite{surfaced(parent, call)}
		if err := f.s.Suspend(f.ctx, s); err != nil {
			t.Fatal(err)
		}
		child.Seq += int64(len(s.Events))
		p := f.get(parent.ID)
		if p.Status != runtype.StatusSuspended || p.SuspendedAt == nil || p.Version <= parent.Version || p.LastSeq != parent.LastSeq+2 {
			t.Fatalf("parent = %s suspendedAt %v version %d last seq %d", p.Status, p.SuspendedAt, p.Version, p.LastSeq)
		}
		wantTime(t, "parent suspendedAt", *p.SuspendedAt, at(30))
		if len(p.ToolCalls) != 1 {
			t.Fatalf("parent calls = %+v", p.ToolCalls)
		}
		wantCall(t, "parent's call", p.ToolCalls[0], s.Ancestors[0].Call)
		wantEvents(t, "parent events", f.eventsAfter(parent.ID, parent.LastSeq), stored(parent.ID, parent.LastSeq, at(30), s.Ancestors[0].Events...))
		top, err := f.s.ListSuspended(f.ctx, runs.ListSuspendedParams{}, 10, 0)
		if err != nil {
			t.Fatal(err)
		}
		wantIDs(t, "top-level suspended", runIDs(top), parent.ID)
		inner, err := f.s.ListSuspended(f.ctx, runs.ListSuspendedParams{AgentID: ptr("helper")}, 10, 0)
		if err != nil {
			t.Fatal(err)
		}
		wantIDs(t, "helper's suspended", runIDs(inner), child.ID)
		kinds := map[string]runs.ChangeKind{}
		for _, c := range f.changes() {
			kinds[c.RunID] = c.Kind
		}
		if kinds[parent.ID] != runs.ChangeSuspended || kinds[child.ID] != runs.ChangeSuspended {
			t.Fatalf("changes = %v, want both suspended", kinds)
		}

		c := f.get(child.ID)
		d := decision(c, runtype.DecisionDeclined, "new-lease", at(40))
		d.Reason = ptr("needs a receipt")
		pc := p.ToolCalls[0]
		d.Ancestors = []runs.AncestorWrite{{RunID: p.ID, Version: p.Version, After: p.LastSeq, ToolCallID: pc.ToolCallID, Call: pc,
			Events: []runtype.Event{{Type: runtype.EventToolCallDeclined, ToolCall: &pc}, {Type: runtype.EventRunResumed, Status: string(runtype.StatusRunning)}}}}
		if err := f.s.Decide(f.ctx, d); err != nil {
			t.Fatal(err)
		}
		p2 := f.get(parent.ID)
		if p2.Status != runtype.StatusWaiting || p2.SuspendedAt != nil || len(p2.ToolCalls) != 0 || p2.LastSeq != p.LastSeq+2 || p2.Version <= p.Version {
			t.Fatalf("parent after the decision = %s suspendedAt %v calls %v last seq %d", p2.Status, p2.SuspendedAt, p2.ToolCalls, p2.LastSeq)
		}
		if len(p2.Decisions) != 1 || p2.Decisions[0].Kind != runtype.DecisionDeclined || p2.Decisions[0].ToolCallID != "delegate-1" || p2.Decisions[0].ToolName != call.ToolName {
			t.Fatalf("parent decisions = %+v", p2.Decisions)
		}
		wantStr(t, "parent decision reason", p2.Decisions[0].Reason, d.Reason)
		if c2 := f.get(child.ID); c2.Status != runtype.StatusRunning || len(c2.Decisions) != 1 {
			t.Fatalf("child after the decision = %s decisions %+v", c2.Status, c2.Decisions)
		}
		if n, err := f.s.CountSuspended(f.ctx, runs.ListSuspendedParams{}); err != nil || n != 0 {
			t.Fatalf("CountSuspended = %d, %v; want 0", n, err)
		}
	})

	each(t, open, "AStaleParentUndoesTheSuspension", func(t *testing.T, f *fixture) {
		parent, child := f.delegated()
		beforeChild := f.get(child.ID)
		call := approval("inner-1")
		s := suspension(child, call, at(30), "instance-1")
		a := surfaced(parent, call)
		a.Version++
		s.Ancestors = []runs.AncestorWrite{a}
		wantStale(t, "Suspend with a stale parent", f.s.Suspend(f.ctx, s))
		wantUnchanged(t, "child", f.get(child.ID), beforeChild)
		wantUnchanged(t, "parent", f.get(parent.ID), parent)
	})

	each(t, open, "AStaleParentUndoesTheDecision", func(t *testing.T, f *fixture) {
		parent, child := f.delegated()
		call := approval("inner-1")
		s := suspension(child, call, at(30), "instance-1")
		s.Ancestors = []runs.AncestorWrite{surfaced(parent, call)}
		if err := f.s.Suspend(f.ctx, s); err != nil {
			t.Fatal(err)
		}
		c, p := f.get(child.ID), f.get(parent.ID)
		d := decision(c, runtype.DecisionApproved, "new-lease", at(40))
		pc := p.ToolCalls[0]
		d.Ancestors = []runs.AncestorWrite{{RunID: p.ID, Version: p.Version - 1, After: p.LastSeq, ToolCallID: pc.ToolCallID, Call: pc}}
		wantStale(t, "Decide with a stale parent", f.s.Decide(f.ctx, d))
		wantUnchanged(t, "child", f.get(child.ID), c)
		wantUnchanged(t, "parent", f.get(parent.ID), p)
	})

	each(t, open, "FinishContinuesTheParent", func(t *testing.T, f *fixture) {
		parent, child := f.delegated()
		fin := finishing(child, at(50))
		fin.Parent = &runs.Handoff{RunID: parent.ID, Version: parent.Version - 1, After: parent.LastSeq, Snapshot: `{"returned":true}`, Lease: "parent-lease", TTL: hour}
		wantStale(t, "Finish with a stale parent", f.s.Finish(f.ctx, fin))
		if c := f.get(child.ID); c.Status != runtype.StatusRunning {
			t.Fatalf("child = %s after a refused finish, want RUNNING", c.Status)
		}
		wantUnchanged(t, "parent", f.get(parent.ID), parent)

		fin.Parent.Version = parent.Version
		if err := f.s.Finish(f.ctx, fin); err != nil {
			t.Fatal(err)
		}
		if c := f.get(child.ID); c.Status != runtype.StatusCompleted {
			t.Fatalf("child = %s, want COMPLETED", c.Status)
		}
		p := f.get(parent.ID)
		if p.Status != runtype.StatusRunning || p.Version <= parent.Version || p.LastSeq != parent.LastSeq {
			t.Fatalf("parent = %s version %d last seq %d, want RUNNING", p.Status, p.Version, p.LastSeq)
		}
		wantStr(t, "parent lease", p.LeaseOwner, ptr("parent-lease"))
		wantStr(t, "parent snapshot", p.Snapshot, ptr(`{"returned":true}`))
		// The new holder writes as usual.
		f.checkpoint(&live{ID: parent.ID, Lease: "parent-lease", Seq: p.LastSeq}, at(51), runtype.Event{Type: runtype.EventStepFinished})
	})
}
