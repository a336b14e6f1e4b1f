package gormstore

import "time"

// HoldGroup makes the group committer of s busy, as if its transactions were all being
// committed, so that writes made now queue; the returned func waits until n have queued,
// commits them as the end of a busy transaction would, and leaves the committer idle.
func (s *Store) HoldGroup() (commit func(n int)) {
	g := s.group
	g.mu.Lock()
	g.running = g.inflight
	g.mu.Unlock()
	return func(n int) {
		for {
			g.mu.Lock()
			queued := len(g.queue)
			g.mu.Unlock()
			if queued >= n {
				break
			}
			time.Sleep(time.Millisecond)
		}
		g.commitQueued()
		g.mu.Lock()
		g.running = 0
		g.mu.Unlock()
	}
}
