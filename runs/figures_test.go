package runs

import (
	"encoding/json"
	"testing"
	"time"

	"interlock/runtype"
)

// TestFigureSum: decisions are counted by person, tool and kind; waits are measured from the
// call's start to its decision, without expiries and approvals by policy; the percentiles are
// nearest-rank; rows are ordered by count then name, nobody's last.
func TestFigureSum(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	by := func(s string) *string { return &s }
	rec := func(kind runtype.DecisionKind, who *string, tool string, waited time.Duration) DecisionRecord {
		return DecisionRecord{Decision: runtype.Decision{Kind: kind, DecidedBy: who, ToolName: tool, DecidedAt: t0.Add(waited)}, AskedAt: t0}
	}
	policy := rec(runtype.DecisionAutoApproved, nil, "lookup", 0)
	edited := rec(runtype.DecisionApproved, by("alice"), "refund", 10*time.Second)
	edited.EditedArgs = json.RawMessage(`{}`)
	sum := newFigureSum()
	for _, d := range []DecisionRecord{
		edited,
		rec(runtype.DecisionApproved, by("alice"), "refund", 20*time.Second),
		rec(runtype.DecisionDeclined, by("alice"), "deploy", 30*time.Second),
		rec(runtype.DecisionApproved, by("alice"), "deploy", 40*time.Second),
		rec(runtype.DecisionResumed, by("bob"), "ask", 5*time.Second),
		rec(runtype.DecisionDeclined, by("aaron"), "refund", time.Hour),
		rec(runtype.DecisionExpired, nil, "refund", 24*time.Hour),
		policy,
	} {
		sum.add(d)
	}
	f := sum.figures()
	tot := f.Total
	if tot.Decisions != 8 || tot.Approved != 4 || tot.Edited != 1 || tot.Declined != 2 || tot.Resumed != 1 || tot.Expired != 1 || f.ByPolicy != 1 {
		t.Errorf("total = %+v, byPolicy %d", tot, f.ByPolicy)
	}
	// Waits of the 6 people's decisions: 5s 10s 20s 30s 40s 1h: rank 3 and rank 6.
	if tot.Waiting != (Waiting{Count: 6, Median: 20 * time.Second, P90: time.Hour}) {
		t.Errorf("total waiting = %+v", tot.Waiting)
	}
	names := func(rows []FigureRow) []string {
		var out []string
		for _, r := range rows {
			if r.Name == nil {
				out = append(out, "<nobody>")
			} else {
				out = append(out, *r.Name)
			}
		}
		return out
	}
	if got := names(f.People); len(got) != 4 || got[0] != "alice" || got[1] != "aaron" || got[2] != "bob" || got[3] != "<nobody>" {
		t.Errorf("people = %v", got)
	}
	if a := f.People[0]; a.Decisions != 4 || a.Approved != 3 || a.Declined != 1 || a.Waiting != (Waiting{Count: 4, Median: 20 * time.Second, P90: 40 * time.Second}) {
		t.Errorf("alice = %+v", a)
	}
	if n := f.People[3]; n.Decisions != 2 || n.Expired != 1 || n.Approved != 1 || n.Waiting.Count != 0 {
		t.Errorf("nobody = %+v", n)
	}
	if got := names(f.Tools); len(got) != 4 || got[0] != "refund" || got[1] != "deploy" || got[2] != "ask" || got[3] != "lookup" {
		t.Errorf("tools = %v", got)
	}
	if empty := newFigureSum().figures(); empty.Total.Decisions != 0 || len(empty.People) != 0 || empty.Total.Waiting != (Waiting{}) {
		t.Errorf("no decisions: %+v", empty)
	}
}
