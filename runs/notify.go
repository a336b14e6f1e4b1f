package runs

import (
	"context"
	"time"

	"gorm.io/gorm"

	"interlock/gormstore"
)

// changeWindow is how far back each poll of run_changes looks. Auto-increment ids do not commit
// in order, so instead of a cursor the poller re-reads a short window and skips rows it has seen.
const changeWindow = 5 * time.Second

// recordChange writes a suspended-set change in the caller's transaction.
func (s *Service) recordChange(tx *gorm.DB, runID string, kind ChangeKind, now time.Time) error {
	return tx.Create(&gormstore.RunChange{RunID: runID, Kind: string(kind), InstanceID: s.cfg.InstanceID, CreatedAt: now}).Error
}

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
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-tick.C:
		}
		s.pollEvents(lastSeq)
		s.pollChanges(seen)
	}
}

func (s *Service) pollEvents(lastSeq map[string]int64) {
	ids := s.runHub.Topics()
	if len(ids) == 0 {
		clear(lastSeq)
		return
	}
	var rows []gormstore.Run
	ctx, cancel := context.WithTimeout(s.ctx, 5*time.Second)
	defer cancel()
	if err := s.store.db.WithContext(ctx).Select("id", "last_seq").Where("id IN ?", ids).Find(&rows).Error; err != nil {
		if s.ctx.Err() == nil {
			s.cfg.Logger.Warn("notify: poll runs", "err", err)
		}
		return
	}
	followed := make(map[string]bool, len(ids))
	for _, r := range rows {
		followed[r.ID] = true
		if r.LastSeq != lastSeq[r.ID] {
			lastSeq[r.ID] = r.LastSeq
			s.runHub.Publish(r.ID, struct{}{})
		}
	}
	for id := range lastSeq {
		if !followed[id] {
			delete(lastSeq, id)
		}
	}
}

// pollChanges publishes the changes other instances recorded. It polls even without watchers,
// so that the seen set is current when one subscribes: a watcher is told of what happens after
// it subscribed (and at most one poll interval before), never of older changes.
func (s *Service) pollChanges(seen map[int64]time.Time) {
	now := s.now()
	var rows []gormstore.RunChange
	ctx, cancel := context.WithTimeout(s.ctx, 5*time.Second)
	defer cancel()
	err := s.store.db.WithContext(ctx).Where("created_at >= ? AND instance_id <> ?", now.Add(-changeWindow), s.cfg.InstanceID).Order("id").Find(&rows).Error
	if err != nil {
		if s.ctx.Err() == nil {
			s.cfg.Logger.Warn("notify: poll changes", "err", err)
		}
		return
	}
	for _, r := range rows {
		if _, ok := seen[r.ID]; ok {
			continue
		}
		seen[r.ID] = r.CreatedAt
		s.changes.Publish(changesTopic, Change{Kind: ChangeKind(r.Kind), RunID: r.RunID})
	}
	for id, at := range seen {
		if at.Before(now.Add(-2 * changeWindow)) {
			delete(seen, id)
		}
	}
}
