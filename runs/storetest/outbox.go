package storetest

import (
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"interlock/notify"
	"interlock/runtype"
)

// withOutbox runs fn as a parallel subtest on a fixture over a fresh store whose writes carry
// the outbox rows announcing their events to targets, as the run service's do (runs.Announce),
// with the store as the notify.Store that delivers them. The store writes the rows it is given
// in the transaction of the events, and none when the write fails; which events announce what
// is the service's rule, checked here through the writes it makes.
func withOutbox(t *testing.T, open Opener, name string, targets []notify.Target, fn func(t *testing.T, f *fixture, ob notify.Store)) {
	t.Helper()
	eachWith(t, open, targets, name, func(t *testing.T, f *fixture) {
		ob, ok := f.s.(notify.Store)
		if !ok {
			t.Fatalf("%T does not implement notify.Store", f.s)
		}
		fn(t, f, ob)
	})
}

func (f *fixture) deliveries(ob notify.Store, runID string) []notify.Delivery {
	f.t.Helper()
	list, err := ob.Deliveries(f.ctx, runID)
	if err != nil {
		f.t.Fatalf("Deliveries %s: %v", runID, err)
	}
	return list
}

func payload(t *testing.T, d notify.Delivery) notify.Event {
	t.Helper()
	var e notify.Event
	if err := json.Unmarshal(d.Payload, &e); err != nil {
		t.Fatalf("payload of %s: %v (%s)", d.EventID, err, d.Payload)
	}
	return e
}

// summary is a delivery in one line: target, kind, decision, state.
func summary(t *testing.T, list []notify.Delivery) []string {
	out := make([]string, len(list))
	for i, d := range list {
		e := payload(t, d)
		out[i] = fmt.Sprintf("%s %s %s%s %s", d.Target, d.Kind, e.WaitsFor, e.Decision, d.State)
	}
	return out
}

func wantSummary(t *testing.T, what string, got []string, want ...string) {
	t.Helper()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("%s = %q, want %q", what, got, want)
	}
}

var all, decidedOnly = notify.Target{Name: "all", Events: notify.Kinds}, notify.Target{Name: "decided", Events: []notify.Kind{notify.Decided}}

func testOutbox(t *testing.T, open Opener) {
	withOutbox(t, open, "WritesARowPerEventAndTargetWithTheEvents", []notify.Target{all, decidedOnly}, func(t *testing.T, f *fixture, ob notify.Store) {
		r := f.insert(runOpts{ThreadID: ptr("th-1"), ResourceID: ptr("user-1")})
		rn := f.suspend(r, approval("call-1"), at(5), "instance-1")
		got := f.deliveries(ob, rn.ID)
		wantSummary(t, "after the suspension", summary(t, got), "all approval_requested approval PENDING")
		e := payload(t, got[0])
		// The event is the TOOL_CALL_APPROVAL, the second event of the run.
		if e.ID != notify.EventID(rn.ID, 2) || got[0].EventID != e.ID || e.Type != notify.ApprovalRequested {
			t.Errorf("event id %q (row %q), type %s; want %q approval_requested", e.ID, got[0].EventID, e.Type, notify.EventID(rn.ID, 2))
		}
		if e.Run.ID != rn.ID || e.Run.AgentID != "agent" || !sameStr(e.Run.ThreadID, ptr("th-1")) || !sameStr(e.Run.ResourceID, ptr("user-1")) {
			t.Errorf("run of the event = %+v", e.Run)
		}
		if e.ToolCall == nil || e.ToolCall.ToolCallID != "call-1" || e.ToolCall.ToolName != "issue_refund" {
			t.Errorf("tool call of the event = %+v", e.ToolCall)
		}
		wantTime(t, "createdAt", e.CreatedAt, at(5))

		d := decision(rn, runtype.DecisionApproved, "lease-2", at(9))
		d.DecidedBy, d.Events[0].DecidedBy, d.Events[1].DecidedBy = ptr("alice"), "alice", "alice"
		f.decide(rn, d)
		got = f.deliveries(ob, rn.ID)
		wantSummary(t, "after the approval", summary(t, got),
			"all approval_requested approval PENDING", "all decided approved PENDING", "decided decided approved PENDING")
		if e := payload(t, got[1]); e.DecidedBy != "alice" || e.ID != notify.EventID(rn.ID, rn.LastSeq+1) || got[2].EventID != got[1].EventID {
			t.Errorf("decided event: by %q, id %q / %q; want alice, %q for both targets", e.DecidedBy, e.ID, got[2].EventID, notify.EventID(rn.ID, rn.LastSeq+1))
		}
	})

	withOutbox(t, open, "TellsEachDecision", []notify.Target{decidedOnly}, func(t *testing.T, f *fixture, ob notify.Store) {
		ask := runtype.ToolCall{ToolCallID: "ask-1", ToolName: "ask_customer", Args: json.RawMessage(`{"q":"size"}`), SuspendPayload: json.RawMessage(`{"question":"size?"}`)}
		for i, c := range []struct {
			kind   runtype.DecisionKind
			call   runtype.ToolCall
			edited bool
			want   string
		}{
			{runtype.DecisionApproved, approval("call-1"), false, notify.DecisionApproved},
			{runtype.DecisionApproved, approval("call-1"), true, notify.DecisionEditApproved},
			{runtype.DecisionDeclined, approval("call-1"), false, notify.DecisionDeclined},
			{runtype.DecisionResumed, ask, false, notify.DecisionResumed},
		} {
			r := f.insert(runOpts{})
			rn := f.suspend(r, c.call, at(10+i), "instance-1")
			d := decision(rn, c.kind, "lease-d", at(30+i))
			d.DecidedBy = ptr("carol")
			for j := range d.Events {
				d.Events[j].DecidedBy = "carol"
			}
			if c.edited {
				d.EditedArgs = json.RawMessage(`{"amount":20,"order":42}`)
			}
			if c.kind == runtype.DecisionResumed {
				d.ResumeData = json.RawMessage(`{"answer":"M"}`)
			}
			f.decide(rn, d)
			got := f.deliveries(ob, rn.ID)
			if len(got) != 1 {
				t.Errorf("%s: deliveries %q, want one decided", c.want, summary(t, got))
				continue
			}
			e := payload(t, got[0])
			if e.Type != notify.Decided || e.Decision != c.want || e.DecidedBy != "carol" || e.ToolCall == nil || e.ToolCall.ToolCallID != c.call.ToolCallID {
				t.Errorf("%s: event %s %s by %q on %+v", c.want, e.Type, e.Decision, e.DecidedBy, e.ToolCall)
			}
		}
	})

	withOutbox(t, open, "TellsExpiryAndInputRequests", []notify.Target{all}, func(t *testing.T, f *fixture, ob notify.Store) {
		r := f.insert(runOpts{})
		ask := runtype.ToolCall{ToolCallID: "ask-1", ToolName: "ask_customer", SuspendPayload: json.RawMessage(`{}`)}
		s := suspension(r, ask, at(3), "instance-1")
		s.Events[0].Type = runtype.EventToolCallSuspended
		f.announceSuspension(&s)
		if err := f.s.Suspend(f.ctx, s); err != nil {
			t.Fatal(err)
		}
		r2 := f.insert(runOpts{})
		call := approval("call-1")
		call.ExpiresAt = ptr(runtype.StoredTime(at(4)))
		rn := f.suspend(r2, call, at(3), "instance-1")
		d := decision(rn, runtype.DecisionExpired, "lease-e", at(5))
		d.Events = []runtype.Event{{Type: runtype.EventToolCallExpired, ToolCall: &rn.ToolCalls[0], Reason: "timed out"}, {Type: runtype.EventRunResumed, Status: string(runtype.StatusRunning)}}
		f.decide(rn, d)
		wantSummary(t, "input request", summary(t, f.deliveries(ob, r.ID)), "all approval_requested input PENDING")
		wantSummary(t, "expiry", summary(t, f.deliveries(ob, rn.ID)), "all approval_requested approval PENDING", "all expired  PENDING")
	})

	withOutbox(t, open, "NothingWithoutTargets", nil, func(t *testing.T, f *fixture, ob notify.Store) {
		plain := f.suspended(runOpts{})
		d := decision(plain, runtype.DecisionApproved, "lease-p", at(45))
		f.decide(plain, d)
		if got := f.deliveries(ob, plain.ID); len(got) != 0 {
			t.Errorf("writes without webhooks: deliveries %q, want none", summary(t, got))
		}
	})

	withOutbox(t, open, "NothingForSubAgentsOrOnAFailedWrite", []notify.Target{all}, func(t *testing.T, f *fixture, ob notify.Store) {
		parent := f.insert(runOpts{})
		child := f.insert(runOpts{ParentRunID: &parent.ID})
		f.suspend(child, approval("inner-1"), at(40), "instance-1")
		stale := f.suspended(runOpts{})
		d := decision(stale, runtype.DecisionApproved, "lease-x", at(50))
		d.Version++ // another instance decided first
		f.announceDecision(&stale.Run, &d)
		if len(d.Outbox) == 0 {
			t.Fatal("the decision carries no outbox rows: the test would prove nothing")
		}
		wantStale(t, "Decide of an old version", f.s.Decide(f.ctx, d))
		if got := f.deliveries(ob, child.ID); len(got) != 0 {
			t.Errorf("a sub-agent's run: deliveries %q, want none", summary(t, got))
		}
		wantSummary(t, "a decision that lost", summary(t, f.deliveries(ob, stale.ID)), "all approval_requested approval PENDING")
	})

	withOutbox(t, open, "ClaimLeasesRecordsAndRetries", []notify.Target{all}, func(t *testing.T, f *fixture, ob notify.Store) {
		var runIDs []string
		for range 3 {
			runIDs = append(runIDs, f.suspended(runOpts{}).ID)
		}
		claimed, err := ob.ClaimDeliveries(f.ctx, "one", hour, 2)
		if err != nil || len(claimed) != 2 {
			t.Fatalf("ClaimDeliveries(limit 2) = %d, %v; want 2", len(claimed), err)
		}
		if claimed[0].RunID != runIDs[0] || claimed[1].RunID != runIDs[1] {
			t.Errorf("claimed runs %s, %s; want the oldest, %s and %s", claimed[0].RunID, claimed[1].RunID, runIDs[0], runIDs[1])
		}
		rest, err := ob.ClaimDeliveries(f.ctx, "two", hour, 10)
		if err != nil || len(rest) != 1 || rest[0].RunID != runIDs[2] {
			t.Fatalf("second claimer got %d rows, %v; want only the unleased one", len(rest), err)
		}
		if ok, err := ob.CompleteDelivery(f.ctx, claimed[0].ID, "two", notify.Outcome{Delivered: true}); err != nil || ok {
			t.Errorf("CompleteDelivery by a non-holder = %v, %v; want false", ok, err)
		}
		// Delivered; failed with a retry in an hour; failed for good.
		for i, o := range []notify.Outcome{{Delivered: true}, {Error: "receiver answered HTTP 500", RetryAfter: hour}} {
			if ok, err := ob.CompleteDelivery(f.ctx, claimed[i].ID, "one", o); err != nil || !ok {
				t.Fatalf("CompleteDelivery %d = %v, %v; want true", i, ok, err)
			}
		}
		if ok, err := ob.CompleteDelivery(f.ctx, rest[0].ID, "two", notify.Outcome{Error: "gone"}); err != nil || !ok {
			t.Fatalf("CompleteDelivery given up = %v, %v", ok, err)
		}
		if ok, err := ob.CompleteDelivery(f.ctx, claimed[0].ID, "one", notify.Outcome{Delivered: true}); err != nil || ok {
			t.Errorf("second CompleteDelivery of a delivered row = %v, %v; want false", ok, err)
		}
		if again, err := ob.ClaimDeliveries(f.ctx, "three", hour, 10); err != nil || len(again) != 0 {
			t.Errorf("claim after every row was recorded = %d rows, %v; want none (one delivered, one due in an hour, one given up)", len(again), err)
		}
		states := map[string]notify.Delivery{}
		for _, id := range runIDs {
			for _, d := range f.deliveries(ob, id) {
				states[id] = d
			}
		}
		if d := states[runIDs[0]]; d.State != notify.StateDelivered || d.Attempts != 1 || d.DeliveredAt == nil || d.LastError != "" {
			t.Errorf("delivered row: %+v", d)
		}
		if d := states[runIDs[1]]; d.State != notify.StatePending || d.Attempts != 1 || d.LastError != "receiver answered HTTP 500" || !d.NextAttemptAt.After(time.Now().Add(30*time.Minute)) {
			t.Errorf("retried row: state %s, attempts %d, error %q, next %s", d.State, d.Attempts, d.LastError, d.NextAttemptAt)
		}
		if d := states[runIDs[2]]; d.State != notify.StateFailed || d.Attempts != 1 || d.LastError != "gone" {
			t.Errorf("given-up row: %+v", d)
		}
	})

	withOutbox(t, open, "AnExpiredLeaseIsTakenOver", []notify.Target{all}, func(t *testing.T, f *fixture, ob notify.Store) {
		f.suspended(runOpts{})
		first, err := ob.ClaimDeliveries(f.ctx, "dead", -time.Second, 10) // a lease already over
		if err != nil || len(first) != 1 {
			t.Fatalf("claim = %d, %v", len(first), err)
		}
		second, err := ob.ClaimDeliveries(f.ctx, "alive", hour, 10)
		if err != nil || len(second) != 1 || second[0].ID != first[0].ID {
			t.Fatalf("claim after the lease ran out = %d, %v; want the same row", len(second), err)
		}
		if ok, _ := ob.CompleteDelivery(f.ctx, first[0].ID, "dead", notify.Outcome{Delivered: true}); ok {
			t.Error("the claimer whose lease ran out recorded its outcome")
		}
		if ok, err := ob.CompleteDelivery(f.ctx, second[0].ID, "alive", notify.Outcome{Delivered: true}); err != nil || !ok {
			t.Errorf("the new holder's CompleteDelivery = %v, %v", ok, err)
		}
	})

	withOutbox(t, open, "RacingClaimersSplitTheRows", []notify.Target{all, decidedOnly}, func(t *testing.T, f *fixture, ob notify.Store) {
		for range 6 {
			r := f.suspended(runOpts{})
			f.decide(r, decision(r, runtype.DecisionDeclined, "lease-r", at(60)))
		}
		const claimers = 6
		var mu sync.Mutex
		seen := map[int64]string{}
		var wg sync.WaitGroup
		for c := range claimers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				owner := fmt.Sprintf("claimer-%d", c)
				for {
					list, err := ob.ClaimDeliveries(f.ctx, owner, hour, 3)
					if err != nil {
						t.Errorf("%s: %v", owner, err)
						return
					}
					if len(list) == 0 {
						return
					}
					mu.Lock()
					for _, d := range list {
						if prev, dup := seen[d.ID]; dup {
							t.Errorf("row %d claimed by %s and %s", d.ID, prev, owner)
						}
						seen[d.ID] = owner
					}
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		if len(seen) != 6*3 { // per run: approval_requested to all, decided to both
			t.Errorf("claimed %d rows in all, want 18", len(seen))
		}
	})

	withOutbox(t, open, "PurgeDeliveriesKeepsPendingAndRecent", []notify.Target{all}, func(t *testing.T, f *fixture, ob notify.Store) {
		a, b := f.suspended(runOpts{}), f.suspended(runOpts{})
		list, err := ob.ClaimDeliveries(f.ctx, "one", hour, 10)
		if err != nil || len(list) != 2 {
			t.Fatalf("claim = %d, %v", len(list), err)
		}
		for _, d := range list {
			if d.RunID == a.ID {
				if ok, err := ob.CompleteDelivery(f.ctx, d.ID, "one", notify.Outcome{Delivered: true}); !ok || err != nil {
					t.Fatal(ok, err)
				}
			}
		}
		if n, err := ob.PurgeDeliveries(f.ctx, at(-1000), 10); err != nil || n != 0 {
			t.Errorf("purge before every row = %d, %v; want 0", n, err)
		}
		if n, err := ob.PurgeDeliveries(f.ctx, at(1000), 10); err != nil || n != 1 {
			t.Errorf("purge = %d, %v; want the delivered row only", n, err)
		}
		if len(f.deliveries(ob, a.ID)) != 0 || len(f.deliveries(ob, b.ID)) != 1 {
			t.Errorf("after purge: %d rows of the delivered run, %d of the pending one; want 0 and 1", len(f.deliveries(ob, a.ID)), len(f.deliveries(ob, b.ID)))
		}
	})
}
