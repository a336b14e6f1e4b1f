package storetest

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"interlock/runs"
	"interlock/runtype"
)

// expiring is an approval that expires at when.
func expiring(callID string, when time.Time) runtype.ToolCall {
	c := approval(callID)
	c.ExpiresAt = &when
	return c
}

// suspendedUntil inserts a run and suspends it, at its creation time, on an approval that
// expires at deadline.
func (f *fixture) suspendedUntil(deadline time.Time) *runs.Record {
	f.t.Helper()
	r := f.insert(runOpts{})
	return f.suspend(r, expiring("call-1", deadline), f.get(r.ID).CreatedAt, "instance-1")
}

// due returns what DueExpiries lists at now, as "run/call".
func (f *fixture) due(now time.Time, limit int) []string {
	f.t.Helper()
	list, err := f.s.DueExpiries(f.ctx, now, limit)
	if err != nil {
		f.t.Fatalf("DueExpiries: %v", err)
	}
	out := make([]string, len(list))
	for i, d := range list {
		out[i] = d.RunID + "/" + d.ToolCallID
	}
	return out
}

func testExpiresAt(t *testing.T, open Opener) {
	each(t, open, "IsStoredWithThePendingCall", func(t *testing.T, f *fixture) {
		run := f.suspendedUntil(at(100))
		if len(run.ToolCalls) != 1 || run.ToolCalls[0].ExpiresAt == nil {
			t.Fatalf("pending calls = %s, want one with expiresAt", body(run.ToolCalls))
		}
		wantTime(t, "expiresAt", *run.ToolCalls[0].ExpiresAt, at(100))
		list, err := f.s.ListSuspended(f.ctx, runs.ListSuspendedParams{}, 10, 0)
		if err != nil || len(list) != 1 || len(list[0].ToolCalls) != 1 || list[0].ToolCalls[0].ExpiresAt == nil {
			t.Fatalf("ListSuspended = %s, %v; want the call with its expiresAt", body(list), err)
		}
		wantTime(t, "listed expiresAt", *list[0].ToolCalls[0].ExpiresAt, at(100))
		plain := f.suspended(runOpts{})
		if got := plain.ToolCalls[0].ExpiresAt; got != nil {
			t.Errorf("a call without a deadline has expiresAt %v", got)
		}
	})

	each(t, open, "IsStoredOnTheSupervisorsDelegateCall", func(t *testing.T, f *fixture) {
		parent, child := f.delegated()
		call := expiring("inner-1", at(100))
		s := suspension(child, call, at(30), "instance-1")
		s.Ancestors = []runs.AncestorWrite{surfaced(parent, call)}
		if err := f.s.Suspend(f.ctx, s); err != nil {
			t.Fatal(err)
		}
		p := f.get(parent.ID)
		if len(p.ToolCalls) != 1 || p.ToolCalls[0].ExpiresAt == nil {
			t.Fatalf("supervisor's calls = %s, want the delegate call with expiresAt", body(p.ToolCalls))
		}
		wantTime(t, "supervisor's expiresAt", *p.ToolCalls[0].ExpiresAt, at(100))
		wantIDs(t, "due", f.due(at(100), 10), child.ID+"/inner-1", parent.ID+"/delegate-1")
	})
}

func testDueExpiries(t *testing.T, open Opener) {
	each(t, open, "ListsPendingCallsPastTheirDeadlineEarliestFirst", func(t *testing.T, f *fixture) {
		late := f.suspendedUntil(at(100))
		early := f.suspendedUntil(at(50))
		f.suspended(runOpts{})             // no deadline
		f.suspendedUntil(at(200))          // not due yet
		exact := f.suspendedUntil(at(150)) // due at exactly now
		decided := f.suspendedUntil(at(60))
		f.decide(decided, decision(decided, runtype.DecisionApproved, "lease-d", at(59)))
		wantIDs(t, "due at 150s", f.due(at(150), 100), early.ID+"/call-1", late.ID+"/call-1", exact.ID+"/call-1")
		wantIDs(t, "due at 150s, limit 2", f.due(at(150), 2), early.ID+"/call-1", late.ID+"/call-1")
		wantIDs(t, "due at 10s", f.due(at(10), 100))
		list, err := f.s.DueExpiries(f.ctx, at(150), 1)
		if err != nil || len(list) != 1 {
			t.Fatalf("DueExpiries = %+v, %v", list, err)
		}
		wantTime(t, "due expiresAt", list[0].ExpiresAt, at(50))
	})

	each(t, open, "LeavesOutExpiredAndRunningRuns", func(t *testing.T, f *fixture) {
		r := f.suspendedUntil(at(50))
		f.decide(r, decision(r, runtype.DecisionExpired, "lease-x", at(51)))
		wantIDs(t, "due after the expiry", f.due(at(500), 100))
	})
}

func testExpire(t *testing.T, open Opener) {
	each(t, open, "IsADecisionByNobody", func(t *testing.T, f *fixture) {
		rn := f.suspendedUntil(at(100))
		d := decision(rn, runtype.DecisionExpired, "lease-x", at(100))
		d.Reason = ptr("timed out")
		r := f.decide(rn, d)
		got := f.get(rn.ID)
		if got.Status != runtype.StatusRunning || len(got.ToolCalls) != 0 {
			t.Fatalf("expired run = %s with calls %s, want RUNNING without", got.Status, body(got.ToolCalls))
		}
		wantStr(t, "lease owner", got.LeaseOwner, ptr("lease-x"))
		if len(got.Decisions) != 1 || got.Decisions[0].Kind != runtype.DecisionExpired || got.Decisions[0].DecidedBy != nil {
			t.Fatalf("decisions = %s, want one EXPIRED by nobody", body(got.Decisions))
		}
		wantStr(t, "reason", got.Decisions[0].Reason, d.Reason)
		wantTime(t, "decided at", got.Decisions[0].DecidedAt, at(100))
		f.checkpoint(r, at(101), runtype.Event{Type: runtype.EventStepFinished})
		wantGapless(t, f.events(rn.ID), r.Seq)
	})

	each(t, open, "BeforeTheDeadlineIsStale", func(t *testing.T, f *fixture) {
		r := f.suspendedUntil(at(100))
		wantStale(t, "an expiry before the deadline", f.s.Decide(f.ctx, decision(r, runtype.DecisionExpired, "lease-x", at(99))))
		wantUnchanged(t, "an early expiry", f.get(r.ID), r)
		plain := f.suspended(runOpts{})
		wantStale(t, "an expiry of a call without a deadline", f.s.Decide(f.ctx, decision(plain, runtype.DecisionExpired, "lease-x", at(500))))
		wantUnchanged(t, "an expiry without a deadline", f.get(plain.ID), plain)
		if ch := f.changes(); len(ch) != 2 {
			t.Errorf("stale expiries recorded changes: %+v", ch)
		}
	})

	each(t, open, "APersonsDecisionAtOrAfterTheDeadlineIsStale", func(t *testing.T, f *fixture) {
		for _, kind := range []runtype.DecisionKind{runtype.DecisionApproved, runtype.DecisionDeclined} {
			run := f.suspendedUntil(at(100))
			wantStale(t, string(kind)+" at the deadline", f.s.Decide(f.ctx, decision(run, kind, "lease-2", at(100))))
			wantStale(t, string(kind)+" after the deadline", f.s.Decide(f.ctx, decision(run, kind, "lease-2", at(130))))
			wantUnchanged(t, "a late "+string(kind), f.get(run.ID), run)
			f.decide(run, decision(run, kind, "lease-2", at(100).Add(-time.Millisecond)))
		}
	})

	each(t, open, "OfConcurrentExpiriesAndDecisionsExactlyOneWins", func(t *testing.T, f *fixture) {
		r := f.suspendedUntil(at(100))
		const writers = 8
		errs := make([]error, writers)
		writes := make([]runs.DecisionWrite, writers)
		var wg sync.WaitGroup
		for i := range writers {
			if i%2 == 0 {
				writes[i] = decision(r, runtype.DecisionExpired, fmt.Sprintf("lease-%d", i), at(101))
			} else {
				writes[i] = decision(r, runtype.DecisionApproved, fmt.Sprintf("lease-%d", i), at(99))
			}
			writes[i].InstanceID = fmt.Sprintf("instance-%d", i)
			wg.Go(func() { errs[i] = f.s.Decide(f.ctx, writes[i]) })
		}
		wg.Wait()
		winner := oneWinner(t, "writer", errs)
		got := f.get(r.ID)
		if len(got.Decisions) != 1 || got.Decisions[0].Kind != writes[winner].Kind {
			t.Errorf("decisions = %s, want only the winner's %s", body(got.Decisions), writes[winner].Kind)
		}
		wantEvents(t, "events", f.eventsAfter(r.ID, r.LastSeq), stored(r.ID, r.LastSeq, writes[winner].At, writes[winner].Events...))
		wantIDs(t, "due", f.due(at(500), 10))
	})

	each(t, open, "ExpiresTheSupervisorsDelegateCallWithIt", func(t *testing.T, f *fixture) {
		parent, child := f.delegated()
		call := expiring("inner-1", at(100))
		s := suspension(child, call, at(30), "instance-1")
		s.Ancestors = []runs.AncestorWrite{surfaced(parent, call)}
		if err := f.s.Suspend(f.ctx, s); err != nil {
			t.Fatal(err)
		}
		p, c := f.get(parent.ID), f.get(child.ID)
		d := decision(c, runtype.DecisionExpired, "new-lease", at(100))
		pc := p.ToolCalls[0]
		d.Ancestors = []runs.AncestorWrite{{RunID: p.ID, Version: p.Version, After: p.LastSeq, ToolCallID: pc.ToolCallID, Call: pc,
			Events: []runtype.Event{{Type: runtype.EventToolCallExpired, ToolCall: &pc}, {Type: runtype.EventRunResumed, Status: string(runtype.StatusRunning)}}}}
		if err := f.s.Decide(f.ctx, d); err != nil {
			t.Fatal(err)
		}
		p2 := f.get(parent.ID)
		if p2.Status != runtype.StatusWaiting || len(p2.Decisions) != 1 || p2.Decisions[0].Kind != runtype.DecisionExpired || p2.Decisions[0].ToolCallID != "delegate-1" {
			t.Fatalf("supervisor after the expiry = %s, decisions %s", p2.Status, body(p2.Decisions))
		}
		wantIDs(t, "due", f.due(at(500), 10))
	})
}
