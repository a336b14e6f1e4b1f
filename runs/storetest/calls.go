package storetest

import (
	"errors"
	"testing"

	"interlock/runs"
	"interlock/runtype"
)

// suspendOnTwo stores a new run as suspended on two approvals at once, call-1 and call-2, as a
// run whose step asked for two calls that need approval.
func (f *fixture) suspendOnTwo() *runs.Record {
	f.t.Helper()
	r := f.insert(runOpts{})
	first, second := approval("call-1"), approval("call-2")
	second.ToolName = "delete_account"
	s := suspension(r, first, at(10), "instance-1")
	s.Calls = append(s.Calls, second)
	s.Events = []runtype.Event{
		{Type: runtype.EventToolCallApproval, ToolCall: &first},
		{Type: runtype.EventToolCallApproval, ToolCall: &second},
		{Type: runtype.EventRunSuspended, Status: string(runtype.StatusSuspended)},
	}
	if err := f.s.Suspend(f.ctx, s); err != nil {
		f.t.Fatalf("Suspend %s on two calls: %v", r.ID, err)
	}
	return f.get(r.ID)
}

// holding is the Decide of run's first pending call that keeps the run SUSPENDED on the others.
func holding(r *runs.Record, kind runtype.DecisionKind, when int) runs.DecisionWrite {
	d := decision(r, kind, "", at(when))
	d.Lease, d.TTL, d.Hold = "", 0, true
	d.Events = d.Events[:len(d.Events)-1] // no RUN_RESUMED: the run does not resume yet
	return d
}

func testSeveralCalls(t *testing.T, open Opener) {
	each(t, open, "SuspendWaitsOnEveryCallInOrder", func(t *testing.T, f *fixture) {
		r := f.suspendOnTwo()
		if r.Status != runtype.StatusSuspended || len(r.ToolCalls) != 2 {
			t.Fatalf("status %s, pending %+v; want SUSPENDED on two calls", r.Status, r.ToolCalls)
		}
		wantCall(t, "first pending call", r.ToolCalls[0], approval("call-1"))
		if r.ToolCalls[1].ToolCallID != "call-2" || r.ToolCalls[1].ToolName != "delete_account" {
			t.Errorf("second pending call = %+v", r.ToolCalls[1])
		}
		n, err := f.s.CountSuspended(f.ctx, runs.ListSuspendedParams{})
		if err != nil || n != 1 {
			t.Errorf("CountSuspended = %d, %v; a run waiting on two calls counts once", n, err)
		}
		list, err := f.s.ListSuspended(f.ctx, runs.ListSuspendedParams{}, 10, 0)
		if err != nil || len(list) != 1 || len(list[0].ToolCalls) != 2 {
			t.Fatalf("ListSuspended = %+v, %v; want the run with both calls", list, err)
		}
	})

	each(t, open, "SuspendWithoutACallIsRefused", func(t *testing.T, f *fixture) {
		r := f.insert(runOpts{})
		s := suspension(r, approval("call-1"), at(10), "instance-1")
		s.Calls = nil
		if err := f.s.Suspend(f.ctx, s); err == nil {
			t.Fatal("Suspend without a call succeeded")
		}
		if got := f.get(r.ID); got.Status != runtype.StatusRunning || got.LastSeq != r.Seq {
			t.Errorf("after a refused Suspend: status %s, last seq %d; want RUNNING at %d", got.Status, got.LastSeq, r.Seq)
		}
	})

	each(t, open, "HoldKeepsTheRunSuspendedOnTheOthers", func(t *testing.T, f *fixture) {
		rn := f.suspendOnTwo()
		before := len(f.changes())
		d := holding(rn, runtype.DecisionDeclined, 20)
		d.DecidedBy = ptr("alice")
		if err := f.s.Decide(f.ctx, d); err != nil {
			t.Fatal(err)
		}
		got := f.get(rn.ID)
		if got.Status != runtype.StatusSuspended || got.LeaseOwner != nil {
			t.Fatalf("status %s, lease %v; want SUSPENDED without a lease", got.Status, show(got.LeaseOwner))
		}
		if got.SuspendedAt == nil {
			t.Fatal("suspendedAt cleared by a decision that keeps the run waiting")
		}
		wantTime(t, "suspendedAt", *got.SuspendedAt, *rn.SuspendedAt)
		wantTime(t, "updatedAt", got.UpdatedAt, at(20))
		wantStr(t, "snapshot", got.Snapshot, &d.Snapshot)
		if got.Version <= rn.Version || got.LastSeq != rn.LastSeq+1 {
			t.Errorf("version %d → %d, last seq %d → %d; want a new version and one more event", rn.Version, got.Version, rn.LastSeq, got.LastSeq)
		}
		if len(got.ToolCalls) != 1 || got.ToolCalls[0].ToolCallID != "call-2" {
			t.Fatalf("pending calls = %+v, want call-2 alone", got.ToolCalls)
		}
		if len(got.Decisions) != 1 || got.Decisions[0].ToolCallID != "call-1" || got.Decisions[0].Kind != runtype.DecisionDeclined {
			t.Fatalf("decisions = %+v, want call-1 declined", got.Decisions)
		}
		wantStr(t, "decided by", got.Decisions[0].DecidedBy, ptr("alice"))
		wantEvents(t, "decision events", f.eventsAfter(rn.ID, rn.LastSeq), stored(rn.ID, rn.LastSeq, at(20), d.Events...))
		if f.expired(rn.ID) {
			t.Error("a held run, which has no lease, is listed as expired")
		}
		changes := f.changes()
		if len(changes) != before+1 || changes[len(changes)-1].Kind != runs.ChangeChanged {
			t.Errorf("changes after a held decision: %+v; want one CHANGED more (the run is still in the set, changed)", changes[before:])
		}
		for _, p := range []runs.ListSuspendedParams{{}, {AgentID: ptr(rn.AgentID)}, {ThreadID: ptr("none")}} {
			n, err := f.s.CountSuspended(f.ctx, p)
			want := int64(1)
			if p.ThreadID != nil {
				want = 0
			}
			if err != nil || n != want {
				t.Errorf("CountSuspended(%+v) = %d, %v; want %d: a held decision leaves the run counted once", p, n, err, want)
			}
		}

		// The decision as read before is stale now, for either call.
		if err := f.s.Decide(f.ctx, holding(rn, runtype.DecisionApproved, 21)); !errors.Is(err, runs.ErrStale) {
			t.Errorf("a decision at the old version: %v, want ErrStale", err)
		}
		// The last call's decision resumes the run under the new lease.
		last := decision(got, runtype.DecisionApproved, "lease-3", at(22))
		r := f.decide(got, last)
		final := f.get(rn.ID)
		if final.Status != runtype.StatusRunning || final.SuspendedAt != nil || len(final.ToolCalls) != 0 || len(final.Decisions) != 2 {
			t.Fatalf("after the last decision: status %s, suspendedAt %v, pending %+v, decisions %d", final.Status, final.SuspendedAt, final.ToolCalls, len(final.Decisions))
		}
		wantStr(t, "lease owner", final.LeaseOwner, ptr("lease-3"))
		f.checkpoint(r, at(23), runtype.Event{Type: runtype.EventStepFinished})
		wantGapless(t, f.events(rn.ID), r.Seq)
	})
}
