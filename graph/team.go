package graph

import (
	"context"
	"sync"

	"github.com/99designs/gqlgen/graphql"

	"interlock/graph/model"
	"interlock/runtype"
)

// TeamService is what the resolvers of claims and saved views ask of the run service
// (runs/claims.go, runs/savedviews.go); part of RunService.
type TeamService interface {
	ClaimRun(ctx context.Context, runID string) (*runtype.Run, error)
	ReleaseClaim(ctx context.Context, runID string) (*runtype.Run, error)
	RunClaims(ctx context.Context, runID string, status runtype.Status) ([]runtype.RunClaim, error)
	ActiveClaims(ctx context.Context) (map[string][]runtype.RunClaim, bool, error)
	SavedViews(ctx context.Context) ([]runtype.SavedView, error)
	SaveView(ctx context.Context, name, query string) (*runtype.SavedView, error)
	DeleteSavedView(ctx context.Context, id string) error
}

// ClaimsPerResponse is the extension that lets every AgentRun.claims of one response be
// answered by one read: the claims in force are few (people times the runs they have open),
// so the first claims field of a response reads them all (runs.Service.ActiveClaims) and the
// others pick theirs, instead of a query per run of an inbox page of 500. Without it (or past
// the bound of ActiveClaims) each run's claims are read on their own.
type ClaimsPerResponse struct{}

var (
	_ graphql.HandlerExtension    = ClaimsPerResponse{}
	_ graphql.ResponseInterceptor = ClaimsPerResponse{}
)

// ExtensionName implements graphql.HandlerExtension.
func (ClaimsPerResponse) ExtensionName() string { return "ClaimsPerResponse" }

// Validate implements graphql.HandlerExtension.
func (ClaimsPerResponse) Validate(graphql.ExecutableSchema) error { return nil }

// InterceptResponse gives each response (each event of a subscription too) its own read.
func (ClaimsPerResponse) InterceptResponse(ctx context.Context, next graphql.ResponseHandler) *graphql.Response {
	return next(context.WithValue(ctx, claimsKey{}, &claimsRead{}))
}

type claimsKey struct{}

// claimsRead is one response's read of the claims in force.
type claimsRead struct {
	once     sync.Once
	byRun    map[string][]runtype.RunClaim
	complete bool
	err      error
}

// claimsOf answers AgentRun.claims of run (read through the service, so visible to the caller).
func (r *Resolver) claimsOf(ctx context.Context, run *model.AgentRun) ([]*model.RunClaim, error) {
	if run.Status != model.RunStatusSuspended {
		return []*model.RunClaim{}, nil
	}
	if c, ok := ctx.Value(claimsKey{}).(*claimsRead); ok {
		c.once.Do(func() { c.byRun, c.complete, c.err = r.Runs.ActiveClaims(ctx) })
		if c.err != nil {
			return nil, c.err
		}
		if c.complete {
			return toClaims(c.byRun[run.RunID]), nil
		}
	}
	list, err := r.Runs.RunClaims(ctx, run.RunID, runtype.StatusSuspended)
	if err != nil {
		return nil, err
	}
	return toClaims(list), nil
}

func toClaims(list []runtype.RunClaim) []*model.RunClaim {
	out := make([]*model.RunClaim, len(list))
	for i, c := range list {
		out[i] = &model.RunClaim{Subject: c.Subject, Since: c.Since, ExpiresAt: c.ExpiresAt}
	}
	return out
}

func toSavedView(v runtype.SavedView) *model.SavedView {
	return &model.SavedView{ID: v.ID, Name: v.Name, Query: v.Query, CreatedAt: v.CreatedAt}
}
