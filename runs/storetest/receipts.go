package storetest

import (
	"bytes"
	"fmt"
	"sync"
	"testing"

	"interlock/receipt"
	"interlock/runs"
	"interlock/runtype"
)

// withKeys runs fn as a parallel subtest on a fixture whose store is also the receipt.KeyStore
// that keeps the receipts' signing keys (gormstore implements both).
func withKeys(t *testing.T, open Opener, name string, fn func(t *testing.T, f *fixture, ks receipt.KeyStore)) {
	t.Helper()
	each(t, open, name, func(t *testing.T, f *fixture) {
		ks, ok := f.s.(receipt.KeyStore)
		if !ok {
			t.Fatalf("%T does not implement receipt.KeyStore", f.s)
		}
		fn(t, f, ks)
	})
}

func storedKey(gen int64, id string, when int) receipt.StoredKey {
	return receipt.StoredKey{Generation: gen, ID: id, Seed: bytes.Repeat([]byte{byte(gen), byte(len(id))}, 16), CreatedAt: at(when)}
}

// testReceipts checks the receipts' storage: the signing keys every instance shares, and the
// receipt stored with the decision that lets a call run.
func testReceipts(t *testing.T, open Opener) {
	withKeys(t, open, "KeysComeBackNewestFirst", func(t *testing.T, f *fixture, ks receipt.KeyStore) {
		if got, err := ks.SigningKeys(f.ctx); err != nil || len(got) != 0 {
			t.Fatalf("SigningKeys of an empty store = %v, %v", got, err)
		}
		for _, k := range []receipt.StoredKey{storedKey(1, "kid-1", 1), storedKey(3, "kid-3", 3), storedKey(2, "kid-2", 2)} {
			if ok, err := ks.AddSigningKey(f.ctx, k); err != nil || !ok {
				t.Fatalf("AddSigningKey %d = %v, %v", k.Generation, ok, err)
			}
		}
		got, err := ks.SigningKeys(f.ctx)
		if err != nil || len(got) != 3 {
			t.Fatalf("SigningKeys = %v, %v", got, err)
		}
		for i, gen := range []int64{3, 2, 1} {
			want := storedKey(gen, fmt.Sprintf("kid-%d", gen), int(gen))
			if g := got[i]; g.Generation != gen || g.ID != want.ID || !bytes.Equal(g.Seed, want.Seed) || !g.CreatedAt.Equal(runtype.StoredTime(want.CreatedAt)) || g.CreatedAt.Location() != runtype.StoredTime(want.CreatedAt).Location() {
				t.Errorf("key %d = %+v, want %+v (created at %s, UTC, ms)", i, g, want, runtype.StoredTime(want.CreatedAt))
			}
		}
	})

	withKeys(t, open, "AGenerationIsStoredOnce", func(t *testing.T, f *fixture, ks receipt.KeyStore) {
		if ok, err := ks.AddSigningKey(f.ctx, storedKey(1, "first", 1)); err != nil || !ok {
			t.Fatalf("AddSigningKey = %v, %v", ok, err)
		}
		if ok, err := ks.AddSigningKey(f.ctx, storedKey(1, "second", 2)); err != nil || ok {
			t.Fatalf("AddSigningKey of a stored generation = %v, %v; want false", ok, err)
		}
		got, _ := ks.SigningKeys(f.ctx)
		if len(got) != 1 || got[0].ID != "first" {
			t.Fatalf("keys = %+v, want only the first", got)
		}
	})

	withKeys(t, open, "RacingAddsStoreOne", func(t *testing.T, f *fixture, ks receipt.KeyStore) {
		const n = 8
		var wg sync.WaitGroup
		won := make([]bool, n)
		errs := make([]error, n)
		for i := range n {
			wg.Go(func() { won[i], errs[i] = ks.AddSigningKey(f.ctx, storedKey(1, fmt.Sprintf("instance-%d", i), 1)) })
		}
		wg.Wait()
		winner := -1
		for i := range n {
			if errs[i] != nil {
				t.Fatalf("AddSigningKey %d: %v", i, errs[i])
			}
			if won[i] {
				if winner >= 0 {
					t.Fatalf("instances %d and %d both stored generation 1", winner, i)
				}
				winner = i
			}
		}
		got, _ := ks.SigningKeys(f.ctx)
		if winner < 0 || len(got) != 1 || got[0].ID != fmt.Sprintf("instance-%d", winner) {
			t.Fatalf("winner %d, keys %+v: want exactly the winner's key", winner, got)
		}
	})

	each(t, open, "AnApprovalKeepsItsReceipt", func(t *testing.T, f *fixture) {
		r := f.suspended(runOpts{})
		d := decision(r, runtype.DecisionApproved, "lease-2", at(30))
		d.Receipt = ptr("header.payload.signature")
		f.decide(r, d)
		got := f.get(r.ID)
		if len(got.Decisions) != 1 || got.Decisions[0].Receipt == nil || *got.Decisions[0].Receipt != "header.payload.signature" {
			t.Fatalf("decisions %+v: want the approval with its receipt", got.Decisions)
		}
		recent, _, err := f.s.ListRecent(f.ctx, runs.RecentParams{Statuses: []runtype.Status{runtype.StatusRunning}, PerPage: 10})
		if err != nil || len(recent) != 1 || len(recent[0].Decisions) != 1 || deref(recent[0].Decisions[0].Receipt) != "header.payload.signature" {
			t.Fatalf("ListRecent = %+v, %v: want the receipt with the decision", recent, err)
		}
	})

	each(t, open, "ADeclineHasNone", func(t *testing.T, f *fixture) {
		r := f.suspended(runOpts{})
		f.decide(r, decision(r, runtype.DecisionDeclined, "lease-2", at(30)))
		if got := f.get(r.ID); len(got.Decisions) != 1 || got.Decisions[0].Receipt != nil {
			t.Fatalf("decisions %+v: a decline has no receipt", got.Decisions)
		}
	})

	each(t, open, "ThePolicysApprovalKeepsItsReceipt", func(t *testing.T, f *fixture) {
		n := f.newRequest(requestOpts{Approved: true})
		n.External.Decision.Receipt = ptr("policy.receipt.sig")
		if err := f.s.InsertRun(f.ctx, n); err != nil {
			t.Fatal(err)
		}
		got := f.get(n.Run.ID)
		if len(got.Decisions) != 1 || deref(got.Decisions[0].Receipt) != "policy.receipt.sig" {
			t.Fatalf("decisions %+v: want the policy's approval with its receipt", got.Decisions)
		}
	})

	each(t, open, "AnEndedRequestKeepsItsReceipt", func(t *testing.T, f *fixture) {
		r := f.request(requestOpts{})
		d := ending(r, runtype.DecisionApproved, at(40))
		d.Receipt = ptr("person.receipt.sig")
		if err := f.s.Decide(f.ctx, d); err != nil {
			t.Fatal(err)
		}
		if got := f.get(r.ID); len(got.Decisions) != 1 || deref(got.Decisions[0].Receipt) != "person.receipt.sig" {
			t.Fatalf("decisions %+v: want the approval with its receipt", got.Decisions)
		}
	})
}
