package gormstore

import (
	"testing"
	"time"

	"gorm.io/gorm"
)

// BeforeGroupCommit makes f run in every grouped transaction of s just before its COMMIT.
func (s *Store) BeforeGroupCommit(f func(tx *gorm.DB)) { s.group.beforeCommit = f }

// NoGrouping makes every write of s commit in a transaction of its own, at once, as before
// group commit: the baseline of BenchmarkRunWrites.
func (s *Store) NoGrouping() { s.group.max, s.group.inflight = 1, 1<<20 }

// GroupHold keeps the group committer of a store busy, as if all its transactions were being
// committed, so that the writes made meanwhile queue.
type GroupHold struct {
	t testing.TB
	g *groupCommit
}

// HoldGroup waits for the group committer of s to be idle and holds it busy.
func (s *Store) HoldGroup(t testing.TB) *GroupHold {
	t.Helper()
	h := &GroupHold{t: t, g: s.group}
	h.until("the group committer is idle", func() bool { return h.g.running == 0 })
	h.g.mu.Lock()
	h.g.running = h.g.inflight
	h.g.mu.Unlock()
	return h
}

// WaitQueued waits until n writes queue.
func (h *GroupHold) WaitQueued(n int) {
	h.t.Helper()
	h.until("writes queue", func() bool { return len(h.g.queue) == n })
}

// Commit commits what queued, as the end of a busy transaction would, and leaves the committer
// idle.
func (h *GroupHold) Commit() {
	h.g.mu.Lock()
	h.g.running -= h.g.inflight - 1 // this goroutine is the one committer left
	h.g.mu.Unlock()
	h.g.commitQueued()
}

func (h *GroupHold) until(what string, cond func() bool) {
	h.t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		h.g.mu.Lock()
		ok := cond()
		h.g.mu.Unlock()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("waited 10s for %s", what)
		}
	}
}
