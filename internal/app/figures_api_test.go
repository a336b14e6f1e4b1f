package app_test

import (
	"testing"
	"time"

	"interlock/internal/apptest"
)

// teamFiguresQuery asks for every figure of the period.
const teamFiguresQuery = `query($from: DateTime!, $to: DateTime!) { teamFigures(from: $from, to: $to) { byPolicy
	total { decisions approved declined waiting { count medianSeconds p90Seconds } }
	people { name decisions approved declined edited waiting { count medianSeconds } }
	tools { name decisions } } }`

type figuresRow struct {
	Name                                  *string
	Decisions, Approved, Declined, Edited int
	Waiting                               struct {
		Count                     int
		MedianSeconds, P90Seconds *float64
	}
}

type teamFiguresAnswer struct {
	TeamFigures struct {
		ByPolicy      int
		Total         figuresRow
		People, Tools []figuresRow
	}
}

// TestTeamFiguresOverTheAPI: teamFigures counts the period's decisions by person and tool,
// with their waits, only of runs the caller sees; /metrics counts them by kind and tool.
func TestTeamFiguresOverTheAPI(t *testing.T) {
	t.Parallel()
	eachAuthDB(t, "", func(t *testing.T, s *apptest.Server) {
		root, portal, alice, bob := apptest.TokenOf("root"), apptest.TokenOf("portal"), apptest.TokenOf("alice"), apptest.TokenOf("bob")
		before := s.Scrape(t)
		period := map[string]any{"from": time.Now().UTC().Add(-time.Minute).Format(time.RFC3339Nano), "to": time.Now().UTC().Add(time.Hour).Format(time.RFC3339Nano)}
		a := s.SuspendAs(t, root, "refund order 1 for 5", map[string]any{"resourceId": "r1"})
		b := s.SuspendAs(t, root, "refund order 2 for 5", map[string]any{"resourceId": "r2"})
		c := s.SuspendAs(t, root, "refund order 3 for 5", map[string]any{"resourceId": "r1"})
		s.MustAs(t, alice, `mutation($run: ID!) { approveToolCall(runId: $run) { id } }`, map[string]any{"run": a.ID}, nil)
		s.MustAs(t, alice, `mutation($run: ID!) { approveToolCall(runId: $run, args: {orderId: "3", amount: 1}) { id } }`, map[string]any{"run": c.ID}, nil)
		s.MustAs(t, bob, `mutation($run: ID!) { declineToolCall(runId: $run) { id } }`, map[string]any{"run": b.ID}, nil)

		var all teamFiguresAnswer
		s.MustAs(t, root, teamFiguresQuery, period, &all)
		f := all.TeamFigures
		if f.Total.Decisions != 3 || f.Total.Approved != 2 || f.Total.Declined != 1 || f.Total.Waiting.Count != 3 ||
			f.Total.Waiting.MedianSeconds == nil || f.Total.Waiting.P90Seconds == nil || *f.Total.Waiting.P90Seconds < *f.Total.Waiting.MedianSeconds {
			t.Errorf("total = %+v", f.Total)
		}
		if len(f.People) != 2 || *f.People[0].Name != "alice" || f.People[0].Decisions != 2 || f.People[0].Edited != 1 ||
			*f.People[1].Name != "bob" || f.People[1].Declined != 1 || f.People[1].Waiting.Count != 1 {
			t.Errorf("people = %+v", f.People)
		}
		if len(f.Tools) != 1 || *f.Tools[0].Name != "issue_refund" || f.Tools[0].Decisions != 3 {
			t.Errorf("tools = %+v", f.Tools)
		}

		var scoped teamFiguresAnswer
		s.MustAs(t, portal, teamFiguresQuery, period, &scoped)
		if sf := scoped.TeamFigures; sf.Total.Decisions != 1 || len(sf.People) != 1 || *sf.People[0].Name != "bob" {
			t.Errorf("portal's figures = %+v, want bob's decision on r2 only", sf)
		}
		if got := s.PostAs(t, "", teamFiguresQuery, period); got.Code != "UNAUTHENTICATED" {
			t.Errorf("without a token: %+v", got)
		}

		after := s.Scrape(t)
		for kind, want := range map[string]float64{"APPROVED": 2, "DECLINED": 1} {
			if got := after.Value(t, "interlock_decisions_total", "kind="+kind, "tool=issue_refund") - before.Value(t, "interlock_decisions_total", "kind="+kind, "tool=issue_refund"); got != want {
				t.Errorf("interlock_decisions_total{kind=%s,tool=issue_refund} moved by %v, want %v", kind, got, want)
			}
		}
	})
}
