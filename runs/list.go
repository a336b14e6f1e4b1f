package runs

import (
	"context"
	"interlock/runtype"
	"time"
)

// ListSuspendedParams are the filters and pagination of suspendedRuns. Nil means "not given".
type ListSuspendedParams struct {
	// AgentID: only runs of this agent (sub-agent runs included). Nil: top-level runs of every agent.
	AgentID    *string
	ThreadID   *string
	ResourceID *string
	// FromDate / ToDate bound createdAt, both inclusive.
	FromDate *time.Time
	ToDate   *time.Time
	// Page (zero-based) and PerPage paginate only when both are given.
	Page    *int
	PerPage *int
	// Resources, when not nil, admit only runs of these resources (none when empty): the
	// scope of the principal asking.
	Resources []string
	// External, when not nil, keeps only runs of external agents (true) or of the others
	// (false). The service turns it into Agents or NotAgents, which the store filters by.
	External *bool
	// Agents, when not nil, admit only runs of these agents (none when empty); NotAgents
	// leaves out the runs of these agents.
	Agents    []string
	NotAgents []string
	// Search, when not empty, keeps runs matching it (search.go).
	Search string
}

// RecentParams filter and page RecentRuns.
type RecentParams struct {
	Statuses   []runtype.Status
	AgentID    *string
	ThreadID   *string
	ResourceID *string
	// WithoutResource keeps only runs without a resource (ResourceID must be nil): the runs of
	// a thread of no resource (Thread.runs).
	WithoutResource bool
	// Resources as in ListSuspendedParams.
	Resources []string
	// Decision and DecidedBy keep runs with a decision of that kind and/or taken by a subject
	// that holds DecidedBy, whatever the case ("ali" finds alice and Alina; both given: one
	// decision with both): the history of who decided what, searched as a person types it.
	// Case is folded by the database's LOWER (ASCII letters only on SQLite).
	Decision  *runtype.DecisionKind
	DecidedBy *string
	// External, Agents and NotAgents as in ListSuspendedParams.
	External  *bool
	Agents    []string
	NotAgents []string
	// Search as in ListSuspendedParams.
	Search  string
	Page    int
	PerPage int
}

// ListResult is a page of suspended runs and the number of all matches.
type ListResult struct {
	Runs  []*runtype.Run
	Total int64
}

// ListSuspended returns the suspended runs matching p, newest createdAt first, ties broken by
// runId descending, each with the calls it waits on.
// Errors: BAD_USER_INPUT for page < 0, perPage < 1 or above the maximum, fromDate after toDate,
// or an unpaginated request matching more runs than the server returns at once.
func (s *Service) ListSuspended(ctx context.Context, p ListSuspendedParams) (*ListResult, error) {
	if err := require(ctx, runtype.RoleViewer, "listing runs"); err != nil {
		return nil, err
	}
	if p.Page != nil && *p.Page < 0 {
		return nil, runtype.Errorf(runtype.CodeBadUserInput, "page must be 0 or more (pages are zero-based), not %d", *p.Page)
	}
	if p.PerPage != nil && (*p.PerPage < 1 || *p.PerPage > s.cfg.MaxPerPage) {
		return nil, runtype.Errorf(runtype.CodeBadUserInput, "perPage must be between 1 and %d, not %d", s.cfg.MaxPerPage, *p.PerPage)
	}
	var err error
	if p.Search, err = searchText(p.Search); err != nil {
		return nil, err
	}
	if p.FromDate != nil && p.ToDate != nil && p.FromDate.After(*p.ToDate) {
		return nil, runtype.Errorf(runtype.CodeBadUserInput, "fromDate (%s) is after toDate (%s)", p.FromDate.UTC().Format(time.RFC3339Nano), p.ToDate.UTC().Format(time.RFC3339Nano))
	}
	// Stored times have millisecond precision: round the bounds inwards so both stay inclusive.
	if p.FromDate != nil {
		from := ceilMs(*p.FromDate)
		p.FromDate = &from
	}
	if p.ToDate != nil {
		to := runtype.StoredTime(*p.ToDate)
		p.ToDate = &to
	}
	var none bool
	if p.Resources, none = scope(ctx, p.ResourceID); none {
		return &ListResult{Runs: []*runtype.Run{}, Total: 0}, nil
	}
	p.Agents, p.NotAgents = s.externalFilter(p.External)
	total, err := s.store.CountSuspended(ctx, p)
	if err != nil {
		return nil, err
	}
	limit, offset := s.cfg.MaxUnpaginated+1, 0
	paginated := p.Page != nil && p.PerPage != nil
	if paginated {
		limit = *p.PerPage
		if int64(*p.Page)*int64(limit) >= total {
			return &ListResult{Runs: []*runtype.Run{}, Total: total}, nil
		}
		offset = *p.Page * limit
	} else if total > int64(s.cfg.MaxUnpaginated) {
		return nil, runtype.Errorf(runtype.CodeBadUserInput, "%d suspended runs match, more than the %d returned at once: pass page and perPage", total, s.cfg.MaxUnpaginated)
	}
	if total == 0 {
		return &ListResult{Runs: []*runtype.Run{}, Total: 0}, nil
	}
	list, err := s.store.ListSuspended(ctx, p, limit, offset)
	if err != nil {
		return nil, err
	}
	if !paginated {
		// Runs may have suspended since the count: the answer is what was read, never cut short.
		if len(list) > s.cfg.MaxUnpaginated {
			return nil, runtype.Errorf(runtype.CodeBadUserInput, "more than %d suspended runs match: pass page and perPage", s.cfg.MaxUnpaginated)
		}
		total = int64(len(list))
	}
	return &ListResult{Runs: list, Total: total}, nil
}

func ceilMs(t time.Time) time.Time {
	f := runtype.StoredTime(t)
	if f.Before(t) {
		f = f.Add(time.Millisecond)
	}
	return f
}

// RecentRuns returns runs in the given statuses (default: COMPLETED and FAILED), most recently
// updated first, with their decisions: the history a console shows.
// Errors: BAD_USER_INPUT for page < 0 or perPage outside 1..MaxPerPage.
func (s *Service) RecentRuns(ctx context.Context, p RecentParams) (*ListResult, error) {
	if err := require(ctx, runtype.RoleViewer, "listing runs"); err != nil {
		return nil, err
	}
	if p.Page < 0 {
		return nil, runtype.Errorf(runtype.CodeBadUserInput, "page must be 0 or more (pages are zero-based), not %d", p.Page)
	}
	if p.PerPage < 1 || p.PerPage > s.cfg.MaxPerPage {
		return nil, runtype.Errorf(runtype.CodeBadUserInput, "perPage must be between 1 and %d, not %d", s.cfg.MaxPerPage, p.PerPage)
	}
	var err error
	if p.Search, err = searchText(p.Search); err != nil {
		return nil, err
	}
	if len(p.Statuses) == 0 {
		p.Statuses = []runtype.Status{runtype.StatusCompleted, runtype.StatusFailed}
	}
	for _, st := range p.Statuses {
		if st == runtype.StatusRunning {
			// A supervisor waiting on its sub-agent's run is running, to clients.
			p.Statuses = append(p.Statuses[:len(p.Statuses):len(p.Statuses)], runtype.StatusWaiting)
			break
		}
	}
	var none bool
	if p.Resources, none = scope(ctx, p.ResourceID); none {
		return &ListResult{Runs: []*runtype.Run{}, Total: 0}, nil
	}
	p.Agents, p.NotAgents = s.externalFilter(p.External)
	list, total, err := s.store.ListRecent(ctx, p)
	if err != nil {
		return nil, err
	}
	return &ListResult{Runs: list, Total: total}, nil
}

// externalFilter turns the external filter of a listing into the agents the store admits:
// external true admits the external agents' runs only (none when there is none), false leaves
// them out, nil admits every run. The external agents are the registry's: a run of an agent
// this server no longer serves counts as internal.
func (s *Service) externalFilter(external *bool) (agents, notAgents []string) {
	if external == nil {
		return nil, nil
	}
	ids := []string{}
	for _, a := range s.agents.List() {
		if a.External {
			ids = append(ids, a.ID)
		}
	}
	if *external {
		return ids, nil
	}
	if len(ids) == 0 {
		return nil, nil
	}
	return nil, ids
}
