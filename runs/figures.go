package runs

import (
	"cmp"
	"context"
	"slices"
	"time"

	"interlock/runtype"
)

// TeamFigures sum up the decisions of a period: how many, of which kind, by whom, on which
// tools, and how long calls waited for them. They are the team lead's view of the audit trail
// (the console's Team page, the teamFigures query).
type TeamFigures struct {
	// From and To are the period, as normalized (Period): From <= decidedAt < To.
	From, To time.Time
	// Total counts every decision of the period (Name nil).
	Total FigureRow
	// People has a row per person who decided (DecidedBy), most decisions first, then by
	// name; the row of decisions by nobody (Name nil: expiries, approvals by policy, and
	// every decision of a server whose authentication is off) comes last.
	People []FigureRow
	// Tools has a row per tool, most decisions first, then by name.
	Tools []FigureRow
	// ByPolicy counts the approvals of calls that needed none (a tool without approval): they
	// are decisions (they carry a receipt) but nobody waited for them.
	ByPolicy int
}

// FigureRow counts the decisions of one person, one tool, or all of them.
type FigureRow struct {
	Name      *string
	Decisions int
	Approved  int
	// Edited counts the approvals whose arguments a person edited (among Approved).
	Edited   int
	Declined int
	Resumed  int
	Expired  int
	// Waiting is how long the calls a person decided had waited: expiries (which waited out
	// their deadline) and approvals by policy (which waited for nobody) are left out.
	Waiting Waiting
}

// Waiting is the distribution of waits, by the nearest-rank method: Median is the wait at rank
// ceil(0.5·Count) of the waits in ascending order, P90 at rank ceil(0.9·Count). Both are zero
// when Count is.
type Waiting struct {
	Count  int
	Median time.Duration
	P90    time.Duration
}

// TeamFigures sums up the decisions taken in [from, to) on runs the principal of ctx may read.
// The decisions are read in pages (Store.Decisions) and summed in Go: the counts could be SQL's
// GROUP BY, but the percentiles need every wait in order, which neither SQLite nor MySQL
// computes portably; one bounded, indexed read serves both. A period holding more than
// MaxFigureDecisions decisions is refused rather than read.
// Errors: UNAUTHENTICATED, FORBIDDEN as AuditDecisions; BAD_USER_INPUT when from is after to
// or the period holds more than MaxFigureDecisions decisions.
func (s *Service) TeamFigures(ctx context.Context, from, to time.Time) (*TeamFigures, error) {
	q, none, err := s.decisionQuery(ctx, from, to, "reading team figures")
	if err != nil {
		return nil, err
	}
	sum := newFigureSum()
	if !none {
		n := 0
		err = s.eachDecision(ctx, q, func(d DecisionRecord) error {
			if n++; n > MaxFigureDecisions {
				return runtype.Errorf(runtype.CodeBadUserInput, "more than %d decisions were taken between %s and %s: choose a shorter period",
					MaxFigureDecisions, q.From.Format(time.RFC3339), q.To.Format(time.RFC3339))
			}
			sum.add(d)
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	out := sum.figures()
	out.From, out.To = q.From, q.To
	return out, nil
}

// figureSum collects the decisions of TeamFigures.
type figureSum struct {
	total    *rowSum
	people   map[string]*rowSum
	nobody   *rowSum
	tools    map[string]*rowSum
	byPolicy int
}

// rowSum is a FigureRow being counted, with its waits.
type rowSum struct {
	row   FigureRow
	waits []time.Duration
}

func newFigureSum() *figureSum {
	return &figureSum{total: &rowSum{}, people: map[string]*rowSum{}, tools: map[string]*rowSum{}}
}

func (f *figureSum) add(d DecisionRecord) {
	policy := d.Kind == runtype.DecisionAutoApproved // a policy or a grant let it through: nobody waited
	if policy {
		f.byPolicy++
	}
	person := f.nobody
	if d.DecidedBy != nil {
		if person = f.people[*d.DecidedBy]; person == nil {
			name := *d.DecidedBy
			person = &rowSum{row: FigureRow{Name: &name}}
			f.people[name] = person
		}
	} else if person == nil {
		person = &rowSum{}
		f.nobody = person
	}
	tool := f.tools[d.ToolName]
	if tool == nil {
		name := d.ToolName
		tool = &rowSum{row: FigureRow{Name: &name}}
		f.tools[name] = tool
	}
	waited := !policy && d.Kind != runtype.DecisionExpired
	wait := max(0, d.DecidedAt.Sub(d.AskedAt))
	for _, r := range []*rowSum{f.total, person, tool} {
		r.count(d, waited, wait)
	}
}

func (r *rowSum) count(d DecisionRecord, waited bool, wait time.Duration) {
	r.row.Decisions++
	switch d.Kind {
	case runtype.DecisionApproved, runtype.DecisionAutoApproved:
		r.row.Approved++
		if d.EditedArgs != nil {
			r.row.Edited++
		}
	case runtype.DecisionDeclined:
		r.row.Declined++
	case runtype.DecisionResumed:
		r.row.Resumed++
	case runtype.DecisionExpired:
		r.row.Expired++
	}
	if waited {
		r.waits = append(r.waits, wait)
	}
}

// done is the row with its waits' distribution.
func (r *rowSum) done() FigureRow {
	row := r.row
	row.Waiting = distribution(r.waits)
	return row
}

func (f *figureSum) figures() *TeamFigures {
	out := &TeamFigures{Total: f.total.done(), ByPolicy: f.byPolicy, People: []FigureRow{}, Tools: []FigureRow{}}
	for _, p := range f.people {
		out.People = append(out.People, p.done())
	}
	for _, t := range f.tools {
		out.Tools = append(out.Tools, t.done())
	}
	byCount := func(a, b FigureRow) int {
		return cmp.Or(cmp.Compare(b.Decisions, a.Decisions), cmp.Compare(*a.Name, *b.Name))
	}
	slices.SortFunc(out.People, byCount)
	slices.SortFunc(out.Tools, byCount)
	if f.nobody != nil {
		out.People = append(out.People, f.nobody.done())
	}
	return out
}

// distribution is the nearest-rank median and 90th percentile of waits (sorted in place).
func distribution(waits []time.Duration) Waiting {
	n := len(waits)
	if n == 0 {
		return Waiting{}
	}
	slices.Sort(waits)
	rank := func(p int) time.Duration { return waits[(p*n+99)/100-1] } // ceil(p/100·n), 1-based
	return Waiting{Count: n, Median: rank(50), P90: rank(90)}
}
