package observe

import (
	"context"

	"interlock/runs"
)

// countingStore is a runs.Store that counts the events of every write that commits.
type countingStore struct {
	runs.Store
	m *Metrics
}

// Store wraps st so that the events it commits are counted in interlock_run_events_written_total.
// Reads and every other method pass through unchanged.
func (m *Metrics) Store(st runs.Store) runs.Store { return &countingStore{Store: st, m: m} }

func (s *countingStore) count(err error, n int) error {
	if err == nil && n > 0 {
		s.m.eventsWritten.Add(float64(n))
	}
	return err
}

func ancestorEvents(as []runs.AncestorWrite) int {
	n := 0
	for _, a := range as {
		n += len(a.Events)
	}
	return n
}

func (s *countingStore) InsertRun(ctx context.Context, r runs.NewRun) error {
	return s.count(s.Store.InsertRun(ctx, r), len(r.Events))
}

func (s *countingStore) Checkpoint(ctx context.Context, c runs.Checkpoint) error {
	return s.count(s.Store.Checkpoint(ctx, c), len(c.Events))
}

func (s *countingStore) Suspend(ctx context.Context, su runs.Suspension) error {
	return s.count(s.Store.Suspend(ctx, su), len(su.Events)+ancestorEvents(su.Ancestors))
}

func (s *countingStore) Finish(ctx context.Context, f runs.Finish) error {
	return s.count(s.Store.Finish(ctx, f), len(f.Events))
}

func (s *countingStore) Delegate(ctx context.Context, d runs.Delegation) error {
	return s.count(s.Store.Delegate(ctx, d), len(d.Events)+len(d.Child.Events))
}

func (s *countingStore) Decide(ctx context.Context, d runs.DecisionWrite) error {
	return s.count(s.Store.Decide(ctx, d), len(d.Events)+ancestorEvents(d.Ancestors))
}
