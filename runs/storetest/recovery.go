package storetest

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"interlock/runs"
	"interlock/runtype"
)

func testExpiredRuns(t *testing.T, open Opener) {
	each(t, open, "RunningRunsWhoseLeaseExpiredWithTheirSnapshots", func(t *testing.T, f *fixture) {
		held := f.insert(runOpts{})
		expired := f.insert(runOpts{Snapshot: `{"expired":true}`})
		f.checkpoint(expired, at(10), runtype.Event{Type: runtype.EventStepFinished})
		released := f.insert(runOpts{Snapshot: `{"released":true}`})
		suspended := f.suspended(runOpts{})
		done := f.finished(runOpts{}, at(11))
		f.expire(expired)
		if err := f.s.ReleaseLease(f.ctx, released.ID, released.Lease); err != nil {
			t.Fatal(err)
		}
		list, err := f.s.ExpiredRuns(f.ctx, 100)
		if err != nil {
			t.Fatal(err)
		}
		byID := map[string]*runs.Record{}
		for _, r := range list {
			byID[r.ID] = r
		}
		if len(list) != 2 || byID[expired.ID] == nil || byID[released.ID] == nil {
			t.Fatalf("ExpiredRuns = %v, want %s (expired) and %s (released); not %s (held), %s (suspended), %s (finished)",
				recordIDs(list), expired.ID, released.ID, held.ID, suspended.ID, done.ID)
		}
		e := byID[expired.ID]
		wantStr(t, "snapshot of the expired run", e.Snapshot, ptr(`{"expired":true}`))
		wantStr(t, "lease owner of the expired run", e.LeaseOwner, &expired.Lease)
		want := f.get(expired.ID)
		if e.Status != runtype.StatusRunning || e.LastSeq != 2 || e.Version != want.Version || e.RecoveryAttempts != 0 || e.AgentID != want.AgentID {
			t.Errorf("expired run as listed = %+v, want status RUNNING, last seq 2, version %d, agent %s", e, want.Version, want.AgentID)
		}
		wantStr(t, "snapshot of the released run", byID[released.ID].Snapshot, ptr(`{"released":true}`))
	})

	each(t, open, "OldestLeaseFirstUpToLimit", func(t *testing.T, f *fixture) {
		// Ids ascend 1, 2, 3; the leases run out in the order 3, 1, 2.
		a, b, c := f.insert(runOpts{N: 1}), f.insert(runOpts{N: 2}), f.insert(runOpts{N: 3})
		for _, r := range []*live{c, a, b} {
			f.expire(r) // each waits for its lease to end, so each ends after the one before
		}
		wantIDs(t, "ExpiredRuns", f.expiredIDs(), c.ID, a.ID, b.ID)
		list, err := f.s.ExpiredRuns(f.ctx, 2)
		if err != nil {
			t.Fatal(err)
		}
		wantIDs(t, "ExpiredRuns(limit 2)", recordIDs(list), c.ID, a.ID)
	})
}

func testClaimExpired(t *testing.T, open Opener) {
	each(t, open, "LeasesTheRunToTheClaimer", func(t *testing.T, f *fixture) {
		r := f.insert(runOpts{})
		old := *r
		f.expire(r)
		before := f.get(r.ID)
		f.claim(r, "lease-new")
		got := f.get(r.ID)
		wantStr(t, "lease owner", got.LeaseOwner, ptr("lease-new"))
		if got.Status != runtype.StatusRunning || got.Version <= before.Version || got.LastSeq != before.LastSeq || got.RecoveryAttempts != 1 {
			t.Errorf("claimed run: status %s, version %d → %d, last seq %d, recovery attempts %d; want RUNNING, a new version, %d, 1",
				got.Status, before.Version, got.Version, got.LastSeq, got.RecoveryAttempts, before.LastSeq)
		}
		if f.expired(r.ID) {
			t.Error("a run claimed for an hour is listed as expired")
		}
		wantLeaseLost(t, "Checkpoint by the previous holder", f.s.Checkpoint(f.ctx, cp(&old, at(10), runtype.Event{Type: runtype.EventStepFinished})))
		f.checkpoint(r, at(11), runtype.Event{Type: runtype.EventStepFinished})
	})

	each(t, open, "CountsEveryAttempt", func(t *testing.T, f *fixture) {
		r := f.insert(runOpts{})
		f.expire(r)
		f.claim(r, "lease-2")
		if err := f.s.ReleaseLease(f.ctx, r.ID, r.Lease); err != nil {
			t.Fatal(err)
		}
		got := f.get(r.ID)
		if err := f.s.DeferRecovery(f.ctx, r.ID, got.Version, time.Millisecond); err != nil {
			t.Fatal(err)
		}
		f.eventually("the deferred run is listed again", func() bool { return f.expired(r.ID) })
		f.claim(r, "lease-3")
		if n := f.get(r.ID).RecoveryAttempts; n != 3 {
			t.Errorf("recovery attempts after a claim, a deferral and a claim = %d, want 3", n)
		}
	})

	each(t, open, "FailsWhenAnythingMoved", func(t *testing.T, f *fixture) {
		held := f.insert(runOpts{})
		suspended := f.suspended(runOpts{})
		done := f.finished(runOpts{}, at(10))
		r := f.insert(runOpts{})
		f.expire(r)
		read := f.get(r.ID)
		claim := func(c runs.Claim) runs.Claim { c.Lease, c.TTL = "thief", hour; return c }
		for name, c := range map[string]runs.Claim{
			"an older version": claim(runs.Claim{RunID: r.ID, Version: read.Version - 1, LastSeq: read.LastSeq}),
			"a newer version":  claim(runs.Claim{RunID: r.ID, Version: read.Version + 1, LastSeq: read.LastSeq}),
			"an older seq":     claim(runs.Claim{RunID: r.ID, Version: read.Version, LastSeq: read.LastSeq - 1}),
			"a newer seq":      claim(runs.Claim{RunID: r.ID, Version: read.Version, LastSeq: read.LastSeq + 1}),
		} {
			ok, err := f.s.ClaimExpired(f.ctx, c)
			if err != nil || ok {
				t.Errorf("ClaimExpired with %s = %v, %v; want false, nil", name, ok, err)
			}
		}
		wantUnchanged(t, "failed claims", f.get(r.ID), read)
		for name, rn := range map[string]*runs.Record{"a held lease": f.get(held.ID), "a suspended run": suspended, "a finished run": f.get(done.ID)} {
			ok, err := f.s.ClaimExpired(f.ctx, claim(runs.Claim{RunID: rn.ID, Version: rn.Version, LastSeq: rn.LastSeq}))
			if err != nil || ok {
				t.Errorf("ClaimExpired of %s = %v, %v; want false, nil", name, ok, err)
			}
			wantUnchanged(t, "ClaimExpired of "+name, f.get(rn.ID), rn)
		}
		ok, err := f.s.ClaimExpired(f.ctx, claim(runs.Claim{RunID: id(99)}))
		if err != nil || ok {
			t.Errorf("ClaimExpired of an unknown run = %v, %v; want false, nil", ok, err)
		}
	})

	each(t, open, "OfConcurrentClaimersExactlyOneWins", func(t *testing.T, f *fixture) {
		r := f.insert(runOpts{})
		f.expire(r)
		read := f.get(r.ID)
		const claimers = 8
		won := make([]bool, claimers)
		errs := make([]error, claimers)
		var wg sync.WaitGroup
		for i := range claimers {
			wg.Go(func() {
				won[i], errs[i] = f.s.ClaimExpired(f.ctx, runs.Claim{RunID: r.ID, Version: read.Version, LastSeq: read.LastSeq, Lease: fmt.Sprintf("lease-%d", i), TTL: hour})
			})
		}
		wg.Wait()
		winner := -1
		for i := range claimers {
			if errs[i] != nil {
				t.Errorf("claimer %d: %v", i, errs[i])
			}
			if won[i] {
				if winner >= 0 {
					t.Fatalf("claimers %d and %d both won", winner, i)
				}
				winner = i
			}
		}
		if winner < 0 {
			t.Fatal("no claimer won")
		}
		got := f.get(r.ID)
		wantStr(t, "lease owner", got.LeaseOwner, ptr(fmt.Sprintf("lease-%d", winner)))
		if got.RecoveryAttempts != 1 {
			t.Errorf("recovery attempts = %d, want 1 (one claim held)", got.RecoveryAttempts)
		}
	})

	// The late holder of an expired lease writes (a checkpoint, a suspension or the outcome)
	// while a claimer takes the run over: exactly one of them goes on.
	each(t, open, "HolderWriteOrClaimNeverBoth", func(t *testing.T, f *fixture) {
		writes := []func(r *live) error{
			func(r *live) error {
				return f.s.Checkpoint(f.ctx, cp(r, at(10), runtype.Event{Type: runtype.EventStepFinished}))
			},
			func(r *live) error {
				return f.s.Suspend(f.ctx, suspension(r, approval("call-1"), at(10), "instance-1"))
			},
			func(r *live) error { return f.s.Finish(f.ctx, finishing(r, at(10))) },
		}
		const rounds = 9
		var list []*live
		for range rounds {
			list = append(list, f.insert(runOpts{}))
		}
		for _, r := range list {
			f.expire(r)
		}
		for i, r := range list {
			read := f.get(r.ID)
			var wrote error
			var claimed bool
			var claimErr error
			var wg sync.WaitGroup
			wg.Go(func() { wrote = writes[i%len(writes)](r) })
			wg.Go(func() {
				claimed, claimErr = f.s.ClaimExpired(f.ctx, runs.Claim{RunID: r.ID, Version: read.Version, LastSeq: read.LastSeq, Lease: "claimer", TTL: hour})
			})
			wg.Wait()
			if claimErr != nil || wrote != nil && !errors.Is(wrote, runs.ErrLeaseLost) {
				t.Fatalf("%s: checkpoint %v, claim error %v", r.ID, wrote, claimErr)
			}
			if (wrote == nil) == claimed {
				t.Fatalf("%s: the holder's checkpoint returned %v and the claim %v: exactly one must hold", r.ID, wrote, claimed)
			}
			got := f.get(r.ID)
			if claimed {
				wantStr(t, r.ID+" lease owner", got.LeaseOwner, ptr("claimer"))
				wantUnchanged(t, "a write that lost to a claim", got, &runs.Record{
					Run:     runtype.Run{Status: runtype.StatusRunning, LastSeq: read.LastSeq, UpdatedAt: read.UpdatedAt},
					Version: got.Version, LeaseOwner: ptr("claimer"), Snapshot: read.Snapshot, RecoveryAttempts: 1})
			} else if got.LastSeq == read.LastSeq {
				t.Errorf("%s: the holder's write succeeded but stored nothing", r.ID)
			}
		}
	})
}

func testDeferRecovery(t *testing.T, open Opener) {
	each(t, open, "CountsTheAttemptAndLeavesTheRunOutForTheBackoff", func(t *testing.T, f *fixture) {
		deferred, other := f.insert(runOpts{}), f.insert(runOpts{})
		f.expire(deferred)
		f.expire(other)
		before := f.get(deferred.ID)
		if err := f.s.DeferRecovery(f.ctx, deferred.ID, before.Version, hour); err != nil {
			t.Fatal(err)
		}
		wantIDs(t, "ExpiredRuns after a deferral", f.expiredIDs(), other.ID)
		got := f.get(deferred.ID)
		if got.RecoveryAttempts != 1 || got.Status != runtype.StatusRunning {
			t.Errorf("deferred run: %d recovery attempts, status %s; want 1, RUNNING", got.RecoveryAttempts, got.Status)
		}
	})

	each(t, open, "RunReturnsAfterTheBackoff", func(t *testing.T, f *fixture) {
		r := f.insert(runOpts{})
		f.expire(r)
		read := f.get(r.ID)
		if err := f.s.DeferRecovery(f.ctx, r.ID, read.Version, time.Millisecond); err != nil {
			t.Fatal(err)
		}
		f.eventually("a run deferred for 1ms is listed again", func() bool { return f.expired(r.ID) })
		again := f.get(r.ID)
		if err := f.s.DeferRecovery(f.ctx, r.ID, again.Version, time.Millisecond); err != nil {
			t.Fatal(err)
		}
		if n := f.get(r.ID).RecoveryAttempts; n != 2 {
			t.Errorf("recovery attempts after two deferrals = %d, want 2", n)
		}
	})

	// A deferral read the run as expired; when its holder renewed the lease since (which keeps
	// the version), the run is not expired any more and nothing is counted.
	each(t, open, "RunWhoseLeaseHoldsAgainChangesNothing", func(t *testing.T, f *fixture) {
		r := f.insert(runOpts{})
		f.expire(r)
		read := f.get(r.ID)
		if err := f.s.RenewLease(f.ctx, r.ID, r.Lease, hour); err != nil {
			t.Fatal(err)
		}
		before := f.get(r.ID)
		if err := f.s.DeferRecovery(f.ctx, r.ID, read.Version, hour); err != nil && !errors.Is(err, runs.ErrStale) {
			t.Fatalf("DeferRecovery of a run held again: %v, want nil or ErrStale", err)
		}
		wantUnchanged(t, "DeferRecovery of a run held again", f.get(r.ID), before)
	})

	// The version makes the deferral a compare-and-set: a run claimed since it was read is
	// neither counted nor hidden.
	each(t, open, "StaleVersionChangesNothing", func(t *testing.T, f *fixture) {
		r := f.insert(runOpts{})
		f.expire(r)
		read := f.get(r.ID)
		f.claim(r, "lease-2")
		if err := f.s.ReleaseLease(f.ctx, r.ID, r.Lease); err != nil {
			t.Fatal(err)
		}
		before := f.get(r.ID)
		if err := f.s.DeferRecovery(f.ctx, r.ID, read.Version, hour); err != nil && !errors.Is(err, runs.ErrStale) {
			t.Fatalf("DeferRecovery with a stale version: %v, want nil or ErrStale", err)
		}
		wantUnchanged(t, "a stale DeferRecovery", f.get(r.ID), before)
		if !f.expired(r.ID) {
			t.Error("a stale DeferRecovery hid the run from ExpiredRuns")
		}
	})
}
