package runs

import (
	"context"

	"interlock/events"
)

const followBatch = 500

// Follow streams a run's events with seq > after: the stored ones first, then new ones as they
// are stored, each exactly once and in seq order. The channel closes after RUN_FINISHED or
// RUN_FAILED, at once when the run is finished and nothing after `after` remains, or when ctx ends.
// Errors: NOT_FOUND for an unknown run.
//
// Events are always read from storage; the hub only wakes the reader (at once for events stored
// here, from the instance's notify loop for events stored elsewhere). So a slow reader never
// loses an event.
func (s *Service) Follow(ctx context.Context, runID string, after int64) (<-chan events.Event, error) {
	if after < 0 {
		return nil, Errorf(CodeBadUserInput, "after must be 0 or more, not %d", after)
	}
	sub := s.runHub.Subscribe(runID)
	run, err := s.store.findRun(ctx, runID)
	if err != nil || run == nil {
		sub.Close()
		if err == nil {
			err = Errorf(CodeNotFound, "no run with id %q", runID)
		}
		return nil, err
	}
	ctx, cancel := s.streamContext(ctx)
	out := make(chan events.Event)
	go func() {
		defer close(out)
		defer cancel()
		defer sub.Close()
		last := after
		finished := run.Status.Finished() && run.LastSeq <= after
		for !finished {
			evs, err := s.store.events(ctx, runID, last, followBatch)
			if err != nil {
				if ctx.Err() == nil {
					s.cfg.Logger.Error("follow run: read events", "run", runID, "err", err)
				}
				return
			}
			for _, ev := range evs {
				select {
				case out <- ev:
				case <-ctx.Done():
					return
				}
				last = ev.Seq
				if ev.Type.Terminal() {
					return
				}
			}
			if len(evs) == followBatch {
				continue
			}
			select {
			case <-ctx.Done():
				return
			case _, ok := <-sub.C:
				if !ok {
					return
				}
			}
		}
	}()
	return out, nil
}

// WatchFilter selects the runs WatchSuspended reports, with the meaning of ListSuspendedParams.
type WatchFilter struct {
	AgentID    *string
	ThreadID   *string
	ResourceID *string
}

// RunChange is a change of the suspended set with the run as it is now.
type RunChange struct {
	Kind ChangeKind
	Run  *Run
}

// WatchSuspended reports runs entering (SUSPENDED) and leaving (LEFT) the set of suspended runs
// that match f, until ctx ends.
func (s *Service) WatchSuspended(ctx context.Context, f WatchFilter) (<-chan RunChange, error) {
	sub := s.changes.Subscribe(changesTopic)
	ctx, cancel := s.streamContext(ctx)
	out := make(chan RunChange)
	go func() {
		defer close(out)
		defer cancel()
		defer sub.Close()
		for {
			var ch Change
			var ok bool
			select {
			case <-ctx.Done():
				return
			case ch, ok = <-sub.C:
				if !ok {
					return
				}
			}
			run, err := s.store.findRun(ctx, ch.RunID)
			if err != nil || run == nil {
				continue
			}
			if !f.matches(run) || ch.Kind == ChangeSuspended && run.Status != StatusSuspended {
				continue // a suspension already decided is not news; its LEFT follows
			}
			select {
			case out <- RunChange{Kind: ch.Kind, Run: run}:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out, nil
}

func (f WatchFilter) matches(r *Run) bool {
	if f.AgentID != nil {
		if r.AgentID != *f.AgentID {
			return false
		}
	} else if r.ParentRunID != nil {
		return false
	}
	if f.ThreadID != nil && (r.ThreadID == nil || *r.ThreadID != *f.ThreadID) {
		return false
	}
	if f.ResourceID != nil && (r.ResourceID == nil || *r.ResourceID != *f.ResourceID) {
		return false
	}
	return true
}

// streamContext ends a stream when its client goes (ctx) or when the service closes, so that a
// stopping server completes its subscriptions instead of leaving them hanging.
func (s *Service) streamContext(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(s.ctx, cancel)
	return ctx, func() { stop(); cancel() }
}

// Followers returns how many streams of this instance follow the run (for leak checks).
func (s *Service) Followers(runID string) int { return s.runHub.Count(runID) }
