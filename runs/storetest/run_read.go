package storetest

import (
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"interlock/llm"
	"interlock/runs"
	"interlock/runtype"
)

func testInsertRun(t *testing.T, open Opener) {
	each(t, open, "StoresARunningLeasedRunWithItsFirstEvents", func(t *testing.T, f *fixture) {
		created := at(1)
		evs := []runtype.Event{
			{Type: runtype.EventRunStarted, Status: string(runtype.StatusRunning)},
			{Type: runtype.EventTextDelta, Text: "hello"},
		}
		r := f.insert(runOpts{
			N: 1, AgentID: "sub-agent", ParentRunID: ptr(id(9)), ThreadID: ptr("thread-1"), ResourceID: ptr("user-1"),
			Prompt: "refund order 42", RequireToolApproval: true, CreatedAt: created, Lease: "lease-a",
			Snapshot: `{"messages":[]}`, Events: evs, StartedBy: ptr("alice"),
		})
		got := f.get(r.ID)
		wantStr(t, "startedBy", got.StartedBy, ptr("alice"))
		if got.ID != id(1) || got.AgentID != "sub-agent" || got.Prompt != "refund order 42" || !got.RequireToolApproval {
			t.Errorf("stored run = %+v", got)
		}
		wantStr(t, "parentRunId", got.ParentRunID, ptr(id(9)))
		wantStr(t, "threadId", got.ThreadID, ptr("thread-1"))
		wantStr(t, "resourceId", got.ResourceID, ptr("user-1"))
		if got.Status != runtype.StatusRunning {
			t.Errorf("status = %s, want RUNNING", got.Status)
		}
		wantTime(t, "createdAt", got.CreatedAt, created)
		wantTime(t, "updatedAt", got.UpdatedAt, created)
		if got.SuspendedAt != nil {
			t.Errorf("suspendedAt = %v, want nil for a running run", got.SuspendedAt)
		}
		if got.LastSeq != 2 {
			t.Errorf("last seq = %d, want 2 (the number of first events)", got.LastSeq)
		}
		wantStr(t, "lease owner", got.LeaseOwner, ptr("lease-a"))
		wantStr(t, "snapshot", got.Snapshot, ptr(`{"messages":[]}`))
		wantStr(t, "output", got.Output, nil)
		wantStr(t, "error", got.Error, nil)
		wantStr(t, "error code", got.ErrorCode, nil)
		if len(got.ToolCalls) != 0 || len(got.Decisions) != 0 || got.RecoveryAttempts != 0 {
			t.Errorf("new run has %d calls, %d decisions, %d recovery attempts; want none", len(got.ToolCalls), len(got.Decisions), got.RecoveryAttempts)
		}
		wantEvents(t, "events", f.events(r.ID), stored(r.ID, 0, created, evs...))
	})

	each(t, open, "OptionalFieldsStayNil", func(t *testing.T, f *fixture) {
		got := f.get(f.insert(runOpts{}).ID)
		wantStr(t, "parentRunId", got.ParentRunID, nil)
		wantStr(t, "threadId", got.ThreadID, nil)
		wantStr(t, "resourceId", got.ResourceID, nil)
		if got.RequireToolApproval {
			t.Error("requireToolApproval = true, want false")
		}
	})

	each(t, open, "LeasedForTheTTL", func(t *testing.T, f *fixture) {
		held := f.insert(runOpts{TTL: hour})
		short := f.insert(runOpts{TTL: time.Millisecond})
		f.eventually("a run inserted with a 1ms lease is listed as expired", func() bool { return f.expired(short.ID) })
		if f.expired(held.ID) {
			t.Error("a run inserted with a lease of an hour is listed as expired")
		}
		if err := f.s.RenewLease(f.ctx, held.ID, held.Lease, hour); err != nil {
			t.Errorf("RenewLease by the inserting lease: %v", err)
		}
	})

	// The run service accepts thread and resource ids of up to 191 characters, of any script.
	each(t, open, "LongMultibyteIDsRoundTrip", func(t *testing.T, f *fixture) {
		thread, resource := strings.Repeat("é", 190)+"😀", strings.Repeat("ü", 191)
		r := f.suspended(runOpts{ThreadID: &thread, ResourceID: &resource})
		wantStr(t, "threadId", r.ThreadID, &thread)
		wantStr(t, "resourceId", r.ResourceID, &resource)
		list, err := f.s.ListSuspended(f.ctx, runs.ListSuspendedParams{ThreadID: &thread, ResourceID: &resource}, 10, 0)
		if err != nil {
			t.Fatal(err)
		}
		wantIDs(t, "ListSuspended by the long ids", runIDs(list), r.ID)
	})

	each(t, open, "ExistingIDFailsAndChangesNothing", func(t *testing.T, f *fixture) {
		first := f.insert(runOpts{N: 1, Prompt: "first"})
		before := f.get(first.ID)
		dup := runtype.Run{ID: id(1), AgentID: "other", Prompt: "second", Status: runtype.StatusRunning, CreatedAt: at(5), UpdatedAt: at(5)}
		err := f.s.InsertRun(f.ctx, runs.NewRun{Run: dup, Snapshot: "{}", Lease: "lease-dup", TTL: hour,
			Events: []runtype.Event{{Type: runtype.EventRunStarted}, {Type: runtype.EventTextDelta, Text: "x"}}})
		if err == nil {
			t.Fatal("InsertRun of an id that exists: no error")
		}
		got := f.get(first.ID)
		if got.Prompt != "first" || got.AgentID != "agent" {
			t.Errorf("the stored run was overwritten: prompt %q, agent %q", got.Prompt, got.AgentID)
		}
		wantUnchanged(t, "InsertRun of an existing id", got, before)
		wantGapless(t, f.events(first.ID), 1)
	})
}

func testGetRun(t *testing.T, open Opener) {
	each(t, open, "UnknownRunIsNil", func(t *testing.T, f *fixture) {
		f.insert(runOpts{N: 1})
		got, err := f.s.GetRun(f.ctx, id(2))
		if err != nil || got != nil {
			t.Fatalf("GetRun of an unknown id = %+v, %v; want nil, nil", got, err)
		}
		rec, err := f.s.GetRecord(f.ctx, id(2))
		if err != nil || rec != nil {
			t.Fatalf("GetRecord of an unknown id = %+v, %v; want nil, nil", rec, err)
		}
	})

	// GetRun is the API's read of what GetRecord reads for the service's rules: the same run,
	// pending calls, decisions and late results, whatever the run's status.
	each(t, open, "RunIsTheRecordsRun", func(t *testing.T, f *fixture) {
		running := f.insert(runOpts{ThreadID: ptr("thread-1"), ResourceID: ptr("user-1")})
		waiting := f.suspended(runOpts{})
		decided := f.decide(waiting, decision(waiting, runtype.DecisionApproved, "lease-2", at(10)))
		again := f.suspend(decided, approval("call-2"), at(11), "instance-1")
		done := f.insert(runOpts{})
		f.fail(done, at(12))
		for _, id := range []string{running.ID, again.ID, done.ID} {
			rec := f.get(id)
			got, err := f.s.GetRun(f.ctx, id)
			if err != nil || got == nil {
				t.Fatalf("GetRun %s = %v, %v", id, got, err)
			}
			if !reflect.DeepEqual(*got, rec.Run) {
				t.Errorf("GetRun %s reads\n%+v\nwant (GetRecord's run)\n%+v", id, *got, rec.Run)
			}
		}
	})

	each(t, open, "DecisionsOldestFirst", func(t *testing.T, f *fixture) {
		rn := f.suspended(runOpts{})
		r := f.decide(rn, decision(rn, runtype.DecisionApproved, "lease-2", at(10)))
		rn = f.suspend(r, approval("call-2"), at(11), "instance-1")
		f.decide(rn, decision(rn, runtype.DecisionDeclined, "lease-3", at(12)))
		got := f.get(rn.ID)
		if len(got.Decisions) != 2 || got.Decisions[0].ToolCallID != "call-1" || got.Decisions[1].ToolCallID != "call-2" {
			t.Fatalf("decisions = %+v, want call-1 then call-2", got.Decisions)
		}
		if got.Decisions[0].Kind != runtype.DecisionApproved || got.Decisions[1].Kind != runtype.DecisionDeclined {
			t.Errorf("decision kinds = %s, %s; want APPROVED, DECLINED", got.Decisions[0].Kind, got.Decisions[1].Kind)
		}
	})
}

func testProgress(t *testing.T, open Opener) {
	each(t, open, "LastSeqAndStatusOfTheRunsThatExist", func(t *testing.T, f *fixture) {
		running := f.insert(runOpts{})
		f.checkpoint(running, at(5), runtype.Event{Type: runtype.EventTextDelta, Text: "a"}, runtype.Event{Type: runtype.EventTextDelta, Text: "b"})
		suspended := f.suspended(runOpts{ResourceID: ptr("user-1")})
		done := f.finished(runOpts{}, at(9))
		got, err := f.s.Progress(f.ctx, []string{running.ID, suspended.ID, done.ID, id(99)})
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]runs.Progress{
			running.ID:   {LastSeq: 3, Status: runtype.StatusRunning},
			suspended.ID: {LastSeq: suspended.LastSeq, Status: runtype.StatusSuspended, ResourceID: ptr("user-1")},
			done.ID:      {LastSeq: 2, Status: runtype.StatusCompleted},
		}
		if len(got) != len(want) {
			t.Errorf("Progress = %v, want %v (no entry for an unknown run)", got, want)
		}
		for k, w := range want {
			if g := got[k]; g.LastSeq != w.LastSeq || g.Status != w.Status || !sameStr(g.ResourceID, w.ResourceID) {
				t.Errorf("Progress[%s] = %+v, want %+v", k, got[k], w)
			}
		}
	})

	each(t, open, "NoIDs", func(t *testing.T, f *fixture) {
		f.insert(runOpts{})
		got, err := f.s.Progress(f.ctx, nil)
		if err != nil || len(got) != 0 {
			t.Fatalf("Progress(nil) = %v, %v; want empty", got, err)
		}
	})
}

func testEvents(t *testing.T, open Opener) {
	each(t, open, "AfterAndLimitInSeqOrder", func(t *testing.T, f *fixture) {
		r := f.insert(runOpts{})
		other := f.insert(runOpts{})
		f.checkpoint(other, at(3), runtype.Event{Type: runtype.EventTextDelta, Text: "other"})
		var want []runtype.Event
		want = append(want, stored(r.ID, 0, at(1), runtype.Event{Type: runtype.EventRunStarted, Status: string(runtype.StatusRunning)})...)
		for i, text := range []string{"a", "b", "c", "d"} {
			ev := runtype.Event{Type: runtype.EventTextDelta, Text: text}
			want = append(want, stored(r.ID, r.Seq, at(10+i), ev)...)
			f.checkpoint(r, at(10+i), ev)
		}
		cases := []struct {
			after int64
			limit int
			want  []runtype.Event
		}{
			{0, 100, want}, {2, 2, want[2:4]}, {4, 10, want[4:]}, {5, 10, nil}, {99, 10, nil},
		}
		for _, c := range cases {
			got, err := f.s.Events(f.ctx, r.ID, c.after, c.limit)
			if err != nil {
				t.Fatal(err)
			}
			wantEvents(t, "Events(after "+itoa(c.after)+", limit "+itoa(int64(c.limit))+")", got, c.want)
		}
		got, err := f.s.Events(f.ctx, id(99), 0, 10)
		if err != nil || len(got) != 0 {
			t.Errorf("Events of an unknown run = %v, %v; want none", got, err)
		}
	})

	each(t, open, "EveryFieldRoundTrips", func(t *testing.T, f *fixture) {
		r := f.insert(runOpts{})
		call := runtype.ToolCall{ToolCallID: "call-1", ToolName: "ask_customer", Args: json.RawMessage(`{"q":"size?","n":[1,2.5,"x"]}`),
			SuspendPayload: json.RawMessage(`{"form":{"answer":"string"}}`), Interrupted: true}
		evs := []runtype.Event{
			{Type: runtype.EventToolCallRequested, ToolCall: &call},
			{Type: runtype.EventToolResult, ToolCall: &call, Result: json.RawMessage(`{"ok":true,"text":"é \"quoted\" 😀"}`), Error: "partial"},
			{Type: runtype.EventToolCallDeclined, ToolCall: &call, Reason: "needs a receipt", DecidedBy: "alice"},
			{Type: runtype.EventRunFailed, Status: string(runtype.StatusFailed), Error: "the model call failed", ErrorCode: "MODEL_ERROR"},
			{Type: runtype.EventTextDelta, Text: "multi\nline\ttext ünïcode"},
		}
		f.checkpoint(r, at(20), evs...)
		wantEvents(t, "events", f.eventsAfter(r.ID, 1), stored(r.ID, 1, at(20), evs...))
	})
}

func testThreadHistory(t *testing.T, open Opener) {
	each(t, open, "LastMessagesOfTheThreadOldestFirst", func(t *testing.T, f *fixture) {
		var all []llm.Message
		for i := range 3 {
			r := f.insert(runOpts{ThreadID: ptr("thread-1"), ResourceID: ptr("user-1")})
			fin := finishing(r, at(10+i))
			fin.ThreadID, fin.ResourceID = ptr("thread-1"), ptr("user-1")
			fin.Memory = []llm.Message{{Role: llm.RoleUser, Content: "question " + itoa(int64(i))}, {Role: llm.RoleAssistant, Content: "answer " + itoa(int64(i))}}
			all = append(all, fin.Memory...)
			if err := f.s.Finish(f.ctx, fin); err != nil {
				t.Fatal(err)
			}
		}
		other := f.insert(runOpts{ThreadID: ptr("thread-2")})
		fin := finishing(other, at(20))
		fin.ThreadID, fin.Memory = ptr("thread-2"), []llm.Message{{Role: llm.RoleUser, Content: "elsewhere"}}
		if err := f.s.Finish(f.ctx, fin); err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			limit int
			want  []llm.Message
		}{{100, all}, {6, all}, {4, all[2:]}, {1, all[5:]}} {
			got, err := f.s.ThreadHistory(f.ctx, ptr("user-1"), "thread-1", c.limit)
			if err != nil {
				t.Fatal(err)
			}
			wantMessages(t, "ThreadHistory(limit "+itoa(int64(c.limit))+")", got, c.want)
		}
		wantMessages(t, "unknown thread", f.history(ptr("user-1"), "thread-3"), nil)
	})

	// A thread belongs to one resource (ThreadOwner): the history of another resource, or of
	// none, in that thread is empty.
	each(t, open, "OtherResourcesReadNothingOfAThread", func(t *testing.T, f *fixture) {
		f.finishInThread("thread-1", ptr("user-1"), 10)
		for _, other := range []*string{ptr("user-2"), nil, ptr("user-1 ")} {
			wantMessages(t, "thread-1 of "+show(other), f.history(other, "thread-1"), nil)
		}
		if got := f.history(ptr("user-1"), "thread-1"); len(got) != 2 || got[0].Content != "question 10" {
			t.Errorf("thread-1 of user-1: %+v, want question 10 and its answer", got)
		}
	})

	// A thread is one conversation: another thread's messages never join it, however alike
	// their ids.
	each(t, open, "ThreadIDsMatchExactly", func(t *testing.T, f *fixture) {
		r := f.insert(runOpts{ThreadID: ptr("thread-1")})
		fin := finishing(r, at(10))
		fin.ThreadID, fin.Memory = ptr("thread-1"), []llm.Message{{Role: llm.RoleUser, Content: "private"}}
		if err := f.s.Finish(f.ctx, fin); err != nil {
			t.Fatal(err)
		}
		for _, other := range []string{"thread-1 ", "THREAD-1", "thread-"} {
			wantMessages(t, "thread "+strconv.Quote(other), f.history(nil, other), nil)
		}
		wantMessages(t, "thread-1", f.history(nil, "thread-1"), fin.Memory)
	})
}

func wantMessages(t *testing.T, what string, got, want []llm.Message) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d messages %v, want %d %v", what, len(got), got, len(want), want)
	}
	for i := range got {
		if got[i].Role != want[i].Role || got[i].Content != want[i].Content {
			t.Errorf("%s: message %d = %s %q, want %s %q", what, i, got[i].Role, got[i].Content, want[i].Role, want[i].Content)
		}
	}
}
