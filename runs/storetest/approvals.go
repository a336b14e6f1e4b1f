package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"interlock/runs"
	"interlock/runtype"
)

// approvalWrite is the RecordApproval of subject's approval, in round, of the first pending
// call of r as read, at `when` (editedArgs nil: the round's arguments).
func approvalWrite(r *runs.Record, subject string, round int, editedArgs json.RawMessage, when time.Time) runs.ApprovalWrite {
	call := r.ToolCalls[0]
	a := runtype.Approval{Subject: subject, Round: round, ArgsDigest: "sha256:" + subject, EditedArgs: editedArgs, At: when}
	return runs.ApprovalWrite{RunID: r.ID, Version: r.Version, After: r.LastSeq, ToolCallID: call.ToolCallID, Approval: a, At: when,
		Snapshot: fmt.Sprintf(`{"approvedBy":%q}`, subject), InstanceID: "instance-1",
		Events: []runtype.Event{{Type: runtype.EventToolCallApprovalRecorded, ToolCall: &call, DecidedBy: subject}}}
}

func (f *fixture) approve(r *runs.Record, subject string, round int, editedArgs json.RawMessage, when time.Time) *runs.Record {
	f.t.Helper()
	if err := f.s.RecordApproval(f.ctx, approvalWrite(r, subject, round, editedArgs, when)); err != nil {
		f.t.Fatalf("RecordApproval %s by %s: %v", r.ID, subject, err)
	}
	return f.get(r.ID)
}

func approvers(list []runtype.Approval) string {
	s := ""
	for i, a := range list {
		if i > 0 {
			s += ","
		}
		s += a.Subject
	}
	return s
}

func testRecordApproval(t *testing.T, open Opener) {
	each(t, open, "KeepsTheRunSuspendedAndTheCallPending", func(t *testing.T, f *fixture) {
		r := f.suspended(runOpts{})
		w := approvalWrite(r, "alice", 0, nil, at(20))
		if err := f.s.RecordApproval(f.ctx, w); err != nil {
			t.Fatal(err)
		}
		got := f.get(r.ID)
		if got.Status != runtype.StatusSuspended || got.SuspendedAt == nil || len(got.ToolCalls) != 1 || len(got.Decisions) != 0 {
			t.Fatalf("run %s, calls %+v, decisions %+v; want it suspended on its call", got.Status, got.ToolCalls, got.Decisions)
		}
		if got.Version <= r.Version || got.LastSeq != r.LastSeq+1 {
			t.Errorf("version %d → %d, last seq %d → %d; want a new version and one more event", r.Version, got.Version, r.LastSeq, got.LastSeq)
		}
		wantStr(t, "snapshot", got.Snapshot, &w.Snapshot)
		wantTime(t, "updatedAt", got.UpdatedAt, at(20))
		a := got.ToolCalls[0].Approvals
		if a == nil || approvers(a.By) != "alice" || a.Round != 0 || !sameJSON(a.Args, r.ToolCalls[0].Args) || len(a.Superseded) != 0 {
			t.Fatalf("approvals %+v", a)
		}
		wantTime(t, "approved at", a.By[0].At, at(20))
		if a.By[0].ArgsDigest != "sha256:alice" || a.By[0].EditedArgs != nil {
			t.Errorf("approval %+v", a.By[0])
		}
		wantEvents(t, "approval events", f.eventsAfter(r.ID, r.LastSeq), stored(r.ID, r.LastSeq, at(20), w.Events...))
		ch := f.changes()
		if len(ch) != 2 || ch[1].Kind != runs.ChangeChanged {
			t.Errorf("changes %+v, want SUSPENDED then CHANGED", ch)
		}
		// Listings read the approvals too.
		list, err := f.s.ListSuspended(f.ctx, runs.ListSuspendedParams{}, 10, 0)
		if err != nil || len(list) != 1 || approvers(list[0].ToolCalls[0].Approvals.By) != "alice" {
			t.Errorf("ListSuspended = %+v, %v", list, err)
		}
	})

	each(t, open, "TheSamePersonTwiceInARoundIsADuplicate", func(t *testing.T, f *fixture) {
		r := f.approve(f.suspended(runOpts{}), "alice", 0, nil, at(20))
		err := f.s.RecordApproval(f.ctx, approvalWrite(r, "alice", 0, nil, at(21)))
		if !errors.Is(err, runs.ErrDuplicateApproval) {
			t.Fatalf("alice again: %v, want ErrDuplicateApproval", err)
		}
		wantUnchanged(t, "a duplicate approval", f.get(r.ID), r)
		// In a new round she may approve again.
		f.approve(r, "alice", 1, json.RawMessage(`{"amount":1}`), at(22))
	})

	each(t, open, "AStaleReadWritesNothing", func(t *testing.T, f *fixture) {
		r := f.suspended(runOpts{})
		errs := make([]error, 6)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range errs {
			wg.Go(func() {
				<-start
				errs[i] = f.s.RecordApproval(f.ctx, approvalWrite(r, fmt.Sprintf("p%d", i), 0, nil, at(20)))
			})
		}
		close(start)
		wg.Wait()
		winner := oneWinner(t, "approver", errs)
		got := f.get(r.ID)
		if a := got.ToolCalls[0].Approvals; a == nil || approvers(a.By) != fmt.Sprintf("p%d", winner) {
			t.Fatalf("approvals %+v, want p%d's only", a, winner)
		}
		wantGapless(t, f.events(r.ID), got.LastSeq)
		wantStale(t, "a Decide of the read before", f.s.Decide(f.ctx, decision(r, runtype.DecisionApproved, "lease-2", at(21))))
	})

	each(t, open, "ANewRoundSupersedesTheEarlierApprovals", func(t *testing.T, f *fixture) {
		r := f.approve(f.suspended(runOpts{}), "alice", 0, nil, at(20))
		edited := json.RawMessage(`{"amount":1,"order":42}`)
		r = f.approve(r, "bob", 1, edited, at(21))
		r = f.approve(r, "alice", 1, nil, at(22))
		a := r.ToolCalls[0].Approvals
		if a.Round != 1 || approvers(a.By) != "bob,alice" || approvers(a.Superseded) != "alice" || !sameJSON(a.Args, edited) {
			t.Fatalf("approvals %+v", a)
		}
	})

	each(t, open, "DecideRecordsTheApprovalThatMeetsTheQuorum", func(t *testing.T, f *fixture) {
		r := f.approve(f.suspended(runOpts{}), "alice", 0, nil, at(20))
		d := decision(r, runtype.DecisionApproved, "lease-2", at(21))
		d.DecidedBy = ptr("bob")
		d.Approval = &runtype.Approval{Subject: "bob", ArgsDigest: "sha256:bob", At: at(21)}
		f.decide(r, d)
		got := f.get(r.ID)
		if got.Status != runtype.StatusRunning || len(got.Decisions) != 1 {
			t.Fatalf("run %s, decisions %+v", got.Status, got.Decisions)
		}
		if a := got.Decisions[0].Approvals; a == nil || approvers(a.By) != "alice,bob" {
			t.Fatalf("the decision's approvals %+v", a)
		}
		// The approval of someone who approved already is a duplicate: nothing is decided.
		r2 := f.approve(f.suspended(runOpts{}), "alice", 0, nil, at(30))
		d = decision(r2, runtype.DecisionApproved, "lease-3", at(31))
		d.Approval = &runtype.Approval{Subject: "alice", ArgsDigest: "sha256:alice", At: at(31)}
		if err := f.s.Decide(f.ctx, d); !errors.Is(err, runs.ErrDuplicateApproval) {
			t.Fatalf("Decide with alice's second approval: %v, want ErrDuplicateApproval", err)
		}
		wantUnchanged(t, "a refused Decide", f.get(r2.ID), r2)
	})

	each(t, open, "AnApprovalAfterTheDeadlineIsStale", func(t *testing.T, f *fixture) {
		run := f.insert(runOpts{})
		c := approval("call-1")
		c.ExpiresAt = ptr(at(15))
		r := f.suspend(run, c, at(10), "instance-1")
		wantStale(t, "an approval after the deadline", f.s.RecordApproval(f.ctx, approvalWrite(r, "alice", 0, nil, at(15))))
		wantUnchanged(t, "a late approval", f.get(r.ID), r)
	})

	each(t, open, "RetentionRemovesThem", func(t *testing.T, f *fixture) {
		r := f.approve(f.suspended(runOpts{}), "alice", 0, nil, at(20))
		d := decision(r, runtype.DecisionApproved, "lease-2", at(21))
		d.Approval = &runtype.Approval{Subject: "bob", ArgsDigest: "sha256:bob", At: at(21)}
		f.finish(f.decide(r, d), at(22))
		if n, err := f.s.PurgeFinished(f.ctx, at(100), at(100), 10); err != nil || n != 1 {
			t.Fatalf("PurgeFinished = %d, %v", n, err)
		}
		if got, err := f.s.GetRun(f.ctx, r.ID); err != nil || got != nil {
			t.Fatalf("purged run: %+v, %v", got, err)
		}
	})
}
