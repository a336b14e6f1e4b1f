package storetest

import (
	"errors"
	"fmt"
	"testing"

	"interlock/runs"
	"interlock/runtype"
)

// key is an idempotency key as the service stores it (the hashes are opaque to the store).
func key(k, request string) *runs.Idempotency {
	return &runs.Idempotency{KeyHash: fmt.Sprintf("%064s", k), RequestHash: fmt.Sprintf("%064s", request)}
}

// duplicate inserts a run of o that must be refused as a *runs.DuplicateRequest of run first,
// SameRequest as same, with nothing of it stored.
func (f *fixture) duplicate(what string, o runOpts, first string, same bool) {
	f.t.Helper()
	n := f.newRun(o)
	var dup *runs.DuplicateRequest
	if err := f.s.InsertRun(f.ctx, n); !errors.As(err, &dup) || dup.RunID != first || dup.SameRequest != same {
		f.t.Fatalf("%s: InsertRun = %v (%+v), want the duplicate of %s, same request %v", what, err, dup, first, same)
	}
	f.notStored(what, n.Run.ID)
}

// testIdempotencyKey checks the claim of an idempotency key by the run of the first request
// that carries it: a retry after a timeout must find that run, on any instance, never make a
// second.
func testIdempotencyKey(t *testing.T, open Opener) {
	each(t, open, "AKeyNamesTheRunOfItsFirstRequest", func(t *testing.T, f *fixture) {
		first := f.insert(runOpts{Idempotency: key("k1", "r1")})
		f.duplicate("the same request again", runOpts{Idempotency: key("k1", "r1")}, first.ID, true)
		f.duplicate("another request with the key", runOpts{Idempotency: key("k1", "r2")}, first.ID, false)
		f.insert(runOpts{Idempotency: key("k2", "r1")}) // another key is another request
		f.insert(runOpts{})                             // and no key is never a duplicate
	})

	// A run refused for its thread gives its key back: the key names no run, and a request
	// that can be stored may claim it.
	each(t, open, "ARefusedRunLeavesItsKeyFree", func(t *testing.T, f *fixture) {
		f.insert(runOpts{ThreadID: ptr("thread-1"), ResourceID: ptr("user-1")})
		f.refused("a run of user-2 in user-1's thread", runOpts{ThreadID: ptr("thread-1"), ResourceID: ptr("user-2"), Idempotency: key("k1", "r1")})
		f.insert(runOpts{ThreadID: ptr("thread-2"), ResourceID: ptr("user-2"), Idempotency: key("k1", "r1")})
	})

	// Of runs racing with one key (a client's retries arriving at several instances at once),
	// exactly one is stored; the others name it. Several rounds, so that the race is not won by
	// whoever happens to start first every time.
	each(t, open, "OfRacingRunsWithOneKeyExactlyOneIsStored", func(t *testing.T, f *fixture) {
		const racers, rounds = 8, 4
		for round := range rounds {
			news := make([]runs.NewRun, racers)
			for i := range racers {
				news[i] = f.newRun(runOpts{N: 1 + round*racers + i, Idempotency: key(fmt.Sprint("k", round), "r")})
			}
			errs := f.insertAtOnce(news)
			winner := -1
			for i, err := range errs {
				if err == nil {
					if winner >= 0 {
						t.Fatalf("round %d: runs %d and %d both stored", round, winner, i)
					}
					winner = i
				}
			}
			if winner < 0 {
				t.Fatalf("round %d: no run stored: %v", round, errs)
			}
			for i, err := range errs {
				var dup *runs.DuplicateRequest
				if i != winner && (!errors.As(err, &dup) || dup.RunID != news[winner].Run.ID || !dup.SameRequest) {
					t.Errorf("round %d: racer %d: %v, want the duplicate of %s", round, i, err, news[winner].Run.ID)
				}
				if i != winner {
					f.notStored(fmt.Sprintf("round %d: loser %d", round, i), news[i].Run.ID)
				}
			}
			f.get(news[winner].Run.ID)
		}
	})

	// Of runs racing with one key, some refused their thread (another resource's), exactly one
	// of the others is stored: a run refused its thread gives its key back, so no other is
	// refused as its duplicate (which would name a run that was never stored).
	each(t, open, "OfRacingRunsWithOneKeyTheRefusedNameNone", func(t *testing.T, f *fixture) {
		f.insert(runOpts{N: 1, ThreadID: ptr("thread-owned"), ResourceID: ptr("user-1")})
		// Every other racer is refused, the odd ones in some rounds and the even in others, so
		// that either may claim first.
		refused := func(round, i int) bool { return (i+round)%2 == 1 }
		const racers, rounds = 8, 4
		for round := range rounds {
			news := make([]runs.NewRun, racers)
			for i := range racers {
				o := runOpts{N: 2 + round*racers + i, ThreadID: ptr(fmt.Sprint("thread-", round, "-", i)), ResourceID: ptr("user-2"),
					Idempotency: key(fmt.Sprint("k", round), "r")}
				if refused(round, i) {
					o.ThreadID = ptr("thread-owned") // user-1's: refused
				}
				news[i] = f.newRun(o)
			}
			errs := f.insertAtOnce(news)
			winner := -1
			for i, err := range errs {
				if refused(round, i) {
					f.notStored(fmt.Sprintf("round %d: refused %d", round, i), news[i].Run.ID)
					continue
				}
				if err == nil {
					if winner >= 0 {
						t.Fatalf("round %d: runs %d and %d both stored", round, winner, i)
					}
					winner = i
				}
			}
			if winner < 0 {
				t.Fatalf("round %d: no run stored: %v", round, errs)
			}
			for i, err := range errs {
				// One in another resource's thread is refused that, or (the key claimed first)
				// as the duplicate of the winner; the others are the winner's duplicates.
				var dup *runs.DuplicateRequest
				isDup := errors.As(err, &dup) && dup.RunID == news[winner].Run.ID
				if i != winner && !isDup && (!refused(round, i) || !errors.Is(err, runs.ErrThreadOwned)) {
					t.Errorf("round %d: racer %d: %v, want the duplicate of %s", round, i, err, news[winner].Run.ID)
				}
			}
		}
	})

	// Retention keeps a run whose key is young, whatever its own cutoff, and removes an old
	// key with its run: the key is free again.
	each(t, open, "APurgedRunFreesItsKey", func(t *testing.T, f *fixture) {
		r := f.insert(runOpts{N: 1, Idempotency: key("k1", "r1")})
		f.finish(r, at(2))
		if n, err := f.s.PurgeFinished(f.ctx, runtype.StoredTime(at(20)), runtype.StoredTime(at(1)), 100); err != nil || n != 0 {
			t.Fatalf("PurgeFinished with the key younger than keysBefore = %d, %v; want 0", n, err)
		}
		f.duplicate("the request again while the key is young", runOpts{N: 30, Idempotency: key("k1", "r1")}, r.ID, true)
		if n, err := f.s.PurgeFinished(f.ctx, runtype.StoredTime(at(20)), runtype.StoredTime(at(20)), 100); err != nil || n != 1 {
			t.Fatalf("PurgeFinished = %d, %v; want 1", n, err)
		}
		f.insert(runOpts{N: 31, Idempotency: key("k1", "r1")})
	})
}
