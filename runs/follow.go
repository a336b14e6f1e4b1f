package runs

import (
	"context"

	"interlock/events"
)

const followBatch = 500

// Follow streams a run's events with seq > after: the stored ones first, then new ones as they
// are stored, each exactly once and in seq order. The channel closes after RUN_FINISHED or
// RUN_FAILED, at once when the run is finished and nothing after `after` remains, when the run
// finishes while the stream waits beyond its last event, or when ctx ends.
// Errors: NOT_FOUND for an unknown run; BAD_USER_INPUT for a negative after, or an after beyond
// the last event of a finished run (there will never be such an event).
//
// Events are always read from storage; the hub only wakes the reader (at once for events stored
// here, from the instance's notify loop for events stored elsewhere). So a slow reader never
// loses an event.
func (s *Service) Follow(ctx context.Context, runID string, after int64) (<-chan events.Event, error) {
	if err := require(ctx, RoleViewer, "following runs"); err != nil {
		return nil, err
	}
	if after < 0 {
		return nil, Errorf(CodeBadUserInput, "after must be 0 or more, not %d", after)
	}
	sub := s.runHub.Subscribe(runID)
	progress, err := s.store.Progress(ctx, []string{runID})
	p, found := progress[runID]
	if err != nil || !found || !visible(ctx, p.ResourceID) {
		sub.Close()
		if err == nil {
			err = notFound(runID)
		}
		return nil, err
	}
	if p.Status.Finished() && after > p.LastSeq {
		sub.Close()
		return nil, Errorf(CodeBadUserInput, "after is %d, beyond the last event (%d) of run %s, which has finished", after, p.LastSeq, runID)
	}
	ctx, cancel := s.streamContext(ctx)
	out := make(chan events.Event)
	go func() {
		defer close(out)
		defer cancel()
		defer sub.Close()
		last := after
		finished := p.Status.Finished() && p.LastSeq <= after
		for !finished {
			evs, err := s.store.Events(ctx, runID, last, followBatch)
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
			if len(evs) == 0 && last > p.LastSeq {
				// Waiting beyond the last event: the run may have finished meanwhile.
				if finished, err = s.finishedBefore(ctx, runID, last); err != nil {
					return
				}
				if finished {
					return
				}
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

// finishedBefore reports whether the run has finished with its last event at or before seq.
func (s *Service) finishedBefore(ctx context.Context, runID string, seq int64) (bool, error) {
	progress, err := s.store.Progress(ctx, []string{runID})
	if err != nil {
		if ctx.Err() == nil {
			s.cfg.Logger.Error("follow run: read progress", "run", runID, "err", err)
		}
		return false, err
	}
	p, found := progress[runID]
	return !found || p.Status.Finished() && p.LastSeq <= seq, nil
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
// that match f, until ctx ends. A watcher that falls far behind is ended (its channel closes);
// it subscribes again and lists the suspended runs to catch up.
func (s *Service) WatchSuspended(ctx context.Context, f WatchFilter) (<-chan RunChange, error) {
	if err := require(ctx, RoleViewer, "watching runs"); err != nil {
		return nil, err
	}
	principal := PrincipalFrom(ctx)
	sub := s.watched.Subscribe(changesTopic)
	ctx, cancel := s.streamContext(ctx)
	out := make(chan RunChange)
	go func() {
		defer close(out)
		defer cancel()
		defer sub.Close()
		for {
			var ch RunChange
			var ok bool
			select {
			case <-ctx.Done():
				return
			case ch, ok = <-sub.C:
				if !ok {
					return
				}
			}
			if !f.matches(ch.Run) || (principal != nil && !principal.Sees(ch.Run.ResourceID)) {
				continue
			}
			select {
			case out <- ch:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out, nil
}

// watchLoop reads the run of each suspended-set change once, however many watchers this
// instance has, and hands it to all of them.
// It starts subscribed (New subscribes it before starting it), so no change is missed.
func (s *Service) watchLoop(sub *events.Sub[Change]) {
	defer s.loops.Done()
	for {
		s.watch(sub)
		sub.Close()
		if s.ctx.Err() != nil {
			return
		}
		sub = s.changes.Subscribe(changesTopic)
	}
}

func (s *Service) watch(sub *events.Sub[Change]) {
	for {
		var ch Change
		var ok bool
		select {
		case <-s.ctx.Done():
			return
		case ch, ok = <-sub.C:
			if !ok {
				// Fell behind: the watchers' view may have holes, so end them; they resync.
				s.cfg.Logger.Warn("watch: too many suspended-set changes at once; watchers resubscribe")
				s.watched.CloseAll(changesTopic)
				return
			}
		}
		if s.watched.Count(changesTopic) == 0 {
			continue
		}
		run, err := s.store.GetRun(s.ctx, ch.RunID)
		if err != nil || run == nil {
			if err != nil && s.ctx.Err() == nil {
				s.cfg.Logger.Warn("watch: read run", "run", ch.RunID, "err", err)
			}
			continue
		}
		if ch.Kind != ChangeLeft && run.Status != StatusSuspended {
			continue // a suspension already decided is not news; its LEFT follows
		}
		run.Snapshot, run.LeaseOwner = nil, nil
		s.watched.Publish(changesTopic, RunChange{Kind: ch.Kind, Run: run})
	}
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
