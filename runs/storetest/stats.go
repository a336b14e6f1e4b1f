package storetest

import (
	"maps"
	"testing"

	"interlock/runtype"
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
		want := map[runtype.Status]int64{
			runtype.StatusRunning: 3, runtype.StatusSuspended: 2, runtype.StatusWaiting: 1,
			runtype.StatusCompleted: 1, runtype.StatusFailed: 1,
		}
		f.wantCounts(want)

		f.decide(decided, decision(decided, runtype.DecisionApproved, "lease-new", at(60)))
		want[runtype.StatusSuspended]--
		want[runtype.StatusRunning]++
		f.wantCounts(want)
	})
}

// wantCounts checks CountByStatus against want (a status missing from the answer counts 0).
func (f *fixture) wantCounts(want map[runtype.Status]int64) {
	f.t.Helper()
	got, err := f.s.CountByStatus(f.ctx)
	if err != nil {
		f.t.Fatal(err)
	}
	norm := map[runtype.Status]int64{}
	for st, n := range got {
		if n != 0 {
			norm[st] = n
		}
	}
	if !maps.Equal(norm, want) {
		f.t.Fatalf("CountByStatus = %v, want %v", got, want)
	}
}
