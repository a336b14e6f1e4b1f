package graph_test

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"interlock/agent"
	"interlock/graph"
	"interlock/graph/model"
	"interlock/runs"
	"interlock/runtype"
)

// fakeRuns is a hand-written graph.RunService: each method calls its func when set, and
// otherwise fails as a storage fault would (INTERNAL), so that a resolver calling a method its
// test did not expect shows in the answer.
type fakeRuns struct {
	startRun        func(context.Context, runs.StartParams) (*runtype.Run, error)
	get             func(context.Context, string) (*runtype.Run, error)
	listSuspended   func(context.Context, runs.ListSuspendedParams) (*runs.ListResult, error)
	recentRuns      func(context.Context, runs.RecentParams) (*runs.ListResult, error)
	approve         func(context.Context, runs.DecideParams) (*runtype.Run, error)
	editAndApprove  func(context.Context, runs.DecideParams, json.RawMessage) (*runtype.Run, error)
	decline         func(context.Context, runs.DecideParams, string) (*runtype.Run, error)
	resume          func(context.Context, runs.DecideParams, json.RawMessage) (*runtype.Run, error)
	decideMany      func(context.Context, []runs.BatchDecision) ([]runs.BatchOutcome, error)
	requestApproval func(context.Context, runs.ApprovalParams) (*runtype.Run, error)
	remember        func(context.Context, runs.DecideParams, runs.GrantInput) (*runtype.Run, error)
	grants          func(context.Context, runs.GrantsFilter) ([]runs.GrantView, error)
	revokeGrant     func(context.Context, string) (*runs.GrantView, error)
	teamFigures     func(context.Context, time.Time, time.Time) (*runs.TeamFigures, error)
	agents          *agent.Registry
}

func (f *fakeRuns) ApproveAndRemember(ctx context.Context, p runs.DecideParams, in runs.GrantInput) (*runtype.Run, error) {
	if f.remember == nil {
		return nil, unexpected("ApproveAndRemember")
	}
	return f.remember(ctx, p, in)
}

func (f *fakeRuns) Grants(ctx context.Context, filter runs.GrantsFilter) ([]runs.GrantView, error) {
	if f.grants == nil {
		return nil, unexpected("Grants")
	}
	return f.grants(ctx, filter)
}

func (f *fakeRuns) RevokeGrant(ctx context.Context, id string) (*runs.GrantView, error) {
	if f.revokeGrant == nil {
		return nil, unexpected("RevokeGrant")
	}
	return f.revokeGrant(ctx, id)
}

var _ graph.RunService = (*fakeRuns)(nil)

func (f *fakeRuns) TeamFigures(ctx context.Context, from, to time.Time) (*runs.TeamFigures, error) {
	if f.teamFigures == nil {
		return nil, unexpected("TeamFigures")
	}
	return f.teamFigures(ctx, from, to)
}

func unexpected(method string) error { return fmt.Errorf("fakeRuns: unexpected call of %s", method) }

func (f *fakeRuns) StartRun(ctx context.Context, p runs.StartParams) (*runtype.Run, error) {
	if f.startRun == nil {
		return nil, unexpected("StartRun")
	}
	return f.startRun(ctx, p)
}

func (f *fakeRuns) Get(ctx context.Context, runID string) (*runtype.Run, error) {
	if f.get == nil {
		return nil, unexpected("Get")
	}
	return f.get(ctx, runID)
}

func (f *fakeRuns) ListSuspended(ctx context.Context, p runs.ListSuspendedParams) (*runs.ListResult, error) {
	if f.listSuspended == nil {
		return nil, unexpected("ListSuspended")
	}
	return f.listSuspended(ctx, p)
}

func (f *fakeRuns) RecentRuns(ctx context.Context, p runs.RecentParams) (*runs.ListResult, error) {
	if f.recentRuns == nil {
		return nil, unexpected("RecentRuns")
	}
	return f.recentRuns(ctx, p)
}

func (f *fakeRuns) Approve(ctx context.Context, p runs.DecideParams) (*runtype.Run, error) {
	if f.approve == nil {
		return nil, unexpected("Approve")
	}
	return f.approve(ctx, p)
}

func (f *fakeRuns) EditAndApprove(ctx context.Context, p runs.DecideParams, args json.RawMessage) (*runtype.Run, error) {
	if f.editAndApprove == nil {
		return nil, unexpected("EditAndApprove")
	}
	return f.editAndApprove(ctx, p, args)
}

func (f *fakeRuns) Decline(ctx context.Context, p runs.DecideParams, reason string) (*runtype.Run, error) {
	if f.decline == nil {
		return nil, unexpected("Decline")
	}
	return f.decline(ctx, p, reason)
}

func (f *fakeRuns) Resume(ctx context.Context, p runs.DecideParams, resumeData json.RawMessage) (*runtype.Run, error) {
	if f.resume == nil {
		return nil, unexpected("Resume")
	}
	return f.resume(ctx, p, resumeData)
}

func (f *fakeRuns) DecideMany(ctx context.Context, items []runs.BatchDecision) ([]runs.BatchOutcome, error) {
	if f.decideMany == nil {
		return nil, unexpected("DecideMany")
	}
	return f.decideMany(ctx, items)
}

func (f *fakeRuns) RequestApproval(ctx context.Context, p runs.ApprovalParams) (*runtype.Run, error) {
	if f.requestApproval == nil {
		return nil, unexpected("RequestApproval")
	}
	return f.requestApproval(ctx, p)
}

func (f *fakeRuns) Thread(context.Context, string, int) (*runs.Thread, error) {
	return nil, unexpected("Thread")
}

func (f *fakeRuns) Threads(context.Context, runs.ThreadsParams) ([]*runs.Thread, int64, error) {
	return nil, 0, unexpected("Threads")
}

func (f *fakeRuns) WatchSuspended(context.Context, runs.WatchFilter) (<-chan runs.RunChange, error) {
	return nil, unexpected("WatchSuspended")
}

func (f *fakeRuns) FollowEvents(context.Context, string, int64, func(context.Context, runtype.Event) (*model.RunEvent, error), func(error)) (<-chan *model.RunEvent, error) {
	return nil, unexpected("FollowEvents")
}

// Agents is the registry the test gave, or an empty one.
func (f *fakeRuns) Agents() *agent.Registry {
	if f.agents == nil {
		r, err := agent.NewRegistry(nil)
		if err != nil {
			panic(err)
		}
		return r
	}
	return f.agents
}
