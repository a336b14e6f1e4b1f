package graph_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"interlock/runs"
	"interlock/runtype"
)

// TestTeamFiguresMapsEveryField: teamFigures passes its period to the service and shows every
// figure; a row without waits has null percentiles; the service's BAD_USER_INPUT is the answer's.
func TestTeamFiguresMapsEveryField(t *testing.T) {
	t.Parallel()
	var asked [2]time.Time
	f := &fakeRuns{teamFigures: func(_ context.Context, from, to time.Time) (*runs.TeamFigures, error) {
		if from.After(to) {
			return nil, runtype.Errorf(runtype.CodeBadUserInput, "from is after to")
		}
		asked = [2]time.Time{from, to}
		return &runs.TeamFigures{
			From: from, To: to, ByPolicy: 1,
			Total: runs.FigureRow{Decisions: 4, Approved: 2, Edited: 1, Declined: 1, Expired: 1,
				Waiting: runs.Waiting{Count: 2, Median: 1500 * time.Millisecond, P90: 90 * time.Second}},
			People: []runs.FigureRow{{Name: ptr("alice"), Decisions: 2, Approved: 1, Declined: 1, Waiting: runs.Waiting{Count: 2, Median: time.Second, P90: time.Minute}},
				{Decisions: 2, Approved: 1, Expired: 1}},
			Tools: []runs.FigureRow{{Name: ptr("issue_refund"), Decisions: 4}},
		}, nil
	}}
	a := serve(t, f)
	var got struct{ TeamFigures json.RawMessage }
	rowFields := `name decisions approved edited declined resumed expired waiting { count medianSeconds p90Seconds }`
	a.data(t, `{ teamFigures(from: "2026-12-01T00:00:00Z", to: "2026-12-02T01:00:00+01:00") { from to byPolicy total { `+rowFields+` } people { `+rowFields+` } tools { name decisions } } }`, nil, &got)
	sameJSON(t, got.TeamFigures, `{"from": "2026-12-01T00:00:00.000Z", "to": "2026-12-02T00:00:00.000Z", "byPolicy": 1,
		"total": {"name": null, "decisions": 4, "approved": 2, "edited": 1, "declined": 1, "resumed": 0, "expired": 1, "waiting": {"count": 2, "medianSeconds": 1.5, "p90Seconds": 90}},
		"people": [
			{"name": "alice", "decisions": 2, "approved": 1, "edited": 0, "declined": 1, "resumed": 0, "expired": 0, "waiting": {"count": 2, "medianSeconds": 1, "p90Seconds": 60}},
			{"name": null, "decisions": 2, "approved": 1, "edited": 0, "declined": 0, "resumed": 0, "expired": 1, "waiting": {"count": 0, "medianSeconds": null, "p90Seconds": null}}],
		"tools": [{"name": "issue_refund", "decisions": 4}]}`)
	if !asked[0].Equal(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)) || !asked[1].Equal(time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("the service was asked for %v", asked)
	}
	for _, q := range []string{
		`{ teamFigures(from: "2026-12-02T00:00:00Z", to: "2026-12-01T00:00:00Z") { byPolicy } }`,
		`{ teamFigures(from: "yesterday", to: "2026-12-01T00:00:00Z") { byPolicy } }`,
	} {
		ans := a.do(t, context.Background(), q, nil)
		if len(ans.Errors) != 1 || ans.Errors[0].Extensions["code"] != "BAD_USER_INPUT" {
			t.Errorf("%s: %s, want BAD_USER_INPUT", q, ans.body)
		}
	}
}
