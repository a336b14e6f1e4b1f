package storetest

import (
	"fmt"
	"testing"
	"time"

	"interlock/runs"
	"interlock/runtype"
)

// inbox is a set of runs to discover: suspended ones whose createdAt order, id order and
// filters all differ, a sub-agent's suspended inner run, and runs that are not suspended.
type inbox struct {
	s1, s2, s3, s4, s5 string // suspended; s4 is the inner run of a sub-agent under s3
}

func (f *fixture) inbox() inbox {
	f.t.Helper()
	s3 := f.suspended(runOpts{N: 1, AgentID: "b", ThreadID: ptr("t1"), ResourceID: ptr("r2"), CreatedAt: at(3)})
	s2 := f.suspended(runOpts{N: 2, AgentID: "a", ThreadID: ptr("t2"), ResourceID: ptr("r1"), CreatedAt: at(2)})
	s1 := f.suspended(runOpts{N: 5, AgentID: "a", ThreadID: ptr("t1"), ResourceID: ptr("r2"), CreatedAt: at(1)})
	s5 := f.suspended(runOpts{N: 7, AgentID: "a", CreatedAt: at(2)}) // same createdAt as s2
	s4 := f.suspended(runOpts{N: 9, AgentID: "sub", ParentRunID: ptr(s3.ID), ThreadID: ptr("t1"), ResourceID: ptr("r2"), CreatedAt: at(4)})
	f.insert(runOpts{N: 3, AgentID: "a", ThreadID: ptr("t1"), ResourceID: ptr("r2"), CreatedAt: at(5)})
	f.finished(runOpts{N: 4, AgentID: "a", ThreadID: ptr("t1"), ResourceID: ptr("r2"), CreatedAt: at(6)}, at(7))
	return inbox{s1: s1.ID, s2: s2.ID, s3: s3.ID, s4: s4.ID, s5: s5.ID}
}

// filterCase is a discovery filter and the runs it finds, in order.
type filterCase struct {
	name string
	p    runs.ListSuspendedParams
	want []string
}

func (b inbox) cases() []filterCase {
	day := func(n int) *time.Time { t := runtype.StoredTime(at(n)); return &t }
	return []filterCase{
		{"no filter: every top-level suspended run", runs.ListSuspendedParams{}, []string{b.s3, b.s5, b.s2, b.s1}},
		{"agent a", runs.ListSuspendedParams{AgentID: ptr("a")}, []string{b.s5, b.s2, b.s1}},
		{"agent b: not its sub-agent's runs", runs.ListSuspendedParams{AgentID: ptr("b")}, []string{b.s3}},
		{"a sub-agent: its inner runs", runs.ListSuspendedParams{AgentID: ptr("sub")}, []string{b.s4}},
		{"thread t1: top-level only", runs.ListSuspendedParams{ThreadID: ptr("t1")}, []string{b.s3, b.s1}},
		{"thread t1 of the sub-agent", runs.ListSuspendedParams{AgentID: ptr("sub"), ThreadID: ptr("t1")}, []string{b.s4}},
		{"resource r1", runs.ListSuspendedParams{ResourceID: ptr("r1")}, []string{b.s2}},
		{"resource r2", runs.ListSuspendedParams{ResourceID: ptr("r2")}, []string{b.s3, b.s1}},
		{"from, inclusive", runs.ListSuspendedParams{FromDate: day(2)}, []string{b.s3, b.s5, b.s2}},
		{"to, inclusive", runs.ListSuspendedParams{ToDate: day(2)}, []string{b.s5, b.s2, b.s1}},
		{"from = to", runs.ListSuspendedParams{FromDate: day(2), ToDate: day(2)}, []string{b.s5, b.s2}},
		{"a range with no run", runs.ListSuspendedParams{FromDate: day(10), ToDate: day(20)}, nil},
		{"agent, thread and resource", runs.ListSuspendedParams{AgentID: ptr("a"), ThreadID: ptr("t1"), ResourceID: ptr("r2")}, []string{b.s1}},
		{"an unknown thread", runs.ListSuspendedParams{ThreadID: ptr("nope")}, nil},
		{"an unknown agent", runs.ListSuspendedParams{AgentID: ptr("nope")}, nil},
		// A principal's scope: never a run of another resource, nor one without a resource.
		{"scope r1 and r2", runs.ListSuspendedParams{Resources: []string{"r1", "r2"}}, []string{b.s3, b.s2, b.s1}},
		{"scope r2", runs.ListSuspendedParams{Resources: []string{"r2"}}, []string{b.s3, b.s1}},
		{"an empty scope", runs.ListSuspendedParams{Resources: []string{}}, nil},
		{"scope r1, resource r2", runs.ListSuspendedParams{ResourceID: ptr("r2"), Resources: []string{"r1"}}, nil},
		{"scope r2, agent a, thread t1", runs.ListSuspendedParams{AgentID: ptr("a"), ThreadID: ptr("t1"), Resources: []string{"r2"}}, []string{b.s1}},
		{"scope r1, thread t1 (r2's)", runs.ListSuspendedParams{ThreadID: ptr("t1"), Resources: []string{"r1"}}, nil},
		// The external filter: the agents admitted, or left out (top-level runs only, as without).
		{"agents b", runs.ListSuspendedParams{Agents: []string{"b"}}, []string{b.s3}},
		{"agents a and b", runs.ListSuspendedParams{Agents: []string{"a", "b"}}, []string{b.s3, b.s5, b.s2, b.s1}},
		{"no agent admitted", runs.ListSuspendedParams{Agents: []string{}}, nil},
		{"agents sub: inner runs are not top-level", runs.ListSuspendedParams{Agents: []string{"sub"}}, nil},
		{"not agent a", runs.ListSuspendedParams{NotAgents: []string{"a"}}, []string{b.s3}},
		{"not agents a and b", runs.ListSuspendedParams{NotAgents: []string{"a", "b"}}, nil},
		{"agents a, resource r2", runs.ListSuspendedParams{Agents: []string{"a"}, ResourceID: ptr("r2")}, []string{b.s1}},
	}
}

func testCountSuspended(t *testing.T, open Opener) {
	each(t, open, "CountsMatchesOfEveryFilter", func(t *testing.T, f *fixture) {
		for _, c := range f.inbox().cases() {
			n, err := f.s.CountSuspended(f.ctx, c.p)
			if err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			if n != int64(len(c.want)) {
				t.Errorf("CountSuspended(%s) = %d, want %d", c.name, n, len(c.want))
			}
		}
	})

	each(t, open, "IgnoresPagination", func(t *testing.T, f *fixture) {
		f.inbox()
		n, err := f.s.CountSuspended(f.ctx, runs.ListSuspendedParams{Page: ptr(1), PerPage: ptr(1)})
		if err != nil || n != 4 {
			t.Errorf("CountSuspended with page 1 of 1 = %d, %v; want 4 (the total)", n, err)
		}
	})
}

func testListSuspended(t *testing.T, open Opener) {
	// Agent, thread and resource ids are compared exactly: a resource is who may see a run,
	// and a thread is whose conversation a run continues.
	each(t, open, "FiltersMatchIDsExactly", func(t *testing.T, f *fixture) {
		r := f.suspended(runOpts{AgentID: "agent-a", ThreadID: ptr("thread-1"), ResourceID: ptr("user-1")})
		for _, c := range []struct {
			name string
			p    runs.ListSuspendedParams
		}{
			{"agent with a trailing space", runs.ListSuspendedParams{AgentID: ptr("agent-a ")}},
			{"agent in capitals", runs.ListSuspendedParams{AgentID: ptr("AGENT-A")}},
			{"thread with a trailing space", runs.ListSuspendedParams{ThreadID: ptr("thread-1 ")}},
			{"thread in capitals", runs.ListSuspendedParams{ThreadID: ptr("THREAD-1")}},
			{"resource with a trailing space", runs.ListSuspendedParams{ResourceID: ptr("user-1 ")}},
			{"resource in capitals", runs.ListSuspendedParams{ResourceID: ptr("USER-1")}},
			{"a prefix of the resource", runs.ListSuspendedParams{ResourceID: ptr("user-")}},
			{"a scope with a trailing space", runs.ListSuspendedParams{Resources: []string{"user-1 "}}},
			{"a scope in capitals", runs.ListSuspendedParams{Resources: []string{"USER-1", "other"}}},
		} {
			list, err := f.s.ListSuspended(f.ctx, c.p, 10, 0)
			if err != nil {
				t.Fatal(err)
			}
			n, err := f.s.CountSuspended(f.ctx, c.p)
			if err != nil {
				t.Fatal(err)
			}
			if len(list) != 0 || n != 0 {
				t.Errorf("%s finds %v (count %d), want nothing: ids must match exactly", c.name, runIDs(list), n)
			}
		}
		list, err := f.s.ListSuspended(f.ctx, runs.ListSuspendedParams{AgentID: ptr("agent-a"), ThreadID: ptr("thread-1"), ResourceID: ptr("user-1")}, 10, 0)
		if err != nil {
			t.Fatal(err)
		}
		wantIDs(t, "the exact ids", runIDs(list), r.ID)
	})

	each(t, open, "EveryFilterNewestFirstThenIDDescending", func(t *testing.T, f *fixture) {
		for _, c := range f.inbox().cases() {
			list, err := f.s.ListSuspended(f.ctx, c.p, 100, 0)
			if err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			wantIDs(t, "ListSuspended("+c.name+")", runIDs(list), c.want...)
		}
	})

	each(t, open, "LimitAndOffsetPagesNeverOverlap", func(t *testing.T, f *fixture) {
		b := f.inbox()
		all := []string{b.s3, b.s5, b.s2, b.s1}
		for _, c := range []struct{ limit, offset, from, to int }{{2, 0, 0, 2}, {2, 2, 2, 4}, {2, 3, 3, 4}, {2, 4, 4, 4}, {1, 1, 1, 2}, {10, 0, 0, 4}} {
			list, err := f.s.ListSuspended(f.ctx, runs.ListSuspendedParams{}, c.limit, c.offset)
			if err != nil {
				t.Fatal(err)
			}
			wantIDs(t, fmt.Sprintf("ListSuspended(limit %d, offset %d)", c.limit, c.offset), runIDs(list), all[c.from:c.to]...)
		}
	})

	each(t, open, "EachWithItsPendingCallsAndDecisions", func(t *testing.T, f *fixture) {
		rn := f.suspended(runOpts{})
		r := f.decide(rn, decision(rn, runtype.DecisionApproved, "lease-2", at(20)))
		f.suspend(r, approval("call-2"), at(21), "instance-1")
		list, err := f.s.ListSuspended(f.ctx, runs.ListSuspendedParams{}, 10, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(list) != 1 {
			t.Fatalf("ListSuspended = %v, want one run", runIDs(list))
		}
		got := list[0]
		if len(got.ToolCalls) != 1 || got.ToolCalls[0].ToolCallID != "call-2" {
			t.Errorf("pending calls = %+v, want call-2", got.ToolCalls)
		}
		wantCall(t, "pending call", got.ToolCalls[0], approval("call-2"))
		if len(got.Decisions) != 1 || got.Decisions[0].ToolCallID != "call-1" || got.Decisions[0].Kind != runtype.DecisionApproved {
			t.Errorf("decisions = %+v, want call-1 APPROVED", got.Decisions)
		}
		if got.SuspendedAt == nil || !got.SuspendedAt.Equal(runtype.StoredTime(at(21))) {
			t.Errorf("suspendedAt = %v, want %v (the last suspension)", got.SuspendedAt, runtype.StoredTime(at(21)))
		}
		wantTime(t, "createdAt", got.CreatedAt, at(1))
		// No snapshot: a listed run is a runtype.Run, which has none (only records do).
	})
}

func testListRecent(t *testing.T, open Opener) {
	type history struct{ c1, c2, c3, c4, suspended, running string }
	build := func(f *fixture) history {
		c2 := f.insert(runOpts{N: 1, AgentID: "a", ThreadID: ptr("t2"), ResourceID: ptr("r1")})
		f.fail(c2, at(12))
		c3 := f.finished(runOpts{N: 2, AgentID: "b", ThreadID: ptr("t1"), ResourceID: ptr("r2")}, at(12)) // same updatedAt as c2
		c1 := f.finished(runOpts{N: 3, AgentID: "a", ThreadID: ptr("t1"), ResourceID: ptr("r2")}, at(10)) // t1 is r2's
		rn := f.suspended(runOpts{N: 4, AgentID: "a"})
		declined := decision(rn, runtype.DecisionDeclined, "lease-2", at(8))
		declined.DecidedBy = ptr("alice")
		c4 := f.decide(rn, declined)
		f.finish(c4, at(11))
		s := f.suspended(runOpts{N: 5, CreatedAt: at(5)})
		r := f.insert(runOpts{N: 6, CreatedAt: at(6)})
		return history{c1: c1.ID, c2: c2.ID, c3: c3.ID, c4: c4.ID, suspended: s.ID, running: r.ID}
	}
	finished := []runtype.Status{runtype.StatusCompleted, runtype.StatusFailed}

	each(t, open, "StatusesFilterMostRecentlyUpdatedFirst", func(t *testing.T, f *fixture) {
		h := build(f)
		for _, c := range []struct {
			name string
			p    runs.RecentParams
			want []string
		}{
			{"finished", runs.RecentParams{Statuses: finished, PerPage: 100}, []string{h.c3, h.c2, h.c4, h.c1}},
			{"completed", runs.RecentParams{Statuses: []runtype.Status{runtype.StatusCompleted}, PerPage: 100}, []string{h.c3, h.c4, h.c1}},
			{"failed", runs.RecentParams{Statuses: []runtype.Status{runtype.StatusFailed}, PerPage: 100}, []string{h.c2}},
			{"suspended", runs.RecentParams{Statuses: []runtype.Status{runtype.StatusSuspended}, PerPage: 100}, []string{h.suspended}},
			{"running and suspended", runs.RecentParams{Statuses: []runtype.Status{runtype.StatusRunning, runtype.StatusSuspended}, PerPage: 100}, []string{h.running, h.suspended}},
			{"agent a", runs.RecentParams{Statuses: finished, AgentID: ptr("a"), PerPage: 100}, []string{h.c2, h.c4, h.c1}},
			{"agents b", runs.RecentParams{Statuses: finished, Agents: []string{"b"}, PerPage: 100}, []string{h.c3}},
			{"no agent admitted", runs.RecentParams{Statuses: finished, Agents: []string{}, PerPage: 100}, nil},
			{"not agent a", runs.RecentParams{Statuses: finished, NotAgents: []string{"a"}, PerPage: 100}, []string{h.c3}},
			{"thread t1", runs.RecentParams{Statuses: finished, ThreadID: ptr("t1"), PerPage: 100}, []string{h.c3, h.c1}},
			{"resource r1", runs.RecentParams{Statuses: finished, ResourceID: ptr("r1"), PerPage: 100}, []string{h.c2}},
			{"agent a, thread t1, resource r2", runs.RecentParams{Statuses: finished, AgentID: ptr("a"), ThreadID: ptr("t1"), ResourceID: ptr("r2"), PerPage: 100}, []string{h.c1}},
			{"scope r2", runs.RecentParams{Statuses: finished, Resources: []string{"r2"}, PerPage: 100}, []string{h.c3, h.c1}},
			{"without resource", runs.RecentParams{Statuses: finished, WithoutResource: true, PerPage: 100}, []string{h.c4}},
			{"without resource, scope r1", runs.RecentParams{Statuses: finished, WithoutResource: true, Resources: []string{"r1"}, PerPage: 100}, nil},
			{"scope r1, r2: not runs without a resource", runs.RecentParams{Statuses: finished, Resources: []string{"r1", "r2"}, PerPage: 100}, []string{h.c3, h.c2, h.c1}},
			{"scope r1 with a trailing space", runs.RecentParams{Statuses: finished, Resources: []string{"r1 "}, PerPage: 100}, nil},
			{"an empty scope", runs.RecentParams{Statuses: finished, Resources: []string{}, PerPage: 100}, nil},
			{"declined", runs.RecentParams{Statuses: finished, Decision: ptr(runtype.DecisionDeclined), PerPage: 100}, []string{h.c4}},
			{"approved: none", runs.RecentParams{Statuses: finished, Decision: ptr(runtype.DecisionApproved), PerPage: 100}, nil},
			{"decided by alice", runs.RecentParams{Statuses: finished, DecidedBy: ptr("alice"), PerPage: 100}, []string{h.c4}},
			{"decided by alice, padded", runs.RecentParams{Statuses: finished, DecidedBy: ptr("alice "), PerPage: 100}, nil},
			{"decided by ALI: any case", runs.RecentParams{Statuses: finished, DecidedBy: ptr("ALI"), PerPage: 100}, []string{h.c4}},
			{"decided by lic: a substring", runs.RecentParams{Statuses: finished, DecidedBy: ptr("lic"), PerPage: 100}, []string{h.c4}},
			{"decided by %: matched as itself", runs.RecentParams{Statuses: finished, DecidedBy: ptr("%"), PerPage: 100}, nil},
			{"decided by a_ice: _ matched as itself", runs.RecentParams{Statuses: finished, DecidedBy: ptr("a_ice"), PerPage: 100}, nil},
			{"decided by !: matched as itself", runs.RecentParams{Statuses: finished, DecidedBy: ptr("!"), PerPage: 100}, nil},
			{"declined by bob: none", runs.RecentParams{Statuses: finished, Decision: ptr(runtype.DecisionDeclined), DecidedBy: ptr("bob"), PerPage: 100}, nil},
			{"declined by alice", runs.RecentParams{Statuses: finished, Decision: ptr(runtype.DecisionDeclined), DecidedBy: ptr("alice"), PerPage: 100}, []string{h.c4}},
		} {
			list, total, err := f.s.ListRecent(f.ctx, c.p)
			if err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			wantIDs(t, "ListRecent("+c.name+")", runIDs(list), c.want...)
			if total != int64(len(c.want)) {
				t.Errorf("ListRecent(%s) total = %d, want %d", c.name, total, len(c.want))
			}
			// No snapshot: a listed run is a runtype.Run, which has none (only records do).
		}
	})

	each(t, open, "FiltersMatchIDsExactly", func(t *testing.T, f *fixture) {
		f.finished(runOpts{AgentID: "agent-a", ThreadID: ptr("thread-1"), ResourceID: ptr("user-1")}, at(10))
		for name, p := range map[string]runs.RecentParams{
			"agent with a trailing space":    {AgentID: ptr("agent-a ")},
			"thread with a trailing space":   {ThreadID: ptr("thread-1 ")},
			"resource with a trailing space": {ResourceID: ptr("user-1 ")},
			"resource in capitals":           {ResourceID: ptr("USER-1")},
		} {
			p.Statuses, p.PerPage = finished, 10
			list, total, err := f.s.ListRecent(f.ctx, p)
			if err != nil {
				t.Fatal(err)
			}
			if len(list) != 0 || total != 0 {
				t.Errorf("%s finds %v (total %d), want nothing: ids must match exactly", name, runIDs(list), total)
			}
		}
	})

	each(t, open, "PagesWithTheTotalOfAllMatches", func(t *testing.T, f *fixture) {
		h := build(f)
		all := []string{h.c3, h.c2, h.c4, h.c1}
		for page, want := range [][]string{all[:3], all[3:], nil} {
			list, total, err := f.s.ListRecent(f.ctx, runs.RecentParams{Statuses: finished, Page: page, PerPage: 3})
			if err != nil {
				t.Fatal(err)
			}
			wantIDs(t, fmt.Sprintf("ListRecent(page %d of 3)", page), runIDs(list), want...)
			if total != 4 {
				t.Errorf("page %d: total = %d, want 4", page, total)
			}
		}
	})

	each(t, open, "WithTheirDecisions", func(t *testing.T, f *fixture) {
		h := build(f)
		list, _, err := f.s.ListRecent(f.ctx, runs.RecentParams{Statuses: finished, PerPage: 100})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range list {
			want := 0
			if r.ID == h.c4 {
				want = 1
			}
			if len(r.Decisions) != want {
				t.Errorf("%s: %d decisions, want %d", r.ID, len(r.Decisions), want)
			}
			if r.ID == h.c4 && r.Decisions[0].Kind != runtype.DecisionDeclined {
				t.Errorf("decision of %s = %s, want DECLINED", r.ID, r.Decisions[0].Kind)
			}
		}
	})
}
