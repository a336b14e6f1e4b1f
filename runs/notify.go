package runs

import (
	"context"
	"errors"
	"fmt"
	"time"

	"interlock/outage"
)

// changeWindow is how far back each poll of run_changes looks. Auto-increment ids do not commit
// in order, so instead of a cursor the poller re-reads a short window and skips rows it has seen.
const changeWindow = 5 * time.Second

// notifyLoop is the one mechanism by which this instance learns what other instances stored:
// every PollInterval it reads, in one query, the last seq of every run that has a follower here
// and wakes the followers of runs that moved; and it reads the recent suspended-set changes made
// elsewhere and passes them to the watchers. Changes made here were published at commit time.
func (s *Service) notifyLoop() {
	defer s.loops.Done()
	tick := time.NewTicker(s.cfg.PollInterval)
	defer tick.Stop()
	lastSeq := map[string]int64{}
	seen := map[int64]time.Time{}
	// While storage is down every poll fails: log that once, then a summary now and then.
	failures := &outage.Log{Logger: s.cfg.Logger, Name: "notify: poll storage"}
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-tick.C:
		}
		err := errors.Join(s.pollEvents(lastSeq), s.pollChanges(seen))
		switch {
		case s.ctx.Err() != nil:
		case err != nil:
			failures.Fail(err)
		default:
			failures.OK()
		}
	}
}

func (s *Service) pollEvents(lastSeq map[string]int64) error {
	ids := s.runHub.Topics()
	if len(ids) == 0 {
		clear(lastSeq)
		return nil
	}
	ctx, cancel := context.WithTimeout(s.ctx, 5*time.Second)
	defer cancel()
	progress, err := s.store.Progress(ctx, ids)
	if err != nil {
		return fmt.Errorf("poll runs: %w", err)
	}
	followed := make(map[string]bool, len(ids))
	for id, p := range progress {
		followed[id] = true
		if p.LastSeq != lastSeq[id] {
			lastSeq[id] = p.LastSeq
			s.runHub.Publish(id, struct{}{})
		}
	}
	for id := range lastSeq {
		if !followed[id] {
			delete(lastSeq, id)
		}
	}
	return nil
}

// pollChanges publishes the changes other instances recorded. It polls even without watchers,
// so that the seen set is current when one subscribes: a watcher is told of what happens after
// it subscribed (and at most one poll interval before), never of older changes.
func (s *Service) pollChanges(seen map[int64]time.Time) error {
	now := s.now()
	ctx, cancel := context.WithTimeout(s.ctx, 5*time.Second)
	defer cancel()
	rows, err := s.store.Changes(ctx, now.Add(-changeWindow), s.cfg.InstanceID)
	if err != nil {
		return fmt.Errorf("poll changes: %w", err)
	}
	for _, r := range rows {
		if _, ok := seen[r.ID]; ok {
			continue
		}
		seen[r.ID] = r.At
		s.changes.Publish(changesTopic, Change{Kind: r.Kind, RunID: r.RunID})
	}
	for id, at := range seen {
		if at.Before(now.Add(-2 * changeWindow)) {
			delete(seen, id)
		}
	}
	return nil
}
