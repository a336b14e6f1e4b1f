package graph

import (
	"context"
	"strings"

	"github.com/99designs/gqlgen/graphql"

	"interlock/graph/model"
	"interlock/runtype"
)

// selectsRun reports whether the runEvents subscription of ctx selects RunEvent.run, so that
// the stream reads runs only for clients that asked for them.
func selectsRun(ctx context.Context) bool {
	for _, name := range graphql.CollectAllFields(ctx) {
		if name == "run" {
			return true
		}
	}
	return false
}

// withRun sets ev.Run on RUN_* events: the run as stored now, read once per event through the
// run service, whose scoping is the one that let the caller follow the stream. A run no longer
// stored (retention removed it) leaves Run null; any other failure is returned.
func withRun(ctx context.Context, svc RunService, ev *model.RunEvent) error {
	if !strings.HasPrefix(string(ev.Type), "RUN_") {
		return nil
	}
	r, err := svc.Get(ctx, ev.RunID)
	if runtype.ErrorCode(err) == runtype.CodeNotFound {
		return nil
	}
	if err != nil {
		return err
	}
	ev.Run = toRun(r)
	return nil
}

// followEvents streams a run's events as RunEvents, each with its run when the subscription
// selects it. A failed read of the run ends the stream, as a failed read of the events does,
// with the error as the stream's last result (StreamErrors; UNAVAILABLE when storage could not
// be reached): the client resubscribes with after: its last seq.
func followEvents(ctx context.Context, svc RunService, runID string, after int64) (<-chan *model.RunEvent, error) {
	wantRun := selectsRun(ctx)
	return svc.FollowEvents(ctx, runID, after, func(ctx context.Context, ev runtype.Event) (*model.RunEvent, error) {
		next := toEvent(ev)
		if wantRun {
			if err := withRun(ctx, svc, next); err != nil {
				return nil, err
			}
		}
		return next, nil
	}, endWith(ctx))
}
