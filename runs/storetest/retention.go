package storetest

import (
	"sync"
	"testing"

	"interlock/runs"
	"interlock/runtype"
)

func testPurgeFinished(t *testing.T, open Opener) {
	each(t, open, "DeletesRunsFinishedBeforeCutoffWithTheirEvents", func(t *testing.T, f *fixture) {
		old := f.finished(runOpts{}, at(10))
		failed := f.insert(runOpts{})
		f.fail(failed, at(11))
		edge := f.finished(runOpts{}, at(20)) // finished at the cutoff, not before it
		recent := f.finished(runOpts{}, at(30))
		suspended := f.suspended(runOpts{CreatedAt: at(-100)})
		running := f.insert(runOpts{CreatedAt: at(-100)})
		n, err := f.s.PurgeFinished(f.ctx, runtype.StoredTime(at(20)), runtype.StoredTime(at(20)), 100)
		if err != nil || n != 2 {
			t.Fatalf("PurgeFinished = %d, %v; want 2", n, err)
		}
		for _, gone := range []string{old.ID, failed.ID} {
			if r, err := f.s.GetRun(f.ctx, gone); err != nil || r != nil {
				t.Errorf("GetRun of purged %s = %v, %v; want nil", gone, r, err)
			}
			if evs := f.events(gone); len(evs) != 0 {
				t.Errorf("purged %s still has events %s", gone, seqTypes(evs))
			}
		}
		for _, kept := range []string{edge.ID, recent.ID, suspended.ID, running.ID} {
			r := f.get(kept)
			wantGapless(t, f.events(kept), r.LastSeq)
		}
		p, err := f.s.Progress(f.ctx, []string{old.ID, edge.ID})
		if err != nil || len(p) != 1 {
			t.Errorf("Progress after purge = %v, %v; want the kept run only", p, err)
		}
	})

	each(t, open, "UpToLimitThenNothing", func(t *testing.T, f *fixture) {
		for i := range 5 {
			f.finished(runOpts{}, at(10+i))
		}
		for _, want := range []int{2, 2, 1, 0, 0} {
			n, err := f.s.PurgeFinished(f.ctx, runtype.StoredTime(at(100)), runtype.StoredTime(at(100)), 2)
			if err != nil || n != want {
				t.Fatalf("PurgeFinished(limit 2) = %d, %v; want %d", n, err, want)
			}
		}
		_, total, err := f.s.ListRecent(f.ctx, runs.RecentParams{Statuses: []runtype.Status{runtype.StatusCompleted, runtype.StatusFailed}, PerPage: 10})
		if err != nil || total != 0 {
			t.Errorf("finished runs after purging = %d, %v; want 0", total, err)
		}
	})

	// Any number of instances purge at once: each run is deleted, and counted, by one of them.
	each(t, open, "ConcurrentPurgesCountEachRunOnce", func(t *testing.T, f *fixture) {
		const rounds, purgers, perRound = 10, 4, 5
		for round := range rounds {
			for i := range perRound {
				f.finished(runOpts{}, at(10+i))
			}
			counts := make([]int, purgers)
			errs := make([]error, purgers)
			var wg sync.WaitGroup
			for i := range purgers {
				wg.Go(func() {
					counts[i], errs[i] = f.s.PurgeFinished(f.ctx, runtype.StoredTime(at(100)), runtype.StoredTime(at(100)), 100)
				})
			}
			wg.Wait()
			sum := 0
			for i := range purgers {
				if errs[i] != nil {
					t.Fatalf("round %d, purger %d: %v", round, i, errs[i])
				}
				sum += counts[i]
			}
			if sum != perRound {
				t.Fatalf("round %d: %d concurrent purges of %d runs report %v deleted (sum %d): a run was counted by two",
					round, purgers, perRound, counts, sum)
			}
		}
	})

	each(t, open, "NeverSuspendedOrRunningRuns", func(t *testing.T, f *fixture) {
		f.suspended(runOpts{CreatedAt: at(-1000)})
		f.insert(runOpts{CreatedAt: at(-1000)})
		f.expire(f.insert(runOpts{CreatedAt: at(-1000)}))
		n, err := f.s.PurgeFinished(f.ctx, runtype.StoredTime(at(1_000_000)), runtype.StoredTime(at(1_000_000)), 100)
		if err != nil || n != 0 {
			t.Fatalf("PurgeFinished with only unfinished runs = %d, %v; want 0", n, err)
		}
	})

	// The tool-call rows (decisions) go with the run: an id used again starts with none.
	each(t, open, "DeletesTheToolCallRowsToo", func(t *testing.T, f *fixture) {
		rn := f.suspended(runOpts{N: 1})
		r := f.decide(rn, decision(rn, runtype.DecisionApproved, "lease-2", at(20)))
		f.finish(r, at(21))
		if n, err := f.s.PurgeFinished(f.ctx, runtype.StoredTime(at(22)), runtype.StoredTime(at(22)), 10); err != nil || n != 1 {
			t.Fatalf("PurgeFinished = %d, %v; want 1", n, err)
		}
		again := f.insert(runOpts{N: 1})
		got := f.get(again.ID)
		if len(got.Decisions) != 0 || len(got.ToolCalls) != 0 {
			t.Errorf("a run inserted under a purged id has decisions %+v and calls %+v of the purged run", got.Decisions, got.ToolCalls)
		}
		wantGapless(t, f.events(again.ID), 1)
	})
}
