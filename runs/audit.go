package runs

import (
	"context"
	"time"

	"interlock/runtype"
)

// The audit trail: the decisions taken in a period, as an auditor exports them (package audit
// writes them out, GET /audit) and as a team lead sums them up (TeamFigures). Both read the
// stored decisions (run_tool_calls) page by page, in the order they were taken, through
// Store.Decisions: never the whole table at once.
//
// Only the decisions of top-level runs are read. A decision on a sub-agent's call is stored on
// the sub-agent's run and, as the same decision, on the delegate call of each supervisor above
// it (the call the inbox showed): reading both would count one act twice. The supervisor's row
// is the one listed, with the run a person saw.

// DecisionRecord is a stored decision with what the audit trail says beside it: the agent and
// resource of its run, and when its call began to wait.
type DecisionRecord struct {
	runtype.Decision
	AgentID    string
	ResourceID *string
	// AskedAt is when the call began to wait (its row was stored): DecidedAt - AskedAt is how
	// long it waited.
	AskedAt time.Time
}

// DecisionQuery selects a page of stored decisions (Store.Decisions).
type DecisionQuery struct {
	// From and To bound DecidedAt: From <= DecidedAt < To.
	From, To time.Time
	// After, when not nil, starts the page after this decision in (DecidedAt, ID) order: the
	// last one of the previous page.
	After *DecisionCursor
	// Resources, when not nil, admit only decisions on runs of these resources (none when
	// empty): the scope of the principal asking.
	Resources []string
	// Limit is the most decisions returned.
	Limit int
}

// DecisionCursor is a position in the (DecidedAt, ID) order of decisions.
type DecisionCursor struct {
	At time.Time
	ID int64
}

// DefaultAuditPage is how many decisions an export or the figures read per query.
const DefaultAuditPage = 500

// MaxFigureDecisions is the most decisions TeamFigures sums up at once: its percentiles are
// computed over the waits it holds in memory, so a period holding more is refused (pick a
// shorter one). 8 bytes a wait: 100,000 decisions hold under 1 MiB.
const MaxFigureDecisions = 100_000

// Period checks and normalizes a period [from, to) of decisions: BAD_USER_INPUT when from is
// after to. Stored times have millisecond precision: both bounds are rounded up to the next
// millisecond, which keeps the same stored decisions in.
func Period(from, to time.Time) (time.Time, time.Time, error) {
	if from.After(to) {
		return time.Time{}, time.Time{}, runtype.Errorf(runtype.CodeBadUserInput, "from (%s) is after to (%s)", from.UTC().Format(time.RFC3339Nano), to.UTC().Format(time.RFC3339Nano))
	}
	return ceilMs(from), ceilMs(to), nil
}

// AuditDecisions calls each with every decision taken in [from, to) on runs the principal of
// ctx may read, in the order they were taken (DecidedAt, then their id), reading them
// DefaultAuditPage at a time; it stops at the first error each returns, and returns it.
// from and to are normalized as Period does.
// Errors: UNAUTHENTICATED without a principal; FORBIDDEN without the viewer role (a requester
// reads only its own requests, one by one); BAD_USER_INPUT when from is after to.
func (s *Service) AuditDecisions(ctx context.Context, from, to time.Time, each func(DecisionRecord) error) error {
	q, none, err := s.decisionQuery(ctx, from, to, "exporting decisions")
	if err != nil || none {
		return err
	}
	return s.eachDecision(ctx, q, each)
}

// decisionQuery checks the principal and the period, and makes the query of its first page:
// none when the principal sees no resource.
func (s *Service) decisionQuery(ctx context.Context, from, to time.Time, what string) (q DecisionQuery, none bool, err error) {
	if err := require(ctx, runtype.RoleViewer, what); err != nil {
		return q, false, err
	}
	if from, to, err = Period(from, to); err != nil {
		return q, false, err
	}
	q = DecisionQuery{From: from, To: to, Limit: DefaultAuditPage}
	q.Resources, none = scope(ctx, nil)
	return q, none, nil
}

// eachDecision reads the decisions of q page by page and calls each with them.
func (s *Service) eachDecision(ctx context.Context, q DecisionQuery, each func(DecisionRecord) error) error {
	for {
		page, err := s.store.Decisions(ctx, q)
		if err != nil {
			return err
		}
		for _, d := range page {
			if err := each(d); err != nil {
				return err
			}
		}
		if len(page) < q.Limit {
			return nil
		}
		last := page[len(page)-1]
		q.After = &DecisionCursor{At: last.DecidedAt, ID: last.ID}
	}
}
