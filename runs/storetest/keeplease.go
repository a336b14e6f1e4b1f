package storetest

import (
	"encoding/json"
	"testing"

	"interlock/runs"
	"interlock/runtype"
)

// testKeepLease: a suspension that keeps its lease (a question asked in the middle of a call,
// whose instance holds the call open): the run waits as any SUSPENDED run does, its holder
// renews the lease and nobody else's write passes, a decision moves it back to RUNNING under
// that same lease (not once the lease expired), and should the holder die, recovery lists and
// claims it, closing its question.
func testKeepLease(t *testing.T, open Opener) {
	question := func(callID string) runtype.ToolCall {
		return runtype.ToolCall{ToolCallID: callID, ToolName: "refund_ask", Args: json.RawMessage(`{"order":7}`),
			SuspendPayload: json.RawMessage(`{"message":"Why?"}`), ResumeSchema: json.RawMessage(`{"type":"object"}`)}
	}
	asked := func(f *fixture, r *live) *runs.Record {
		f.t.Helper()
		s := suspension(r, question("tc_1"), at(5), "instance-1")
		s.KeepLease = true
		f.announceSuspension(&s)
		if err := f.s.Suspend(f.ctx, s); err != nil {
			f.t.Fatalf("Suspend keeping the lease: %v", err)
		}
		r.Seq += int64(len(s.Events))
		return f.get(r.ID)
	}

	each(t, open, "WaitsUnderItsHoldersLease", func(t *testing.T, f *fixture) {
		r := f.insert(runOpts{Lease: "holder"})
		got := asked(f, r)
		if got.Status != runtype.StatusSuspended || got.LeaseOwner == nil || *got.LeaseOwner != "holder" || len(got.ToolCalls) != 1 {
			t.Fatalf("after Suspend keeping the lease: %s, owner %v, calls %+v; want SUSPENDED under holder on its call", got.Status, got.LeaseOwner, got.ToolCalls)
		}
		if n, err := f.s.CountSuspended(f.ctx, runs.ListSuspendedParams{}); err != nil || n != 1 {
			t.Errorf("CountSuspended = %d, %v; want the run counted", n, err)
		}
		if err := f.s.RenewLease(f.ctx, r.ID, "holder", hour); err != nil {
			t.Errorf("the holder's RenewLease of its SUSPENDED run: %v", err)
		}
		wantLeaseLost(t, "RenewLease by another", f.s.RenewLease(f.ctx, r.ID, "other", hour))
		wantLeaseLost(t, "Checkpoint while SUSPENDED", f.s.Checkpoint(f.ctx, cp(r, at(6), runtype.Event{Type: runtype.EventStepFinished})))
		if f.expired(r.ID) {
			t.Error("a SUSPENDED run whose kept lease runs is listed as expired")
		}
	})

	each(t, open, "ADecisionGoesBackToTheHolder", func(t *testing.T, f *fixture) {
		r := f.insert(runOpts{Lease: "holder"})
		got := asked(f, r)
		d := decision(got, runtype.DecisionResumed, "", at(7))
		d.KeepLease, d.ResumeData = true, []byte(`{"reason":"broken"}`)
		f.decide(got, d)
		after := f.get(r.ID)
		if after.Status != runtype.StatusRunning || after.LeaseOwner == nil || *after.LeaseOwner != "holder" || len(after.ToolCalls) != 0 {
			t.Fatalf("after the decision: %s, owner %v, calls %d; want RUNNING under holder", after.Status, after.LeaseOwner, len(after.ToolCalls))
		}
		if n := len(after.Decisions); n != 1 || string(after.Decisions[0].ResumeData) != `{"reason":"broken"}` {
			t.Fatalf("decisions %+v", after.Decisions)
		}
		r.Seq = after.LastSeq
		f.checkpoint(r, at(8), runtype.Event{Type: runtype.EventStepFinished}) // the holder goes on
		if n, err := f.s.CountSuspended(f.ctx, runs.ListSuspendedParams{}); err != nil || n != 0 {
			t.Errorf("CountSuspended = %d, %v; want 0", n, err)
		}
	})

	each(t, open, "NoDecisionOnceTheHoldersLeaseExpired", func(t *testing.T, f *fixture) {
		r := f.insert(runOpts{Lease: "holder"})
		asked(f, r)
		f.expire(r)
		got := f.get(r.ID)
		d := decision(got, runtype.DecisionResumed, "", at(7))
		d.KeepLease, d.ResumeData = true, []byte(`{}`)
		f.announceDecision(&got.Run, &d)
		wantStale(t, "Decide keeping an expired lease", f.s.Decide(f.ctx, d))
		wantUnchanged(t, "a stale Decide", f.get(r.ID), got)
	})

	each(t, open, "ADeadHoldersRunIsRecovered", func(t *testing.T, f *fixture) {
		r := f.insert(runOpts{Lease: "holder"})
		asked(f, r)
		f.expire(r)
		got := f.get(r.ID)
		c := runs.Claim{RunID: r.ID, Version: got.Version, LastSeq: got.LastSeq, Lease: "rescuer", TTL: hour}
		if ok, err := f.s.ClaimExpired(f.ctx, c); err != nil || ok {
			t.Fatalf("ClaimExpired of a SUSPENDED run as a RUNNING one = %v, %v; want false", ok, err)
		}
		c.Suspended, c.Reason, c.At, c.InstanceID = true, "its instance stopped", at(9), "instance-2"
		if ok, err := f.s.ClaimExpired(f.ctx, c); err != nil || !ok {
			t.Fatalf("ClaimExpired = %v, %v; want true", ok, err)
		}
		after := f.get(r.ID)
		if after.Status != runtype.StatusRunning || after.LeaseOwner == nil || *after.LeaseOwner != "rescuer" || len(after.ToolCalls) != 0 {
			t.Fatalf("after the claim: %s, owner %v, calls %+v; want RUNNING under rescuer, nothing waiting", after.Status, after.LeaseOwner, after.ToolCalls)
		}
		if n := len(after.Decisions); n != 1 || after.Decisions[0].Kind != runtype.DecisionExpired || after.Decisions[0].DecidedBy != nil ||
			after.Decisions[0].Reason == nil || *after.Decisions[0].Reason != "its instance stopped" {
			t.Fatalf("decisions %+v; want the question closed as EXPIRED by nobody, with the reason", after.Decisions)
		}
		if n, err := f.s.CountSuspended(f.ctx, runs.ListSuspendedParams{}); err != nil || n != 0 {
			t.Errorf("CountSuspended = %d, %v; want 0", n, err)
		}
		ch := f.changes()
		if last := ch[len(ch)-1]; last.RunID != r.ID || last.Kind != runs.ChangeLeft {
			t.Errorf("last change %+v; want the run leaving the suspended set", last)
		}
		wantLeaseLost(t, "RenewLease by the dead holder", f.s.RenewLease(f.ctx, r.ID, "holder", hour))
	})

	each(t, open, "AnOrdinarySuspensionIsNeverRecovered", func(t *testing.T, f *fixture) {
		r := f.insert(runOpts{Lease: "holder"})
		f.suspend(r, approval("call-1"), at(5), "instance-1")
		wantLeaseLost(t, "RenewLease of a suspension that gave its lease up", f.s.RenewLease(f.ctx, r.ID, "holder", hour))
		if f.expired(r.ID) {
			t.Error("a SUSPENDED run without a lease is listed as expired")
		}
	})
}
