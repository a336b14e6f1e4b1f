package storetest

import (
	"errors"
	"fmt"
	"testing"

	"interlock/runs"
	"interlock/runtype"
)

// refused tries to insert a run of o that must be refused as ErrThreadOwned, and checks that
// nothing of it was stored.
func (f *fixture) refused(what string, o runOpts) {
	f.t.Helper()
	n := f.newRun(o)
	if err := f.s.InsertRun(f.ctx, n); !errors.Is(err, runs.ErrThreadOwned) {
		f.t.Fatalf("%s: InsertRun = %v, want ErrThreadOwned", what, err)
	}
	f.notStored(what, n.Run.ID)
}

// notStored checks that the run does not exist, nor any event of it.
func (f *fixture) notStored(what, runID string) {
	f.t.Helper()
	if r, err := f.s.GetRun(f.ctx, runID); err != nil || r != nil {
		f.t.Errorf("%s: GetRun = %+v, %v; want nothing stored", what, r, err)
	}
	if evs := f.events(runID); len(evs) != 0 {
		f.t.Errorf("%s: %d events stored, want none", what, len(evs))
	}
	if p, err := f.s.Progress(f.ctx, []string{runID}); err != nil || len(p) != 0 {
		f.t.Errorf("%s: Progress = %v, %v; want none", what, p, err)
	}
}

// owner returns the owner of a thread as an unscoped reader sees it.
func (f *fixture) owner(threadID string) *string {
	f.t.Helper()
	th, err := f.s.Thread(f.ctx, threadID, nil, 0)
	if err != nil || th == nil {
		f.t.Fatalf("Thread(%q) = %+v, %v; want a thread", threadID, th, err)
	}
	return th.ResourceID
}

// testThreadOwner checks the claim of a thread by its first run: thread ids are global, so a
// run naming a thread of another resource must not write into it.
func testThreadOwner(t *testing.T, open Opener) {
	each(t, open, "FirstRunClaimsTheThreadForItsResource", func(t *testing.T, f *fixture) {
		f.insert(runOpts{ThreadID: ptr("thread-1"), ResourceID: ptr("user-1")})
		f.insert(runOpts{ThreadID: ptr("thread-1"), ResourceID: ptr("user-1")}) // the owner's next run
		for _, other := range []*string{ptr("user-2"), nil, ptr("user-1 "), ptr("USER-1"), ptr("user-")} {
			f.refused("a run of "+show(other)+" in user-1's thread", runOpts{ThreadID: ptr("thread-1"), ResourceID: other})
		}
		wantStr(t, "owner of thread-1", f.owner("thread-1"), ptr("user-1"))
		list, total, err := f.s.ListRecent(f.ctx, runs.RecentParams{Statuses: runtype.AllStatuses, ThreadID: ptr("thread-1"), PerPage: 10})
		if err != nil || total != 2 {
			t.Fatalf("runs of thread-1: %v (total %d), %v; want the owner's 2", runIDs(list), total, err)
		}
		for _, r := range list {
			wantStr(t, "resource of a run of thread-1", r.ResourceID, ptr("user-1"))
		}
	})

	// No resource is an owner too: a thread first used without one stays without one.
	each(t, open, "ThreadWithoutResourceBelongsToNoResource", func(t *testing.T, f *fixture) {
		f.insert(runOpts{ThreadID: ptr("thread-1")})
		f.insert(runOpts{ThreadID: ptr("thread-1")})
		f.refused("a run of user-1 in a thread without resource", runOpts{ThreadID: ptr("thread-1"), ResourceID: ptr("user-1")})
		f.refused("a run of the empty resource in a thread without resource", runOpts{ThreadID: ptr("thread-1"), ResourceID: ptr("")})
		wantStr(t, "owner of thread-1", f.owner("thread-1"), nil)
	})

	// Ids are compared exactly, as the discovery filters compare them: a thread id that
	// differs by a trailing space or a capital is another thread, free to claim.
	each(t, open, "ThreadIDsMatchExactly", func(t *testing.T, f *fixture) {
		f.insert(runOpts{ThreadID: ptr("thread-1"), ResourceID: ptr("user-1")})
		f.insert(runOpts{ThreadID: ptr("thread-1 "), ResourceID: ptr("user-2")})
		f.insert(runOpts{ThreadID: ptr("THREAD-1")})
		for id, want := range map[string]*string{"thread-1": ptr("user-1"), "thread-1 ": ptr("user-2"), "THREAD-1": nil} {
			wantStr(t, fmt.Sprintf("owner of %q", id), f.owner(id), want)
		}
		f.refused("user-1 in thread-1 (user-2's)", runOpts{ThreadID: ptr("thread-1 "), ResourceID: ptr("user-1")})
	})

	// A refused run leaves no trace: the other runs, counts and the thread are as before.
	each(t, open, "RefusedRunStoresNothing", func(t *testing.T, f *fixture) {
		mine := f.finishInThread("thread-1", ptr("user-1"), 10)
		before := f.get(mine.ID)
		f.refused("user-2 in user-1's thread", runOpts{ThreadID: ptr("thread-1"), ResourceID: ptr("user-2"), Prompt: "write into user-1's memory"})
		wantUnchanged(t, "the owner's run", f.get(mine.ID), before)
		counts, err := f.s.CountByStatus(f.ctx)
		if err != nil {
			t.Fatal(err)
		}
		if counts[runtype.StatusRunning] != 0 || counts[runtype.StatusCompleted] != 1 {
			t.Errorf("counts = %v, want the one completed run", counts)
		}
		th, err := f.s.Thread(f.ctx, "thread-1", nil, 0)
		if err != nil || th == nil || th.MessageCount != 2 || !sameStr(th.ResourceID, ptr("user-1")) {
			t.Fatalf("thread-1 = %+v, %v; want user-1's with its 2 messages", th, err)
		}
		wantMessages(t, "user-2's memory of thread-1", f.history(ptr("user-2"), "thread-1"), nil)
	})

	// Of runs racing to be the first of a new thread, each of another resource (one of none),
	// exactly one claims it; the others are refused and store nothing. Several rounds, so that
	// the race is not won by whoever happens to start first every time.
	each(t, open, "OfRacingFirstRunsExactlyOneClaims", func(t *testing.T, f *fixture) {
		const racers, rounds = 8, 4
		for round := range rounds {
			thread := fmt.Sprintf("thread-%d", round)
			news := make([]runs.NewRun, racers)
			for i := range racers {
				o := runOpts{N: 1 + round*racers + i, ThreadID: &thread}
				if i > 0 {
					o.ResourceID = ptr(fmt.Sprintf("user-%d", i))
				}
				news[i] = f.newRun(o)
			}
			errs := f.insertAtOnce(news)
			winner := oneWinnerOf(t, "first run", errs, runs.ErrThreadOwned)
			wantStr(t, "owner of "+thread, f.owner(thread), news[winner].Run.ResourceID)
			for i, n := range news {
				if i == winner {
					f.get(n.Run.ID)
					continue
				}
				f.notStored(fmt.Sprintf("%s: loser %d", thread, i), n.Run.ID)
			}
		}
	})

	// Racing first runs of one resource all start: a claim refuses other resources only.
	each(t, open, "RacingRunsOfTheOwnerAllStart", func(t *testing.T, f *fixture) {
		const racers = 8
		news := make([]runs.NewRun, racers)
		for i := range racers {
			news[i] = f.newRun(runOpts{N: 1 + i, ThreadID: ptr("thread-1"), ResourceID: ptr("user-1")})
		}
		errs := f.insertAtOnce(news)
		for i, err := range errs {
			if err != nil {
				t.Errorf("run %d of the owner: %v", i, err)
			}
		}
		wantStr(t, "owner of thread-1", f.owner("thread-1"), ptr("user-1"))
	})
}
