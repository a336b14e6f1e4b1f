package graph_test

import (
	"context"

	"interlock/runtype"
)

// The fake's claims and saved views: no test of the fake asks for them (team_test.go serves
// the real service), so each is an unexpected call.

func (f *fakeRuns) ClaimRun(context.Context, string) (*runtype.Run, error) {
	return nil, unexpected("ClaimRun")
}

func (f *fakeRuns) ReleaseClaim(context.Context, string) (*runtype.Run, error) {
	return nil, unexpected("ReleaseClaim")
}

func (f *fakeRuns) RunClaims(context.Context, string, runtype.Status) ([]runtype.RunClaim, error) {
	return nil, unexpected("RunClaims")
}

func (f *fakeRuns) ActiveClaims(context.Context) (map[string][]runtype.RunClaim, bool, error) {
	return nil, false, unexpected("ActiveClaims")
}

func (f *fakeRuns) SavedViews(context.Context) ([]runtype.SavedView, error) {
	return nil, unexpected("SavedViews")
}

func (f *fakeRuns) SaveView(context.Context, string, string) (*runtype.SavedView, error) {
	return nil, unexpected("SaveView")
}

func (f *fakeRuns) DeleteSavedView(context.Context, string) error {
	return unexpected("DeleteSavedView")
}
