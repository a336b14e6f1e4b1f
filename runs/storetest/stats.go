package storetest

import (
	"maps"
	"testing"

	"interlock/runs"
)

func testCountByStatus(t *testing.T, open Opener) {
	each(t, open, "EmptyStoreCountsNothing", func(t *testing.T, f *fixture) {
		got, err := f.s.CountByStatus(f.ctx)
		if err != nil {
			t.Fatal(err)
		}
		for st, n := range got {
			if n != 0 {
				t.Errorf("empty store: %s = %d, want 0", st, n)
			}
		}
	})
	each(t, open, "CountsEveryStatusAndFollowsChanges", func(t *testing.T, f *fixture) {
		f.insert(runOpts{})                 // RUNNING
		f.insert(runOpts{})                 // RUNNING
		f.suspended(runOpts{})              // SUSPENDED
		decided := f.suspended(runOpts{})   // SUSPENDED, then RUNNING below
		f.finished(runOpts{}, at(50))       // COMPLETED
		f.fail(f.insert(runOpts{}), at(51)) // FAILED
		f.delegated()                       // WAITING, and its child RUNNING
		want := map[runs.Status]int64{
			runs.StatusRunning: 3, runs.StatusSuspended: 2, runs.StatusWaiting: 1,
			runs.StatusCompleted: 1, runs.StatusFailed: 1,
		}
		f.wantCounts(want)

		f.decide(decided, decision(decided, runs.DecisionApproved, "lease-new", at(60)))
		want[runs.StatusSuspended]--
		want[runs.StatusRunning]++
		f.wantCounts(want)
	})
}

// wantCounts checks CountByStatus against want (a status missing from the answer counts 0).
func (f *fixture) wantCounts(want map[runs.Status]int64) {
	f.t.Helper()
	got, err := f.s.CountByStatus(f.ctx)
	if err != nil {
		f.t.Fatal(err)
	}
	norm := map[runs.Status]int64{}
	for st, n := range got {
		if n != 0 {
			norm[st] = n
		}
	}
	if !maps.Equal(norm, want) {
		f.t.Fatalf("CountByStatus = %v, want %v", got, want)
	}
}
