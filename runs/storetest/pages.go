package storetest

import (
	"fmt"
	"reflect"
	"sort"
	"sync"
	"testing"
	"time"

	"interlock/runs"
	"interlock/runtype"
)

// pagedRun is what the suite knows of a suspended run of the paging data set.
type pagedRun struct {
	id               string
	agent            string
	thread, resource string
	created          time.Time
	parent           bool
}

// inHours is t0 plus n hours.
func inHours(n int) time.Time { return t0.Add(time.Duration(n) * time.Hour) }

// pagingSet stores 60 suspended top-level runs whose creation times come in threes (equal
// times, ids in another order) seven hours apart, over six days, over two agents and two resources with three threads each, plus a
// sub-agent's suspended inner run and runs that are not suspended; it returns the suspended
// runs.
func (f *fixture) pagingSet() []pagedRun {
	f.t.Helper()
	var out []pagedRun
	for k := 0; k < 60; k++ {
		r := pagedRun{
			id: id(1 + k*37%97), agent: []string{"a", "b"}[k%2], thread: fmt.Sprintf("t%d", k%3),
			resource: fmt.Sprintf("r%d", k%4/2), created: runtype.StoredTime(inHours(k / 3 * 7)),
		}
		if r.resource != "r0" {
			r.thread += "-" + r.resource // a thread belongs to one resource
		}
		f.suspended(runOpts{N: 1 + k*37%97, AgentID: r.agent, ThreadID: ptr(r.thread), ResourceID: ptr(r.resource), CreatedAt: r.created})
		out = append(out, r)
	}
	parent := out[10]
	f.suspended(runOpts{N: 200, AgentID: "sub", ParentRunID: ptr(parent.id), ThreadID: ptr("t0"), ResourceID: ptr("r0"), CreatedAt: inHours(50)})
	out = append(out, pagedRun{id: id(200), agent: "sub", thread: "t0", resource: "r0", created: runtype.StoredTime(inHours(50)), parent: true})
	f.insert(runOpts{N: 201, AgentID: "a", ThreadID: ptr("t0"), ResourceID: ptr("r0"), CreatedAt: at(120)})
	f.finished(runOpts{N: 202, AgentID: "a", ThreadID: ptr("t0"), ResourceID: ptr("r0"), CreatedAt: at(121)}, at(122))
	return out
}

// matching lists the runs keep admits in suspendedRuns order: newest createdAt first, then id
// descending.
func matching(set []pagedRun, keep func(pagedRun) bool) []string {
	var sel []pagedRun
	for _, r := range set {
		if keep(r) {
			sel = append(sel, r)
		}
	}
	sort.Slice(sel, func(i, j int) bool {
		if !sel[i].created.Equal(sel[j].created) {
			return sel[i].created.After(sel[j].created)
		}
		return sel[i].id > sel[j].id
	})
	ids := make([]string, len(sel))
	for i, r := range sel {
		ids[i] = r.id
	}
	return ids
}

// testPages checks ListSuspended's pages at every offset, on filters whose indexes differ:
// pages of any size put together are the whole answer in order, each run once, and each run
// of a page is read in full.
func testPages(t *testing.T, open Opener) {
	from, to := runtype.StoredTime(inHours(30)), runtype.StoredTime(inHours(90))
	cases := []struct {
		name string
		p    runs.ListSuspendedParams
		keep func(pagedRun) bool
	}{
		{"every top-level run", runs.ListSuspendedParams{}, func(r pagedRun) bool { return !r.parent }},
		{"agent a", runs.ListSuspendedParams{AgentID: ptr("a")}, func(r pagedRun) bool { return r.agent == "a" }},
		{"agent b and thread t1", runs.ListSuspendedParams{AgentID: ptr("b"), ThreadID: ptr("t1")}, func(r pagedRun) bool { return r.agent == "b" && r.thread == "t1" }},
		{"agent a, resource r1 and a date range", runs.ListSuspendedParams{AgentID: ptr("a"), ResourceID: ptr("r1"), FromDate: &from, ToDate: &to},
			func(r pagedRun) bool {
				return r.agent == "a" && r.resource == "r1" && !r.created.Before(from) && !r.created.After(to)
			}},
		{"thread t0", runs.ListSuspendedParams{ThreadID: ptr("t0")}, func(r pagedRun) bool { return !r.parent && r.thread == "t0" }},
		{"scope r0", runs.ListSuspendedParams{Resources: []string{"r0"}}, func(r pagedRun) bool { return !r.parent && r.resource == "r0" }},
	}

	each(t, open, "PagesOfAnySizeMakeTheWholeAnswerInOrder", func(t *testing.T, f *fixture) {
		set := f.pagingSet()
		for _, c := range cases {
			want := matching(set, c.keep)
			if len(want) < 5 {
				t.Fatalf("%s: only %d runs match; the case tests nothing", c.name, len(want))
			}
			n, err := f.s.CountSuspended(f.ctx, c.p)
			if err != nil {
				t.Fatal(err)
			}
			if n != int64(len(want)) {
				t.Errorf("CountSuspended(%s) = %d, want %d", c.name, n, len(want))
			}
			for _, size := range []int{1, 4, 7, len(want), len(want) + 3} {
				var got []string
				for offset := 0; offset < len(want)+size; offset += size {
					list, err := f.s.ListSuspended(f.ctx, c.p, size, offset)
					if err != nil {
						t.Fatalf("%s, limit %d offset %d: %v", c.name, size, offset, err)
					}
					if len(list) > size {
						t.Fatalf("%s, limit %d offset %d: %d runs", c.name, size, offset, len(list))
					}
					got = append(got, runIDs(list)...)
				}
				wantIDs(t, fmt.Sprintf("%s in pages of %d", c.name, size), got, want...)
			}
		}
	})

	each(t, open, "ADeepPageReadsItsRunsInFull", func(t *testing.T, f *fixture) {
		f.pagingSet()
		list, err := f.s.ListSuspended(f.ctx, runs.ListSuspendedParams{}, 5, 40)
		if err != nil {
			t.Fatal(err)
		}
		if len(list) != 5 {
			t.Fatalf("page at offset 40 has %d runs, want 5", len(list))
		}
		for _, got := range list {
			want := f.get(got.ID).Run // the run without what only the service's rules read
			if !reflect.DeepEqual(*got, want) {
				t.Errorf("run %s of a deep page reads\n%+v\nwant (GetRecord's run)\n%+v", got.ID, *got, want)
			}
		}
	})
}

// wantCounts checks CountSuspended of the inbox and of each agent against the runs listed.
func wantCounts(t *testing.T, f *fixture, when string, agents ...string) {
	t.Helper()
	for _, p := range append([]runs.ListSuspendedParams{{}}, func() []runs.ListSuspendedParams {
		var ps []runs.ListSuspendedParams
		for _, a := range agents {
			ps = append(ps, runs.ListSuspendedParams{AgentID: ptr(a)})
		}
		return ps
	}()...) {
		list, err := f.s.ListSuspended(f.ctx, p, 1000, 0)
		if err != nil {
			t.Fatal(err)
		}
		n, err := f.s.CountSuspended(f.ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		if n != int64(len(list)) {
			t.Errorf("%s: CountSuspended(agent %s) = %d, but %d runs are listed", when, show(p.AgentID), n, len(list))
		}
	}
}

// testCounts checks that CountSuspended follows every way into and out of the suspended set:
// suspensions, decisions of each kind, a run suspending again, a supervisor surfacing its
// sub-agent's call and taking it back, writes that fail, and concurrent decisions.
func testCounts(t *testing.T, open Opener) {
	each(t, open, "FollowSuspensionsAndDecisions", func(t *testing.T, f *fixture) {
		wantCounts(t, f, "empty", "a")
		var suspended []*runs.Record
		for i := 0; i < 6; i++ {
			suspended = append(suspended, f.suspended(runOpts{AgentID: []string{"a", "b"}[i%2]}))
		}
		wantCounts(t, f, "six suspended", "a", "b", "c")
		r := f.decide(suspended[0], decision(suspended[0], runtype.DecisionApproved, "lease-x", at(50)))
		f.decide(suspended[1], decision(suspended[1], runtype.DecisionDeclined, "lease-y", at(50)))
		wantCounts(t, f, "two decided", "a", "b")
		f.suspend(r, approval("call-2"), at(51), "instance-1")
		wantCounts(t, f, "one suspended again", "a", "b")
		// A decision that loses its compare-and-set changes nothing.
		if err := f.s.Decide(f.ctx, decision(suspended[1], runtype.DecisionApproved, "lease-z", at(52))); err == nil {
			t.Fatal("a stale decision was accepted")
		}
		wantCounts(t, f, "a stale decision", "a", "b")
	})

	each(t, open, "FollowASupervisor", func(t *testing.T, f *fixture) {
		parent, child := f.delegated()
		call := approval("inner-1")
		s := suspension(child, call, at(30), "instance-1")
		s.Ancestors = []runs.AncestorWrite{surfaced(parent, call)}
		if err := f.s.Suspend(f.ctx, s); err != nil {
			t.Fatal(err)
		}
		wantCounts(t, f, "surfaced", "boss", "helper")
		n, err := f.s.CountSuspended(f.ctx, runs.ListSuspendedParams{})
		if err != nil || n != 1 {
			t.Fatalf("inbox count = %d, %v; want 1 (the supervisor, not its sub-agent's run)", n, err)
		}
		p := f.get(parent.ID)
		c := f.get(child.ID)
		d := decision(c, runtype.DecisionApproved, "new-lease", at(40))
		pc := p.ToolCalls[0]
		d.Ancestors = []runs.AncestorWrite{{RunID: p.ID, Version: p.Version, After: p.LastSeq, ToolCallID: pc.ToolCallID, Call: pc,
			Events: []runtype.Event{{Type: runtype.EventToolCallApproved, ToolCall: &pc}, {Type: runtype.EventRunResumed, Status: string(runtype.StatusRunning)}}}}
		if err := f.s.Decide(f.ctx, d); err != nil {
			t.Fatal(err)
		}
		wantCounts(t, f, "decided", "boss", "helper")
	})

	each(t, open, "ConcurrentDecisionsCountOnce", func(t *testing.T, f *fixture) {
		var list []*runs.Record
		for i := 0; i < 8; i++ {
			list = append(list, f.suspended(runOpts{AgentID: "a"}))
		}
		var wg sync.WaitGroup
		for _, r := range list {
			for k := 0; k < 2; k++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					f.s.Decide(f.ctx, decision(r, runtype.DecisionApproved, fmt.Sprintf("lease-%s-%d", r.ID, k), at(60)))
				}()
			}
		}
		wg.Wait()
		wantCounts(t, f, "after racing decisions", "a")
		n, err := f.s.CountSuspended(f.ctx, runs.ListSuspendedParams{AgentID: ptr("a")})
		if err != nil || n != 0 {
			t.Fatalf("count after every run was decided = %d, %v; want 0", n, err)
		}
	})
}
