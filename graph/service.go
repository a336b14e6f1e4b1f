package graph

import (
	"context"
	"encoding/json"
	"time"

	"interlock/agent"
	"interlock/graph/model"
	"interlock/runs"
	"interlock/runtype"
)

// RunService is what the resolvers ask of the run service: exactly the methods they call, and
// nothing else. It is declared here, by its consumer, so that the resolvers' mapping of results
// to fields and of errors to extensions.code can be tested through the real executor against a
// hand-written fake (fake_test.go, used by errors_test.go and mapping_test.go) instead of only
// through the whole app. NewResolver serves the real *runs.Service behind it.
type RunService interface {
	StartRun(ctx context.Context, p runs.StartParams) (*runtype.Run, error)
	Get(ctx context.Context, runID string) (*runtype.Run, error)
	ListSuspended(ctx context.Context, p runs.ListSuspendedParams) (*runs.ListResult, error)
	RecentRuns(ctx context.Context, p runs.RecentParams) (*runs.ListResult, error)
	Approve(ctx context.Context, p runs.DecideParams) (*runtype.Run, error)
	ApproveAndRemember(ctx context.Context, p runs.DecideParams, in runs.GrantInput) (*runtype.Run, error)
	Grants(ctx context.Context, f runs.GrantsFilter) ([]runs.GrantView, error)
	RevokeGrant(ctx context.Context, id string) (*runs.GrantView, error)
	EditAndApprove(ctx context.Context, p runs.DecideParams, args json.RawMessage) (*runtype.Run, error)
	Decline(ctx context.Context, p runs.DecideParams, reason string) (*runtype.Run, error)
	Resume(ctx context.Context, p runs.DecideParams, resumeData json.RawMessage) (*runtype.Run, error)
	DecideMany(ctx context.Context, items []runs.BatchDecision) ([]runs.BatchOutcome, error)
	RequestApproval(ctx context.Context, p runs.ApprovalParams) (*runtype.Run, error)
	Thread(ctx context.Context, id string, last int) (*runs.Thread, error)
	Threads(ctx context.Context, p runs.ThreadsParams) ([]*runs.Thread, int64, error)
	WatchSuspended(ctx context.Context, f runs.WatchFilter) (<-chan runs.RunChange, error)
	Agents() *agent.Registry
	TeamFigures(ctx context.Context, from, to time.Time) (*runs.TeamFigures, error)
	// Claims and saved views (team.go).
	TeamService
	// FollowEvents is runs.FollowAs with the API's events: a Go method cannot be generic, so
	// the service's generic follow is reached through this one instance of it.
	FollowEvents(ctx context.Context, runID string, after int64, conv func(context.Context, runtype.Event) (*model.RunEvent, error), failed func(error)) (<-chan *model.RunEvent, error)
}

// NewResolver serves svc, the run service, through the resolvers.
func NewResolver(svc *runs.Service) *Resolver { return &Resolver{Runs: service{svc}} }

// service is the real run service as the resolvers see it: its own methods, and its follow
// of a run's events turned into the API's.
type service struct{ *runs.Service }

var _ RunService = service{}

func (s service) FollowEvents(ctx context.Context, runID string, after int64, conv func(context.Context, runtype.Event) (*model.RunEvent, error), failed func(error)) (<-chan *model.RunEvent, error) {
	return runs.FollowAs(s.Service, ctx, runID, after, conv, failed)
}
