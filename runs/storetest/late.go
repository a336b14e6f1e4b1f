package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"interlock/runs"
	"interlock/runtype"
)

// refundCall is the TOOL_CALL of an issue_refund call of that id, as an execution stores it.
func refundCall(id string) runtype.Event {
	c := approval(id)
	c.RequiresApproval = false
	return runtype.Event{Type: runtype.EventToolCallRequested, ToolCall: &c}
}

// late is the late result of the call of that id of r: a refund made.
func late(r *live, callID string, recorded time.Time) runtype.LateResult {
	return runtype.LateResult{
		RunID: r.ID, ToolCallID: callID, ToolName: "issue_refund", Result: json.RawMessage(`{"refunded":30,"id":"rf_42"}`),
		InstanceID: "instance-a", FinishedAt: recorded.Add(-time.Minute), RecordedAt: recorded,
	}
}

// record stores l, which must be stored.
func (f *fixture) record(l runtype.LateResult) {
	f.t.Helper()
	stored, err := f.s.RecordLateResult(f.ctx, l)
	if err != nil || !stored {
		f.t.Fatalf("RecordLateResult %s %s = %v, %v; want stored", l.RunID, l.ToolCallID, stored, err)
	}
}

// lateResults returns the late results of a run.
func (f *fixture) lateResults(runID string) []runtype.LateResult {
	f.t.Helper()
	list, err := f.s.LateResults(f.ctx, runID)
	if err != nil {
		f.t.Fatalf("LateResults %s: %v", runID, err)
	}
	return list
}

// wantLate fails unless got are the late results want, as a store gives them back.
func wantLate(t *testing.T, what string, got []runtype.LateResult, want ...runtype.LateResult) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d late results %s, want %d %s", what, len(got), body(got), len(want), body(want))
	}
	for i, w := range want {
		g := got[i]
		if g.RunID != w.RunID || g.ToolCallID != w.ToolCallID || g.ToolName != w.ToolName || g.InstanceID != w.InstanceID ||
			!sameJSON(g.Result, w.Result) || (g.Result == nil) != (w.Result == nil) ||
			!sameJSON(g.SuspendPayload, w.SuspendPayload) || (g.SuspendPayload == nil) != (w.SuspendPayload == nil) {
			t.Errorf("%s[%d] = %s, want %s", what, i, body(g), body(w))
		}
		wantStr(t, fmt.Sprintf("%s[%d].Error", what, i), g.Error, w.Error)
		wantTime(t, fmt.Sprintf("%s[%d].FinishedAt", what, i), g.FinishedAt, w.FinishedAt)
		wantTime(t, fmt.Sprintf("%s[%d].RecordedAt", what, i), g.RecordedAt, w.RecordedAt)
	}
}

func testLateResult(t *testing.T, open Opener) {
	each(t, open, "IsStoredBesideTheRunWhichItLeavesAsItIs", func(t *testing.T, f *fixture) {
		r := f.insert(runOpts{})
		f.checkpoint(r, at(5), refundCall("tc_1"))
		before := f.get(r.ID)
		l := late(r, "tc_1", at(70))
		f.record(l)
		wantLate(t, "LateResults", f.lateResults(r.ID), l)
		after := f.get(r.ID)
		if after.Status != before.Status || after.LastSeq != before.LastSeq || after.Version != before.Version ||
			!after.UpdatedAt.Equal(before.UpdatedAt) || after.RecoveryAttempts != before.RecoveryAttempts {
			t.Fatalf("the run changed: %s seq %d version %d at %v → %s seq %d version %d at %v",
				before.Status, before.LastSeq, before.Version, before.UpdatedAt, after.Status, after.LastSeq, after.Version, after.UpdatedAt)
		}
		wantStr(t, "lease owner", after.LeaseOwner, before.LeaseOwner)
		wantStr(t, "snapshot", after.Snapshot, before.Snapshot)
		if len(f.events(r.ID)) != int(before.LastSeq) {
			t.Fatalf("events %s, want the %d stored before", seqTypes(f.events(r.ID)), before.LastSeq)
		}
		if f.expired(r.ID) {
			t.Fatal("recording a late result ended the lease")
		}
		// The holder of the lease writes on, as if nothing happened.
		f.checkpoint(r, at(71), runtype.Event{Type: runtype.EventStepFinished})
	})

	each(t, open, "KeepsAToolError", func(t *testing.T, f *fixture) {
		r := f.insert(runOpts{})
		f.checkpoint(r, at(5), refundCall("tc_1"))
		l := late(r, "tc_1", at(70))
		l.Result, l.Error = nil, ptr("the payment provider refused: card expired")
		f.record(l)
		wantLate(t, "LateResults", f.lateResults(r.ID), l)
	})

	each(t, open, "KeepsASuspension", func(t *testing.T, f *fixture) {
		r := f.insert(runOpts{})
		f.checkpoint(r, at(5), refundCall("tc_1"))
		l := late(r, "tc_1", at(70))
		l.Result, l.SuspendPayload = nil, json.RawMessage(`{"question":"Which card?"}`)
		f.record(l)
		wantLate(t, "LateResults", f.lateResults(r.ID), l)
	})

	each(t, open, "OnlyAnAnswerAfterTheCallWasSentAnswersIt", func(t *testing.T, f *fixture) {
		// tc_1 suspended (asked for input), was resumed and ran again from seq 3 on: the
		// suspension stored before answers the first execution, not this one.
		r := f.insert(runOpts{})
		f.checkpoint(r, at(5), refundCall("tc_1"))
		asked := approval("tc_1")
		asked.RequiresApproval, asked.SuspendPayload = false, json.RawMessage(`{"question":"Which card?"}`)
		f.checkpoint(r, at(6), runtype.Event{Type: runtype.EventToolCallSuspended, ToolCall: &asked})
		again := late(r, "tc_1", at(70))
		again.After = r.Seq
		f.record(again)
		wantLate(t, "LateResults", f.lateResults(r.ID), again)

		// The same suspension stored after the call was sent is its answer: none is needed.
		r2 := f.insert(runOpts{})
		f.checkpoint(r2, at(5), refundCall("tc_1"))
		sent := r2.Seq
		f.checkpoint(r2, at(6), runtype.Event{Type: runtype.EventToolCallSuspended, ToolCall: &asked})
		l := late(r2, "tc_1", at(70))
		l.Result, l.SuspendPayload, l.After = nil, asked.SuspendPayload, sent
		stored, err := f.s.RecordLateResult(f.ctx, l)
		if err != nil || stored {
			t.Fatalf("late suspension of a call whose suspension is stored = %v, %v; want not stored, no error", stored, err)
		}
		wantLate(t, "LateResults", f.lateResults(r2.ID))
	})

	each(t, open, "OncePerCallTheFirstStays", func(t *testing.T, f *fixture) {
		r := f.insert(runOpts{})
		f.checkpoint(r, at(5), refundCall("tc_1"))
		first := late(r, "tc_1", at(70))
		f.record(first)
		again := late(r, "tc_1", at(80))
		again.Result = json.RawMessage(`{"refunded":30,"id":"rf_43"}`)
		stored, err := f.s.RecordLateResult(f.ctx, again)
		if err != nil || stored {
			t.Fatalf("a second late result of tc_1 = %v, %v; want not stored, no error", stored, err)
		}
		wantLate(t, "LateResults", f.lateResults(r.ID), first)
	})

	each(t, open, "RecordedOnceByOneOfRacingRecorders", func(t *testing.T, f *fixture) {
		r := f.insert(runOpts{})
		f.checkpoint(r, at(5), refundCall("tc_1"))
		const n = 4
		results := make(chan bool, n)
		errs := make(chan error, n)
		start := make(chan struct{})
		for i := range n {
			go func() {
				<-start
				l := late(r, "tc_1", at(70+i))
				stored, err := f.s.RecordLateResult(f.ctx, l)
				results <- stored
				errs <- err
			}()
		}
		close(start)
		won := 0
		for range n {
			if err := <-errs; err != nil {
				t.Errorf("a racing recorder: %v", err)
			}
			if <-results {
				won++
			}
		}
		if got := f.lateResults(r.ID); len(got) != 1 || won != 1 {
			t.Fatalf("late results of tc_1 after %d racing recorders: %s, %d said stored; want one", n, body(got), won)
		}
	})

	each(t, open, "NeverForACallTheRunDoesNotHave", func(t *testing.T, f *fixture) {
		r := f.insert(runOpts{})
		f.checkpoint(r, at(5), refundCall("tc_10"))
		for _, l := range []runtype.LateResult{
			late(r, "tc_1", at(70)), // a prefix of the call's id is another call
			late(r, "tc_2", at(70)),
			late(&live{ID: id(99)}, "tc_10", at(70)), // no such run
		} {
			stored, err := f.s.RecordLateResult(f.ctx, l)
			if !errors.Is(err, runs.ErrNoSuchCall) || stored {
				t.Errorf("late result of %s %s = %v, %v; want ErrNoSuchCall", l.RunID, l.ToolCallID, stored, err)
			}
		}
		other := late(r, "tc_10", at(70))
		other.ToolName = "delete_account" // the call is another tool's
		if stored, err := f.s.RecordLateResult(f.ctx, other); !errors.Is(err, runs.ErrNoSuchCall) || stored {
			t.Errorf("late result of tc_10 as delete_account = %v, %v; want ErrNoSuchCall", stored, err)
		}
		wantLate(t, "LateResults", f.lateResults(r.ID))
	})

	each(t, open, "NotForACallWhoseResultTheRunStored", func(t *testing.T, f *fixture) {
		r := f.insert(runOpts{})
		f.checkpoint(r, at(5), refundCall("tc_1"))
		res := approval("tc_1")
		f.checkpoint(r, at(6), runtype.Event{Type: runtype.EventToolResult, ToolCall: &res, Result: json.RawMessage(`{"refunded":30}`)})
		stored, err := f.s.RecordLateResult(f.ctx, late(r, "tc_1", at(70)))
		if err != nil || stored {
			t.Fatalf("late result of a call whose result is stored = %v, %v; want not stored, no error", stored, err)
		}
		wantLate(t, "LateResults", f.lateResults(r.ID))
	})

	each(t, open, "ReadWithTheRunOnceACallIsInterrupted", func(t *testing.T, f *fixture) {
		r := f.insert(runOpts{})
		f.checkpoint(r, at(5), refundCall("tc_1"))
		l := late(r, "tc_1", at(70))
		f.record(l)
		// Still RUNNING, no call reported interrupted yet: runs are read without their late results.
		if got := f.get(r.ID); len(got.LateResults) != 0 {
			t.Fatalf("a running run is read with late results %s", body(got.LateResults))
		}
		// Recovery reports the call interrupted: it waits again as tc_2.
		f.expire(r)
		f.claim(r, "lease-recovery")
		again := approval("tc_2")
		again.Interrupted, again.InterruptedToolCallID = true, "tc_1"
		got := f.suspend(r, again, at(80), "instance-b")
		wantCall(t, "waiting call", got.ToolCalls[0], again)
		wantLate(t, "late results of GetRun", got.LateResults, l)
		list, err := f.s.ListSuspended(f.ctx, runs.ListSuspendedParams{}, 10, 0)
		if err != nil || len(list) != 1 {
			t.Fatalf("ListSuspended = %d runs, %v", len(list), err)
		}
		wantLate(t, "late results of ListSuspended", list[0].LateResults, l)
		// Approved again and finished, the run keeps them: history shows what happened.
		next := f.decide(got, decision(got, runtype.DecisionApproved, "lease-2", at(90)))
		f.finish(next, at(95))
		wantLate(t, "late results of the finished run", f.get(r.ID).LateResults, l)
		recent, _, err := f.s.ListRecent(f.ctx, runs.RecentParams{Statuses: runtype.AllStatuses, PerPage: 10})
		if err != nil || len(recent) != 1 {
			t.Fatalf("ListRecent = %d runs, %v", len(recent), err)
		}
		wantLate(t, "late results of ListRecent", recent[0].LateResults, l)
		// A run without an interrupted call is read without any (and without asking for them).
		plain := f.suspended(runOpts{})
		if len(plain.LateResults) != 0 {
			t.Fatalf("a run without interrupted calls has late results %s", body(plain.LateResults))
		}
	})

	each(t, open, "ReadWithARunThatFailedAsUnrecoverable", func(t *testing.T, f *fixture) {
		r := f.insert(runOpts{})
		f.checkpoint(r, at(5), refundCall("tc_1"))
		l := late(r, "tc_1", at(70))
		f.record(l)
		msg, code := "the run could not be recovered: its agent is not served", runs.FailureUnrecoverable
		err := f.s.Finish(f.ctx, runs.Finish{
			Checkpoint: cp(r, at(80), runtype.Event{Type: runtype.EventRunFailed, Status: string(runtype.StatusFailed), Error: msg, ErrorCode: code}),
			Status:     runtype.StatusFailed, Error: &msg, ErrorCode: &code,
		})
		if err != nil {
			t.Fatal(err)
		}
		wantLate(t, "late results of the failed run", f.get(r.ID).LateResults, l)
	})

	each(t, open, "OldestFirst", func(t *testing.T, f *fixture) {
		r := f.insert(runOpts{})
		f.checkpoint(r, at(5), refundCall("tc_2"), refundCall("tc_1"))
		second, first := late(r, "tc_2", at(71)), late(r, "tc_1", at(70))
		f.record(second)
		f.record(first)
		wantLate(t, "LateResults", f.lateResults(r.ID), first, second)
		wantLate(t, "LateResults of another run", f.lateResults(id(99)))
	})

	each(t, open, "PurgedWithTheirRun", func(t *testing.T, f *fixture) {
		r := f.insert(runOpts{})
		f.checkpoint(r, at(5), refundCall("tc_1"))
		f.record(late(r, "tc_1", at(70)))
		f.finish(r, at(80))
		n, err := f.s.PurgeFinished(f.ctx, at(81), at(0), 10)
		if err != nil || n != 1 {
			t.Fatalf("PurgeFinished = %d, %v; want 1", n, err)
		}
		wantLate(t, "LateResults after the purge", f.lateResults(r.ID))
	})
}
