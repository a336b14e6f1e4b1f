package graph

import (
	"time"

	"interlock/graph/model"
	"interlock/runs"
)

// toTeamFigures maps the run service's figures to the API's.
func toTeamFigures(f *runs.TeamFigures) *model.TeamFigures {
	out := &model.TeamFigures{From: f.From, To: f.To, Total: toFigureRow(f.Total), ByPolicy: f.ByPolicy,
		People: make([]*model.DecisionFigures, len(f.People)), Tools: make([]*model.DecisionFigures, len(f.Tools))}
	for i, r := range f.People {
		out.People[i] = toFigureRow(r)
	}
	for i, r := range f.Tools {
		out.Tools[i] = toFigureRow(r)
	}
	return out
}

func toFigureRow(r runs.FigureRow) *model.DecisionFigures {
	w := &model.WaitingTime{Count: r.Waiting.Count}
	if r.Waiting.Count > 0 {
		w.MedianSeconds, w.P90Seconds = fracSeconds(r.Waiting.Median), fracSeconds(r.Waiting.P90)
	}
	return &model.DecisionFigures{Name: r.Name, Decisions: r.Decisions, Approved: r.Approved, Edited: r.Edited,
		Declined: r.Declined, Resumed: r.Resumed, Expired: r.Expired, Waiting: w}
}

// fracSeconds is d in seconds, fractions kept (a wait of 1.5 s is 1.5).
func fracSeconds(d time.Duration) *float64 {
	s := d.Seconds()
	return &s
}
