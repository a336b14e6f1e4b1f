package storetest

import (
	"fmt"
	"testing"

	"interlock/runs"
	"interlock/runtype"
)

func testCheckpoint(t *testing.T, open Opener) {
	each(t, open, "AppendsEventsWithGaplessSeq", func(t *testing.T, f *fixture) {
		r := f.insert(runOpts{})
		a := []runtype.Event{{Type: runtype.EventTextDelta, Text: "one"}, {Type: runtype.EventStepFinished}}
		b := []runtype.Event{{Type: runtype.EventTextDelta, Text: "two"}}
		f.checkpoint(r, at(10), a...)
		f.checkpoint(r, at(11)) // no events: the seq stays
		f.checkpoint(r, at(12), b...)
		evs := f.events(r.ID)
		wantGapless(t, evs, 4)
		wantEvents(t, "checkpointed events", evs[1:], append(stored(r.ID, 1, at(10), a...), stored(r.ID, 3, at(12), b...)...))
		got := f.get(r.ID)
		if got.LastSeq != 4 || got.Status != runtype.StatusRunning {
			t.Errorf("run after checkpoints: last seq %d, status %s; want 4, RUNNING", got.LastSeq, got.Status)
		}
		wantTime(t, "updatedAt", got.UpdatedAt, at(12))
		wantTime(t, "createdAt", got.CreatedAt, at(1))
	})

	each(t, open, "SnapshotReplacedOnlyWhenGiven", func(t *testing.T, f *fixture) {
		r := f.insert(runOpts{Snapshot: `{"v":0}`})
		f.checkpoint(r, at(10), runtype.Event{Type: runtype.EventStepFinished})
		wantStr(t, "snapshot after a checkpoint without one", f.get(r.ID).Snapshot, ptr(`{"v":0}`))
		c := cp(r, at(11))
		c.Snapshot = ptr(`{"v":1}`)
		if err := f.s.Checkpoint(f.ctx, c); err != nil {
			t.Fatal(err)
		}
		wantStr(t, "snapshot after a checkpoint with one", f.get(r.ID).Snapshot, ptr(`{"v":1}`))
	})

	each(t, open, "RenewsTheLease", func(t *testing.T, f *fixture) {
		r := f.insert(runOpts{})
		f.expire(r)
		f.checkpoint(r, at(10), runtype.Event{Type: runtype.EventStepFinished}) // TTL an hour
		if f.expired(r.ID) {
			t.Error("a run checkpointed with a lease of an hour is still listed as expired")
		}
	})

	each(t, open, "EndsTheCountOfRecoveryAttempts", func(t *testing.T, f *fixture) {
		r := f.insert(runOpts{})
		f.expire(r)
		f.claim(r, "lease-2")
		if n := f.get(r.ID).RecoveryAttempts; n != 1 {
			t.Fatalf("recovery attempts after a claim = %d, want 1", n)
		}
		f.checkpoint(r, at(10), runtype.Event{Type: runtype.EventStepFinished})
		if n := f.get(r.ID).RecoveryAttempts; n != 0 {
			t.Errorf("recovery attempts after a checkpoint = %d, want 0 (they count since the last checkpoint)", n)
		}
	})

	each(t, open, "WrongLeaseIsLostAndWritesNothing", func(t *testing.T, f *fixture) {
		r := f.insert(runOpts{})
		before := f.get(r.ID)
		c := cp(&live{ID: r.ID, Lease: "someone-else", Seq: r.Seq}, at(10), runtype.Event{Type: runtype.EventTextDelta, Text: "x"})
		c.Snapshot = ptr(`{"stolen":true}`)
		wantLeaseLost(t, "Checkpoint with another lease", f.s.Checkpoint(f.ctx, c))
		wantUnchanged(t, "a lost Checkpoint", f.get(r.ID), before)
		wantGapless(t, f.events(r.ID), 1)
	})

	each(t, open, "LeaseOfAClaimedRunIsLost", func(t *testing.T, f *fixture) {
		r := f.insert(runOpts{})
		old := *r
		f.expire(r)
		f.claim(r, "lease-new")
		wantLeaseLost(t, "Checkpoint by the previous holder", f.s.Checkpoint(f.ctx, cp(&old, at(10), runtype.Event{Type: runtype.EventStepFinished})))
		f.checkpoint(r, at(11), runtype.Event{Type: runtype.EventStepFinished})
		wantGapless(t, f.events(r.ID), 2)
	})

	// A lease that ran out still holds until another instance claims the run: the claim checks
	// the version and last seq it read and that the lease is still expired, so a late write by
	// the holder and a claim never both succeed (see ClaimExpired/HolderWriteOrClaimNeverBoth).
	each(t, open, "ExpiredLeaseHoldsUntilClaimed", func(t *testing.T, f *fixture) {
		r := f.insert(runOpts{})
		f.expire(r)
		read := f.get(r.ID)
		f.checkpoint(r, at(10), runtype.Event{Type: runtype.EventStepFinished})
		if f.expired(r.ID) {
			t.Error("the holder's checkpoint did not renew its expired lease")
		}
		ok, err := f.s.ClaimExpired(f.ctx, runs.Claim{RunID: r.ID, Version: read.Version, LastSeq: read.LastSeq, Lease: "late", TTL: hour})
		if err != nil || ok {
			t.Errorf("ClaimExpired after the holder wrote = %v, %v; want false, nil", ok, err)
		}
	})

	each(t, open, "RunNotRunningIsLost", func(t *testing.T, f *fixture) {
		s := f.insert(runOpts{})
		old := *s
		f.suspend(s, approval("call-1"), at(10), "instance-1")
		wantLeaseLost(t, "Checkpoint of a suspended run", f.s.Checkpoint(f.ctx, cp(&old, at(11), runtype.Event{Type: runtype.EventStepFinished})))
		d := f.insert(runOpts{})
		old = *d
		f.finish(d, at(12))
		wantLeaseLost(t, "Checkpoint of a finished run", f.s.Checkpoint(f.ctx, cp(&old, at(13), runtype.Event{Type: runtype.EventStepFinished})))
		wantLeaseLost(t, "Checkpoint of an unknown run", f.s.Checkpoint(f.ctx, cp(&live{ID: id(99), Lease: "x"}, at(13))))
	})

	each(t, open, "SeqWrittenTwiceFailsAndWritesNothing", func(t *testing.T, f *fixture) {
		r := f.insert(runOpts{})
		again := *r
		f.checkpoint(r, at(10), runtype.Event{Type: runtype.EventTextDelta, Text: "first"})
		before := f.get(r.ID)
		c := cp(&again, at(11), runtype.Event{Type: runtype.EventTextDelta, Text: "fork"}, runtype.Event{Type: runtype.EventStepFinished})
		c.Snapshot = ptr(`{"fork":true}`)
		if err := f.s.Checkpoint(f.ctx, c); err == nil {
			t.Fatal("a second Checkpoint after the same seq succeeded: the log forked")
		}
		wantUnchanged(t, "a failed Checkpoint", f.get(r.ID), before)
		evs := f.events(r.ID)
		wantGapless(t, evs, 2)
		if evs[1].Text != "first" {
			t.Errorf("event 2 = %q, want the first write's", evs[1].Text)
		}
	})

	// Events are written in the transaction of the state they describe: a reader that sees the
	// run's last seq finds every event up to it.
	each(t, open, "ReadersNeverSeeLastSeqAheadOfEvents", func(t *testing.T, f *fixture) {
		r := f.insert(runOpts{})
		const writes = 60
		done := make(chan error, 1)
		go func() {
			for i := range writes {
				evs := make([]runtype.Event, 1+i%3)
				for j := range evs {
					evs[j] = runtype.Event{Type: runtype.EventTextDelta, Text: fmt.Sprintf("%d.%d", i, j)}
				}
				if err := f.s.Checkpoint(f.ctx, cp(r, at(10+i), evs...)); err != nil {
					done <- fmt.Errorf("checkpoint %d: %w", i, err)
					return
				}
				r.Seq += int64(len(evs))
			}
			done <- nil
		}()
		for reading := true; reading; {
			select {
			case err := <-done:
				if err != nil {
					t.Fatal(err)
				}
				reading = false
			default:
			}
			p, err := f.s.Progress(f.ctx, []string{r.ID})
			if err != nil {
				t.Fatal(err)
			}
			evs, err := f.s.Events(f.ctx, r.ID, 0, 10_000)
			if err != nil {
				t.Fatal(err)
			}
			if int64(len(evs)) < p[r.ID].LastSeq {
				t.Fatalf("Progress said last seq %d, then Events found only %d events", p[r.ID].LastSeq, len(evs))
			}
			for i, ev := range evs {
				if ev.Seq != int64(i)+1 {
					t.Fatalf("a reader saw a gap: %s", seqTypes(evs))
				}
			}
		}
		wantGapless(t, f.events(r.ID), r.Seq)
	})
}

func testRenewLease(t *testing.T, open Opener) {
	each(t, open, "ExtendsTheLeaseToTTLFromNow", func(t *testing.T, f *fixture) {
		r := f.insert(runOpts{})
		f.expire(r) // renews for 1ms and waits for it to run out
		if err := f.s.RenewLease(f.ctx, r.ID, r.Lease, hour); err != nil {
			t.Fatal(err)
		}
		if f.expired(r.ID) {
			t.Error("a run whose lease was renewed for an hour is listed as expired")
		}
		got := f.get(r.ID)
		wantStr(t, "lease owner", got.LeaseOwner, &r.Lease)
		if got.LastSeq != 1 || got.Status != runtype.StatusRunning {
			t.Errorf("RenewLease changed the run: last seq %d, status %s", got.LastSeq, got.Status)
		}
	})

	each(t, open, "WrongLeaseIsLost", func(t *testing.T, f *fixture) {
		r := f.insert(runOpts{})
		f.expire(r)
		wantLeaseLost(t, "RenewLease with another lease", f.s.RenewLease(f.ctx, r.ID, "someone-else", hour))
		if !f.expired(r.ID) {
			t.Error("a lost RenewLease renewed the lease")
		}
	})

	each(t, open, "LeaseOfAClaimedRunIsLost", func(t *testing.T, f *fixture) {
		r := f.insert(runOpts{})
		old := r.Lease
		f.expire(r)
		f.claim(r, "lease-new")
		wantLeaseLost(t, "RenewLease by the previous holder", f.s.RenewLease(f.ctx, r.ID, old, hour))
	})

	each(t, open, "RunNotRunningIsLost", func(t *testing.T, f *fixture) {
		s := f.insert(runOpts{})
		f.suspend(s, approval("call-1"), at(10), "instance-1")
		wantLeaseLost(t, "RenewLease of a suspended run", f.s.RenewLease(f.ctx, s.ID, s.Lease, hour))
		d := f.insert(runOpts{})
		f.finish(d, at(11))
		wantLeaseLost(t, "RenewLease of a finished run", f.s.RenewLease(f.ctx, d.ID, d.Lease, hour))
		wantLeaseLost(t, "RenewLease of an unknown run", f.s.RenewLease(f.ctx, id(99), "x", hour))
	})
}

func testReleaseLease(t *testing.T, open Opener) {
	each(t, open, "EndsTheLeaseAtOnce", func(t *testing.T, f *fixture) {
		r := f.insert(runOpts{TTL: hour})
		f.checkpoint(r, at(10), runtype.Event{Type: runtype.EventStepFinished})
		if err := f.s.ReleaseLease(f.ctx, r.ID, r.Lease); err != nil {
			t.Fatal(err)
		}
		if !f.expired(r.ID) {
			t.Fatal("a released run is not listed as expired at once")
		}
		got := f.get(r.ID)
		if got.Status != runtype.StatusRunning || got.LastSeq != 2 || got.LeaseOwner != nil {
			t.Errorf("released run: status %s, last seq %d, lease owner %s; want RUNNING, 2, nil", got.Status, got.LastSeq, show(got.LeaseOwner))
		}
		f.claim(r, "lease-new")
	})

	each(t, open, "ReleasedLeaseIsLost", func(t *testing.T, f *fixture) {
		r := f.insert(runOpts{})
		if err := f.s.ReleaseLease(f.ctx, r.ID, r.Lease); err != nil {
			t.Fatal(err)
		}
		wantLeaseLost(t, "Checkpoint after release", f.s.Checkpoint(f.ctx, cp(r, at(10), runtype.Event{Type: runtype.EventStepFinished})))
		wantLeaseLost(t, "RenewLease after release", f.s.RenewLease(f.ctx, r.ID, r.Lease, hour))
		wantLeaseLost(t, "ReleaseLease after release", f.s.ReleaseLease(f.ctx, r.ID, r.Lease))
		if !f.expired(r.ID) {
			t.Error("lost writes after a release took the lease back")
		}
	})

	each(t, open, "WrongLeaseIsLost", func(t *testing.T, f *fixture) {
		r := f.insert(runOpts{})
		wantLeaseLost(t, "ReleaseLease with another lease", f.s.ReleaseLease(f.ctx, r.ID, "someone-else"))
		if f.expired(r.ID) {
			t.Error("a lost ReleaseLease released the lease")
		}
		wantStr(t, "lease owner", f.get(r.ID).LeaseOwner, &r.Lease)
	})

	each(t, open, "RunNotRunningIsLost", func(t *testing.T, f *fixture) {
		s := f.insert(runOpts{})
		f.suspend(s, approval("call-1"), at(10), "instance-1")
		wantLeaseLost(t, "ReleaseLease of a suspended run", f.s.ReleaseLease(f.ctx, s.ID, s.Lease))
		if got := f.get(s.ID); got.Status != runtype.StatusSuspended {
			t.Errorf("a lost ReleaseLease changed a suspended run to %s", got.Status)
		}
		wantLeaseLost(t, "ReleaseLease of an unknown run", f.s.ReleaseLease(f.ctx, id(99), "x"))
	})
}
