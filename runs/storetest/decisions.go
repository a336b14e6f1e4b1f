package storetest

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"interlock/runs"
	"interlock/runtype"
)

// decidedRun inserts a run of resource (nil: none) created at createdAt, suspends it on an
// approval at createdAt and decides it at decidedAt: the run as stored, with its decision.
func (f *fixture) decidedRun(resource *string, kind runtype.DecisionKind, by *string, createdAt, decidedAt time.Time) *runs.Record {
	f.t.Helper()
	r := f.insert(runOpts{ResourceID: resource, CreatedAt: createdAt})
	call := approval("call-1")
	if kind == runtype.DecisionExpired {
		call = expiring("call-1", decidedAt) // an expiry stands at the call's deadline
	}
	s := f.suspend(r, call, createdAt, "instance-1")
	d := decision(s, kind, "lease-d", decidedAt)
	d.DecidedBy = by
	if kind == runtype.DecisionApproved {
		d.EditedArgs = json.RawMessage(`{"amount":20,"order":42}`)
		d.Receipt = ptr("receipt-of-" + s.ID)
	}
	if kind == runtype.DecisionDeclined {
		d.Reason = ptr("too much")
	}
	f.decide(s, d)
	return f.get(s.ID)
}

// decisionsOf reads every page of q, limit per page, and returns the decisions' run ids in the
// order read.
func (f *fixture) decisionsOf(q runs.DecisionQuery) ([]runs.DecisionRecord, []string) {
	f.t.Helper()
	var all []runs.DecisionRecord
	var ids []string
	for pages := 0; ; pages++ {
		if pages > 100 {
			f.t.Fatal("Decisions does not end")
		}
		page, err := f.s.Decisions(f.ctx, q)
		if err != nil {
			f.t.Fatalf("Decisions: %v", err)
		}
		if len(page) > q.Limit {
			f.t.Fatalf("Decisions gave %d, more than the limit %d", len(page), q.Limit)
		}
		for _, d := range page {
			all = append(all, d)
			ids = append(ids, d.RunID)
		}
		if len(page) < q.Limit {
			return all, ids
		}
		last := page[len(page)-1]
		q.After = &runs.DecisionCursor{At: last.DecidedAt, ID: last.ID}
	}
}

func testDecisions(t *testing.T, open Opener) {
	each(t, open, "RecordsEveryFieldOfADecision", func(t *testing.T, f *fixture) {
		r := f.decidedRun(ptr("acme"), runtype.DecisionApproved, ptr("alice"), at(10), at(70))
		got, _ := f.decisionsOf(runs.DecisionQuery{From: at(0), To: at(1000), Limit: 10})
		if len(got) != 1 {
			t.Fatalf("decisions = %+v, want 1", got)
		}
		d := got[0]
		if d.RunID != r.ID || d.ToolCallID != "call-1" || d.ToolName != "issue_refund" || d.Kind != runtype.DecisionApproved || d.AgentID != "agent" || d.ID == 0 {
			t.Fatalf("decision = %+v", d)
		}
		wantStr(t, "decidedBy", d.DecidedBy, ptr("alice"))
		wantStr(t, "resource", d.ResourceID, ptr("acme"))
		wantStr(t, "receipt", d.Receipt, ptr("receipt-of-"+r.ID))
		wantTime(t, "decidedAt", d.DecidedAt, at(70))
		wantTime(t, "askedAt", d.AskedAt, at(10))
		if !sameJSON(d.Args, json.RawMessage(`{"amount":30,"order":42}`)) || !sameJSON(d.EditedArgs, json.RawMessage(`{"amount":20,"order":42}`)) {
			t.Fatalf("args %s, edited %s", d.Args, d.EditedArgs)
		}
		if d.DecidedAt.Location() != time.UTC || d.AskedAt.Location() != time.UTC {
			t.Fatal("times are not in UTC")
		}
	})

	each(t, open, "InTheOrderTakenAcrossPagesWithinThePeriod", func(t *testing.T, f *fixture) {
		// Run numbers (ids) in another order than the decisions' times; three decisions at
		// the same instant, which the id orders; one just before the period, one at its end.
		times := []int{50, 20, 30, 30, 30, 40, 9, 100, 60}
		recs := make([]*runs.Record, len(times))
		for i, s := range times {
			recs[i] = f.decidedRun(nil, runtype.DecisionDeclined, ptr("bob"), at(1), at(s))
		}
		f.suspended(runOpts{}) // a call that waits is no decision
		for _, limit := range []int{1, 2, 3, 500} {
			got, ids := f.decisionsOf(runs.DecisionQuery{From: at(10), To: at(100), Limit: limit})
			want := []string{recs[1].ID, recs[2].ID, recs[3].ID, recs[4].ID, recs[5].ID, recs[0].ID, recs[8].ID}
			wantIDs(t, fmt.Sprintf("decisions in pages of %d", limit), ids, want...)
			for i := 1; i < len(got); i++ {
				if got[i].DecidedAt.Equal(got[i-1].DecidedAt) && got[i].ID <= got[i-1].ID {
					t.Fatalf("ties not in id order: %d after %d", got[i].ID, got[i-1].ID)
				}
			}
		}
		// From is inclusive, To exclusive: periods that meet split the decisions between them.
		_, first := f.decisionsOf(runs.DecisionQuery{From: at(0), To: at(30), Limit: 10})
		_, second := f.decisionsOf(runs.DecisionQuery{From: at(30), To: at(101), Limit: 10})
		wantIDs(t, "before 30", first, recs[6].ID, recs[1].ID)
		wantIDs(t, "from 30", second, recs[2].ID, recs[3].ID, recs[4].ID, recs[5].ID, recs[0].ID, recs[8].ID, recs[7].ID)
	})

	each(t, open, "OnlyTheResourcesInScope", func(t *testing.T, f *fixture) {
		a := f.decidedRun(ptr("acme"), runtype.DecisionApproved, ptr("alice"), at(1), at(10))
		b := f.decidedRun(ptr("bigco"), runtype.DecisionApproved, ptr("alice"), at(1), at(11))
		n := f.decidedRun(nil, runtype.DecisionApproved, ptr("alice"), at(1), at(12))
		c := f.decidedRun(ptr("acme "), runtype.DecisionApproved, ptr("alice"), at(1), at(13)) // another resource on MySQL too
		for _, tc := range []struct {
			resources []string
			want      []string
		}{
			{nil, []string{a.ID, b.ID, n.ID, c.ID}},
			{[]string{"acme"}, []string{a.ID}},
			{[]string{"acme", "bigco"}, []string{a.ID, b.ID}},
			{[]string{}, nil},
		} {
			_, ids := f.decisionsOf(runs.DecisionQuery{From: at(0), To: at(100), Resources: tc.resources, Limit: 10})
			wantIDs(t, fmt.Sprintf("resources %q", tc.resources), ids, tc.want...)
		}
	})

	each(t, open, "ASubAgentsDecisionOnceOnTheTopRun", func(t *testing.T, f *fixture) {
		parent, child := f.delegated()
		call := approval("inner-1")
		s := suspension(child, call, at(30), "instance-1")
		s.Ancestors = []runs.AncestorWrite{surfaced(parent, call)}
		if err := f.s.Suspend(f.ctx, s); err != nil {
			t.Fatal(err)
		}
		c, p := f.get(child.ID), f.get(parent.ID)
		d := decision(c, runtype.DecisionDeclined, "new-lease", at(40))
		d.DecidedBy = ptr("carol")
		pc := p.ToolCalls[0]
		d.Ancestors = []runs.AncestorWrite{{RunID: p.ID, Version: p.Version, After: p.LastSeq, ToolCallID: pc.ToolCallID, Call: pc,
			Events: []runtype.Event{{Type: runtype.EventToolCallDeclined, ToolCall: &pc}, {Type: runtype.EventRunResumed, Status: string(runtype.StatusRunning)}}}}
		if err := f.s.Decide(f.ctx, d); err != nil {
			t.Fatal(err)
		}
		got, ids := f.decisionsOf(runs.DecisionQuery{From: at(0), To: at(100), Limit: 10})
		wantIDs(t, "decisions", ids, parent.ID)
		if got[0].ToolCallID != "delegate-1" || got[0].AgentID != "boss" || got[0].ToolName != call.ToolName {
			t.Fatalf("decision = %+v", got[0])
		}
		wantStr(t, "decidedBy", got[0].DecidedBy, ptr("carol"))
	})

	each(t, open, "ExpiriesAndRequests", func(t *testing.T, f *fixture) {
		e := f.decidedRun(nil, runtype.DecisionExpired, nil, at(1), at(20))
		req := f.request(requestOpts{})
		w := ending(req, runtype.DecisionApproved, at(25))
		if err := f.s.Decide(f.ctx, w); err != nil {
			t.Fatal(err)
		}
		got, ids := f.decisionsOf(runs.DecisionQuery{From: at(0), To: at(100), Limit: 10})
		wantIDs(t, "decisions", ids, e.ID, req.ID)
		if got[0].Kind != runtype.DecisionExpired || got[0].DecidedBy != nil || got[1].Kind != runtype.DecisionApproved {
			t.Fatalf("decisions = %+v", got)
		}
	})
}
