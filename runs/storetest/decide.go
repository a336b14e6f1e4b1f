package storetest

import (
	"encoding/json"
	"fmt"
	"sync"
	"testing"

	"interlock/runs"
	"interlock/runtype"
)

func testDecide(t *testing.T, open Opener) {
	each(t, open, "MovesTheRunToRunningUnderTheNewLease", func(t *testing.T, f *fixture) {
		rn := f.suspended(runOpts{})
		d := decision(rn, runtype.DecisionApproved, "lease-2", at(20))
		r := f.decide(rn, d)
		got := f.get(rn.ID)
		if got.Status != runtype.StatusRunning {
			t.Fatalf("status = %s, want RUNNING", got.Status)
		}
		wantStr(t, "lease owner", got.LeaseOwner, ptr("lease-2"))
		wantStr(t, "snapshot", got.Snapshot, &d.Snapshot)
		wantTime(t, "updatedAt", got.UpdatedAt, at(20))
		if got.SuspendedAt != nil || len(got.ToolCalls) != 0 {
			t.Errorf("decided run: suspendedAt %v, pending calls %+v; want none", got.SuspendedAt, got.ToolCalls)
		}
		if got.Version <= rn.Version || got.LastSeq != rn.LastSeq+2 {
			t.Errorf("version %d → %d, last seq %d → %d; want a new version and 2 more events", rn.Version, got.Version, rn.LastSeq, got.LastSeq)
		}
		wantEvents(t, "decision events", f.eventsAfter(rn.ID, rn.LastSeq), stored(rn.ID, rn.LastSeq, at(20), d.Events...))
		// The new lease holds the run, for its TTL.
		if f.expired(rn.ID) {
			t.Error("a decided run leased for an hour is listed as expired")
		}
		f.checkpoint(r, at(21), runtype.Event{Type: runtype.EventToolResult, Result: json.RawMessage(`{"ok":true}`)})
		wantGapless(t, f.events(rn.ID), r.Seq)
	})

	each(t, open, "RecordsTheDecision", func(t *testing.T, f *fixture) {
		for i, c := range []struct {
			kind   runtype.DecisionKind
			by     *string
			reason *string
			resume json.RawMessage
			call   runtype.ToolCall
		}{
			{runtype.DecisionApproved, ptr("alice"), nil, nil, approval("call-1")},
			{runtype.DecisionDeclined, ptr("bob"), ptr("needs a receipt"), nil, approval("call-1")},
			{runtype.DecisionDeclined, nil, nil, nil, approval("call-1")},
			{runtype.DecisionResumed, ptr("carol"), nil, json.RawMessage(`{"answer":"M"}`),
				runtype.ToolCall{ToolCallID: "ask-1", ToolName: "ask_customer", Args: json.RawMessage(`{"q":"size"}`), SuspendPayload: json.RawMessage(`{}`)}},
		} {
			r := f.insert(runOpts{})
			run := f.suspend(r, c.call, at(10+i), "instance-1")
			d := decision(run, c.kind, "lease-d", at(30+i))
			d.DecidedBy, d.Reason, d.ResumeData = c.by, c.reason, c.resume
			f.decide(run, d)
			got := f.get(run.ID)
			if len(got.Decisions) != 1 {
				t.Fatalf("%s: decisions = %+v, want one", c.kind, got.Decisions)
			}
			dec := got.Decisions[0]
			if dec.RunID != run.ID || dec.ToolCallID != c.call.ToolCallID || dec.ToolName != c.call.ToolName || dec.Kind != c.kind {
				t.Errorf("%s: decision = %+v", c.kind, dec)
			}
			wantStr(t, string(c.kind)+" decided by", dec.DecidedBy, c.by)
			wantStr(t, string(c.kind)+" reason", dec.Reason, c.reason)
			wantTime(t, string(c.kind)+" decided at", dec.DecidedAt, at(30+i))
			if !sameJSON(dec.ResumeData, c.resume) || !sameJSON(dec.Args, c.call.Args) {
				t.Errorf("%s: resume data %s, args %s; want %s, %s", c.kind, dec.ResumeData, dec.Args, c.resume, c.call.Args)
			}
		}
	})

	each(t, open, "DecisionIDsAreUniqueAcrossRuns", func(t *testing.T, f *fixture) {
		seen := map[int64]string{}
		for range 3 {
			rn := f.suspended(runOpts{})
			r := f.decide(rn, decision(rn, runtype.DecisionApproved, "lease-2", at(20)))
			rn = f.suspend(r, approval("call-2"), at(21), "instance-1")
			f.decide(rn, decision(rn, runtype.DecisionDeclined, "lease-3", at(22)))
			for _, d := range f.get(rn.ID).Decisions {
				if other, dup := seen[d.ID]; dup {
					t.Errorf("decision id %d of %s/%s is also %s's", d.ID, rn.ID, d.ToolCallID, other)
				}
				seen[d.ID] = rn.ID + "/" + d.ToolCallID
			}
		}
		if len(seen) != 6 {
			t.Errorf("%d distinct decision ids, want 6", len(seen))
		}
	})

	each(t, open, "RecordsALeftChange", func(t *testing.T, f *fixture) {
		r := f.suspended(runOpts{})
		d := decision(r, runtype.DecisionApproved, "lease-2", at(20))
		d.InstanceID = "instance-2"
		f.decide(r, d)
		got := f.changes()
		if len(got) != 2 || got[1].RunID != r.ID || got[1].Kind != runs.ChangeLeft {
			t.Fatalf("changes = %+v, want SUSPENDED then LEFT", got)
		}
		wantTime(t, "change time", got[1].At, at(20))
		others, err := f.s.Changes(f.ctx, at(0), "instance-2")
		if err != nil || len(others) != 1 || others[0].Kind != runs.ChangeSuspended {
			t.Errorf("Changes not by the deciding instance = %+v, %v; want the suspension only", others, err)
		}
	})

	each(t, open, "SecondDecisionOfTheSameReadIsStale", func(t *testing.T, f *fixture) {
		r := f.suspended(runOpts{})
		f.decide(r, decision(r, runtype.DecisionApproved, "lease-2", at(20)))
		after := f.get(r.ID)
		wantStale(t, "a second Decide", f.s.Decide(f.ctx, decision(r, runtype.DecisionDeclined, "lease-3", at(21))))
		wantUnchanged(t, "a stale Decide", f.get(r.ID), after)
		wantGapless(t, f.events(r.ID), after.LastSeq)
	})

	each(t, open, "StaleVersionOrLastSeqWritesNothing", func(t *testing.T, f *fixture) {
		r := f.suspended(runOpts{})
		for name, mutate := range map[string]func(*runs.DecisionWrite){
			"an older version": func(d *runs.DecisionWrite) { d.Version-- },
			"a newer version":  func(d *runs.DecisionWrite) { d.Version++ },
			"an older seq":     func(d *runs.DecisionWrite) { d.After-- },
		} {
			d := decision(r, runtype.DecisionApproved, "lease-2", at(20))
			mutate(&d)
			wantStale(t, "Decide with "+name, f.s.Decide(f.ctx, d))
			wantUnchanged(t, "Decide with "+name, f.get(r.ID), r)
		}
		wantGapless(t, f.events(r.ID), r.LastSeq)
		if ch := f.changes(); len(ch) != 1 {
			t.Errorf("stale decisions recorded changes: %+v", ch)
		}
	})

	each(t, open, "CallNotPendingIsStaleAndWritesNothing", func(t *testing.T, f *fixture) {
		rn := f.suspended(runOpts{})
		d := decision(rn, runtype.DecisionApproved, "lease-2", at(20))
		d.ToolCallID = "no-such-call"
		wantStale(t, "Decide on a call the run does not wait on", f.s.Decide(f.ctx, d))
		wantUnchanged(t, "Decide on an unknown call", f.get(rn.ID), rn)
		// A call decided before, while the run now waits on another, moved too.
		r := f.decide(rn, decision(rn, runtype.DecisionApproved, "lease-2", at(21)))
		rn = f.suspend(r, approval("call-2"), at(22), "instance-1")
		d = decision(rn, runtype.DecisionApproved, "lease-3", at(23))
		d.ToolCallID = "call-1"
		wantStale(t, "Decide on a call decided before", f.s.Decide(f.ctx, d))
		wantUnchanged(t, "Decide on a decided call", f.get(rn.ID), rn)
		if ch := f.changes(); len(ch) != 3 {
			t.Errorf("changes = %+v, want SUSPENDED, LEFT, SUSPENDED", ch)
		}
	})

	each(t, open, "RunNotSuspendedIsStale", func(t *testing.T, f *fixture) {
		r := f.insert(runOpts{})
		running := f.get(r.ID)
		running.ToolCalls = []runtype.ToolCall{approval("call-1")}
		wantStale(t, "Decide on a running run", f.s.Decide(f.ctx, decision(running, runtype.DecisionApproved, "lease-2", at(20))))
		running.ToolCalls = nil
		wantUnchanged(t, "Decide on a running run", f.get(r.ID), running)
	})

	each(t, open, "OfConcurrentDecisionsExactlyOneWins", func(t *testing.T, f *fixture) {
		r := f.suspended(runOpts{})
		const deciders = 8
		kinds := []runtype.DecisionKind{runtype.DecisionApproved, runtype.DecisionDeclined}
		errs := make([]error, deciders)
		writes := make([]runs.DecisionWrite, deciders)
		var wg sync.WaitGroup
		for i := range deciders {
			writes[i] = decision(r, kinds[i%2], fmt.Sprintf("lease-%d", i), at(20+i))
			writes[i].InstanceID = fmt.Sprintf("instance-%d", i)
			wg.Go(func() { errs[i] = f.s.Decide(f.ctx, writes[i]) })
		}
		wg.Wait()
		winner := oneWinner(t, "decider", errs)
		w := writes[winner]
		got := f.get(r.ID)
		wantStr(t, "lease owner", got.LeaseOwner, &w.Lease)
		if len(got.Decisions) != 1 || got.Decisions[0].Kind != w.Kind {
			t.Errorf("decisions = %+v, want only the winner's %s", got.Decisions, w.Kind)
		}
		wantTime(t, "decided at", got.Decisions[0].DecidedAt, w.At)
		wantEvents(t, "events", f.eventsAfter(r.ID, r.LastSeq), stored(r.ID, r.LastSeq, w.At, w.Events...))
		if ch := f.changes(); len(ch) != 2 {
			t.Errorf("changes = %+v, want one SUSPENDED and one LEFT", ch)
		}
	})
}
