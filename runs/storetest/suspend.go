package storetest

import (
	"encoding/json"
	"testing"

	"interlock/llm"
	"interlock/runs"
	"interlock/runtype"
)

func testSuspend(t *testing.T, open Opener) {
	each(t, open, "StoresTheRunAsSuspendedOnTheCall", func(t *testing.T, f *fixture) {
		r := f.insert(runOpts{})
		f.checkpoint(r, at(5), runtype.Event{Type: runtype.EventTextDelta, Text: "thinking"})
		before := f.get(r.ID)
		call := approval("call-7")
		s := suspension(r, call, at(10), "instance-1")
		if err := f.s.Suspend(f.ctx, s); err != nil {
			t.Fatal(err)
		}
		got := f.get(r.ID)
		if got.Status != runtype.StatusSuspended {
			t.Fatalf("status = %s, want SUSPENDED", got.Status)
		}
		if got.SuspendedAt == nil {
			t.Fatal("suspendedAt is nil")
		}
		wantTime(t, "suspendedAt", *got.SuspendedAt, at(10))
		wantTime(t, "updatedAt", got.UpdatedAt, at(10))
		wantStr(t, "snapshot", got.Snapshot, s.Snapshot)
		if got.LastSeq != 4 {
			t.Errorf("last seq = %d, want 4", got.LastSeq)
		}
		if got.Version <= before.Version {
			t.Errorf("version %d → %d: a status change must move the version", before.Version, got.Version)
		}
		if len(got.ToolCalls) != 1 {
			t.Fatalf("pending calls = %+v, want one", got.ToolCalls)
		}
		wantCall(t, "pending call", got.ToolCalls[0], call)
		if len(got.Decisions) != 0 {
			t.Errorf("decisions = %+v, want none", got.Decisions)
		}
		wantEvents(t, "events", f.eventsAfter(r.ID, 2), stored(r.ID, 2, at(10), s.Events...))
	})

	each(t, open, "KeepsEveryFieldOfTheCall", func(t *testing.T, f *fixture) {
		calls := []runtype.ToolCall{
			{ToolCallID: "ask-1", ToolName: "ask_customer", Args: json.RawMessage(`{"question":"size?"}`),
				SuspendPayload: json.RawMessage(`{"form":{"type":"object","properties":{"answer":{"type":"string"}}}}`)},
			{ToolCallID: "refund-1", ToolName: "issue_refund", Args: json.RawMessage(`{"amount":10}`), RequiresApproval: true, Interrupted: true},
			{ToolCallID: "refund-3", ToolName: "issue_refund", Args: json.RawMessage(`{"amount":10}`), RequiresApproval: true, Interrupted: true, InterruptedToolCallID: "refund-2"},
			{ToolCallID: "noargs-1", ToolName: "ping", RequiresApproval: true},
		}
		for _, c := range calls {
			r := f.insert(runOpts{})
			got := f.suspend(r, c, at(10), "instance-1")
			if len(got.ToolCalls) != 1 {
				t.Fatalf("%s: pending calls = %+v, want one", c.ToolCallID, got.ToolCalls)
			}
			wantCall(t, c.ToolCallID, got.ToolCalls[0], c)
		}
	})

	each(t, open, "ReleasesTheLease", func(t *testing.T, f *fixture) {
		r := f.insert(runOpts{})
		got := f.suspend(r, approval("call-1"), at(10), "instance-1")
		if got.LeaseOwner != nil {
			t.Errorf("lease owner of a suspended run = %s, want nil", show(got.LeaseOwner))
		}
		wantLeaseLost(t, "RenewLease after Suspend", f.s.RenewLease(f.ctx, r.ID, r.Lease, hour))
		if f.expired(r.ID) {
			t.Error("a suspended run is listed as expired")
		}
	})

	each(t, open, "RecordsASuspendedChange", func(t *testing.T, f *fixture) {
		r := f.insert(runOpts{})
		f.suspend(r, approval("call-1"), at(10), "instance-1")
		got := f.changes()
		if len(got) != 1 || got[0].RunID != r.ID || got[0].Kind != runs.ChangeSuspended {
			t.Fatalf("changes = %+v, want one SUSPENDED change of %s", got, r.ID)
		}
		wantTime(t, "change time", got[0].At, at(10))
		mine, err := f.s.Changes(f.ctx, at(0), "instance-1")
		if err != nil || len(mine) != 0 {
			t.Errorf("Changes not by the suspending instance = %+v, %v; want none", mine, err)
		}
	})

	each(t, open, "WrongLeaseIsLostAndWritesNothing", func(t *testing.T, f *fixture) {
		r := f.insert(runOpts{})
		before := f.get(r.ID)
		wrong := *r
		wrong.Lease = "someone-else"
		wantLeaseLost(t, "Suspend with another lease", f.s.Suspend(f.ctx, suspension(&wrong, approval("call-1"), at(10), "instance-1")))
		wantUnchanged(t, "a lost Suspend", f.get(r.ID), before)
		wantGapless(t, f.events(r.ID), 1)
		if ch := f.changes(); len(ch) != 0 {
			t.Errorf("a lost Suspend recorded changes %+v", ch)
		}
	})

	each(t, open, "RunNotRunningIsLost", func(t *testing.T, f *fixture) {
		r := f.insert(runOpts{})
		again := *r
		before := f.suspend(r, approval("call-1"), at(10), "instance-1")
		wantLeaseLost(t, "a second Suspend", f.s.Suspend(f.ctx, suspension(&again, approval("call-2"), at(11), "instance-1")))
		wantUnchanged(t, "a lost Suspend", f.get(r.ID), before)
		if ch := f.changes(); len(ch) != 1 {
			t.Errorf("changes after a lost Suspend = %+v, want the first suspension's only", ch)
		}
		d := f.insert(runOpts{})
		old := *d
		f.finish(d, at(12))
		wantLeaseLost(t, "Suspend of a finished run", f.s.Suspend(f.ctx, suspension(&old, approval("call-1"), at(13), "instance-1")))
	})

	// A suspension that fails part way (here on the seq of an event written before) leaves no
	// trace: not the status, not the call, not the change.
	each(t, open, "SeqWrittenBeforeFailsAndWritesNothing", func(t *testing.T, f *fixture) {
		r := f.insert(runOpts{})
		stale := *r
		f.checkpoint(r, at(5), runtype.Event{Type: runtype.EventTextDelta, Text: "written"})
		before := f.get(r.ID)
		if err := f.s.Suspend(f.ctx, suspension(&stale, approval("call-1"), at(10), "instance-1")); err == nil {
			t.Fatal("Suspend after a seq already written succeeded: the log forked")
		}
		wantUnchanged(t, "a failed Suspend", f.get(r.ID), before)
		wantGapless(t, f.events(r.ID), 2)
		if ch := f.changes(); len(ch) != 0 {
			t.Errorf("a failed Suspend recorded changes %+v", ch)
		}
	})

	// A resumed tool runs again and may suspend again under the same call id: the run then
	// waits on that call again, and the earlier decision stays in the audit trail.
	each(t, open, "CallSuspendedAgainAfterResumeWaitsAgain", func(t *testing.T, f *fixture) {
		call := runtype.ToolCall{ToolCallID: "ask-1", ToolName: "ask_customer", SuspendPayload: json.RawMessage(`{"round":1}`)}
		r := f.insert(runOpts{})
		rn := f.suspend(r, call, at(10), "instance-1")
		d := decision(rn, runtype.DecisionResumed, "lease-2", at(11))
		d.ResumeData = json.RawMessage(`{"answer":"M"}`)
		r = f.decide(rn, d)
		call.SuspendPayload = json.RawMessage(`{"round":2}`)
		rn = f.suspend(r, call, at(12), "instance-1")
		if len(rn.ToolCalls) != 1 {
			t.Fatalf("pending calls = %+v, want ask-1 once", rn.ToolCalls)
		}
		wantCall(t, "pending call", rn.ToolCalls[0], call)
		if len(rn.Decisions) != 1 || rn.Decisions[0].ToolCallID != "ask-1" || rn.Decisions[0].Kind != runtype.DecisionResumed {
			t.Fatalf("decisions = %+v, want the first RESUMED", rn.Decisions)
		}
		d = decision(rn, runtype.DecisionResumed, "lease-3", at(13))
		d.ResumeData = json.RawMessage(`{"answer":"L"}`)
		f.decide(rn, d)
		got := f.get(rn.ID)
		if len(got.ToolCalls) != 0 || len(got.Decisions) != 2 {
			t.Fatalf("after the second decision: %d pending calls, %d decisions; want 0, 2", len(got.ToolCalls), len(got.Decisions))
		}
		if !sameJSON(got.Decisions[0].ResumeData, json.RawMessage(`{"answer":"M"}`)) || !sameJSON(got.Decisions[1].ResumeData, json.RawMessage(`{"answer":"L"}`)) {
			t.Errorf("resume data = %s, %s; want M then L", got.Decisions[0].ResumeData, got.Decisions[1].ResumeData)
		}
	})
}

func testFinish(t *testing.T, open Opener) {
	each(t, open, "StoresACompletedRun", func(t *testing.T, f *fixture) {
		r := f.insert(runOpts{})
		before := f.get(r.ID)
		fin := finishing(r, at(10))
		fin.Events = append([]runtype.Event{{Type: runtype.EventTextDelta, Text: "last words"}}, fin.Events...)
		if err := f.s.Finish(f.ctx, fin); err != nil {
			t.Fatal(err)
		}
		got := f.get(r.ID)
		if got.Status != runtype.StatusCompleted || got.LastSeq != 3 {
			t.Errorf("status %s, last seq %d; want COMPLETED, 3", got.Status, got.LastSeq)
		}
		wantStr(t, "output", got.Output, fin.Output)
		wantStr(t, "error", got.Error, nil)
		wantStr(t, "error code", got.ErrorCode, nil)
		wantStr(t, "snapshot of a finished run", got.Snapshot, nil)
		wantStr(t, "lease owner of a finished run", got.LeaseOwner, nil)
		wantTime(t, "updatedAt", got.UpdatedAt, at(10))
		if got.Version <= before.Version {
			t.Errorf("version %d → %d: a status change must move the version", before.Version, got.Version)
		}
		if got.SuspendedAt != nil || len(got.ToolCalls) != 0 {
			t.Errorf("finished run: suspendedAt %v, %d pending calls; want none", got.SuspendedAt, len(got.ToolCalls))
		}
		wantEvents(t, "events", f.eventsAfter(r.ID, 1), stored(r.ID, 1, at(10), fin.Events...))
	})

	each(t, open, "StoresAFailedRun", func(t *testing.T, f *fixture) {
		r := f.insert(runOpts{})
		msg, code := "the model call failed (demo)", "MODEL_ERROR"
		err := f.s.Finish(f.ctx, runs.Finish{
			Checkpoint: cp(r, at(10), runtype.Event{Type: runtype.EventRunFailed, Status: string(runtype.StatusFailed), Error: msg, ErrorCode: code}),
			Status:     runtype.StatusFailed, Error: &msg, ErrorCode: &code,
		})
		if err != nil {
			t.Fatal(err)
		}
		got := f.get(r.ID)
		if got.Status != runtype.StatusFailed {
			t.Errorf("status = %s, want FAILED", got.Status)
		}
		wantStr(t, "output", got.Output, nil)
		wantStr(t, "error", got.Error, &msg)
		wantStr(t, "error code", got.ErrorCode, &code)
		wantStr(t, "snapshot of a failed run", got.Snapshot, nil)
	})

	each(t, open, "FinishesASuspendedThenDecidedRun", func(t *testing.T, f *fixture) {
		rn := f.suspended(runOpts{})
		r := f.decide(rn, decision(rn, runtype.DecisionApproved, "lease-2", at(20)))
		f.finish(r, at(21))
		got := f.get(r.ID)
		if got.Status != runtype.StatusCompleted || len(got.Decisions) != 1 || len(got.ToolCalls) != 0 {
			t.Errorf("status %s, %d decisions, %d pending; want COMPLETED, 1, 0", got.Status, len(got.Decisions), len(got.ToolCalls))
		}
	})

	each(t, open, "AppendsMemoryToTheThread", func(t *testing.T, f *fixture) {
		r := f.insert(runOpts{ThreadID: ptr("thread-1")})
		fin := finishing(r, at(10))
		fin.ThreadID, fin.ResourceID = ptr("thread-1"), ptr("user-1")
		fin.Memory = []llm.Message{{Role: llm.RoleUser, Content: "refund order 42"}, {Role: llm.RoleAssistant, Content: "Refunded."}}
		if err := f.s.Finish(f.ctx, fin); err != nil {
			t.Fatal(err)
		}
		wantMessages(t, "thread-1", f.history(ptr("user-1"), "thread-1"), fin.Memory)
	})

	each(t, open, "MemoryIgnoredWithoutAThread", func(t *testing.T, f *fixture) {
		r := f.insert(runOpts{})
		fin := finishing(r, at(10))
		fin.Memory = []llm.Message{{Role: llm.RoleUser, Content: "no thread"}}
		if err := f.s.Finish(f.ctx, fin); err != nil {
			t.Fatalf("Finish with memory and no thread: %v", err)
		}
		if got := f.get(r.ID); got.Status != runtype.StatusCompleted {
			t.Errorf("status = %s, want COMPLETED", got.Status)
		}
	})

	each(t, open, "ReleasesTheLease", func(t *testing.T, f *fixture) {
		r := f.insert(runOpts{})
		f.finish(r, at(10))
		wantLeaseLost(t, "RenewLease after Finish", f.s.RenewLease(f.ctx, r.ID, r.Lease, hour))
		if f.expired(r.ID) {
			t.Error("a finished run is listed as expired")
		}
	})

	each(t, open, "WrongLeaseIsLostAndWritesNothing", func(t *testing.T, f *fixture) {
		r := f.insert(runOpts{ThreadID: ptr("thread-1")})
		before := f.get(r.ID)
		wrong := *r
		wrong.Lease = "someone-else"
		fin := finishing(&wrong, at(10))
		fin.ThreadID, fin.Memory = ptr("thread-1"), []llm.Message{{Role: llm.RoleUser, Content: "x"}}
		wantLeaseLost(t, "Finish with another lease", f.s.Finish(f.ctx, fin))
		got := f.get(r.ID)
		wantUnchanged(t, "a lost Finish", got, before)
		wantStr(t, "output", got.Output, nil)
		wantGapless(t, f.events(r.ID), 1)
		wantMessages(t, "thread after a lost Finish", f.history(nil, "thread-1"), nil)
	})

	each(t, open, "SeqWrittenBeforeFailsAndWritesNothing", func(t *testing.T, f *fixture) {
		r := f.insert(runOpts{ThreadID: ptr("thread-1")})
		stale := *r
		f.checkpoint(r, at(5), runtype.Event{Type: runtype.EventTextDelta, Text: "written"})
		before := f.get(r.ID)
		fin := finishing(&stale, at(10))
		fin.ThreadID, fin.Memory = ptr("thread-1"), []llm.Message{{Role: llm.RoleUser, Content: "x"}}
		if err := f.s.Finish(f.ctx, fin); err == nil {
			t.Fatal("Finish after a seq already written succeeded: the log forked")
		}
		got := f.get(r.ID)
		wantUnchanged(t, "a failed Finish", got, before)
		wantStr(t, "output", got.Output, nil)
		wantGapless(t, f.events(r.ID), 2)
		wantMessages(t, "thread after a failed Finish", f.history(nil, "thread-1"), nil)
	})

	each(t, open, "RunNotRunningIsLost", func(t *testing.T, f *fixture) {
		r := f.insert(runOpts{})
		old := *r
		before := f.suspend(r, approval("call-1"), at(10), "instance-1")
		wantLeaseLost(t, "Finish of a suspended run", f.s.Finish(f.ctx, finishing(&old, at(11))))
		wantUnchanged(t, "a lost Finish", f.get(r.ID), before)
		d := f.insert(runOpts{})
		again := *d
		f.finish(d, at(12))
		wantLeaseLost(t, "a second Finish", f.s.Finish(f.ctx, finishing(&again, at(13))))
	})
}
