package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"interlock/notify"
	"interlock/runs"
	"interlock/runtype"
)

// requestOpts describe an external agent's approval request to insert.
type requestOpts struct {
	N           int
	AgentID     string
	ThreadID    *string
	ResourceID  *string
	StartedBy   *string
	Context     *string
	ExpiresAt   *time.Time
	Approved    bool // by the policy: stored COMPLETED
	Idempotency *runs.Idempotency
}

// newRequest is the NewRun of an approval request, as RequestApproval builds it.
func (f *fixture) newRequest(o requestOpts) runs.NewRun {
	if o.N == 0 {
		f.n++
		o.N = f.n
	}
	f.n = max(f.n, o.N)
	if o.AgentID == "" {
		o.AgentID = "deploy-bot"
	}
	created := runtype.StoredTime(at(o.N))
	call := runtype.ToolCall{ToolCallID: "tc_1", ToolName: "deploy", Args: json.RawMessage(`{"service":"api"}`), RequiresApproval: !o.Approved, ExpiresAt: o.ExpiresAt}
	requested := call
	requested.ExpiresAt = nil
	r := runtype.Run{ID: id(o.N), AgentID: o.AgentID, ThreadID: o.ThreadID, ResourceID: o.ResourceID, StartedBy: o.StartedBy,
		Context: o.Context, CreatedAt: created, UpdatedAt: created}
	ext := &runs.ExternalRequest{Call: call, InstanceID: "instance-1"}
	evs := []runtype.Event{{Type: runtype.EventRunStarted, Status: string(runtype.StatusRunning)}, {Type: runtype.EventToolCallRequested, ToolCall: &requested}}
	snapshot := ""
	if o.Approved {
		reason := "approved by policy"
		ext.Decision = &runtype.Decision{RunID: r.ID, ToolCallID: "tc_1", ToolName: "deploy", Kind: runtype.DecisionApproved, DecidedAt: created, Reason: &reason}
		evs = append(evs, runtype.Event{Type: runtype.EventRunFinished, Status: string(runtype.StatusCompleted)})
		r.Status = runtype.StatusCompleted
	} else {
		waiting := call
		evs = append(evs, runtype.Event{Type: runtype.EventToolCallApproval, ToolCall: &waiting}, runtype.Event{Type: runtype.EventRunSuspended, Status: string(runtype.StatusSuspended)})
		r.Status, r.SuspendedAt, snapshot = runtype.StatusSuspended, &created, `{"request":"tc_1"}`
	}
	r.LastSeq = int64(len(evs))
	return runs.NewRun{Run: r, Snapshot: snapshot, Events: evs, Idempotency: o.Idempotency, External: ext}
}

// request inserts an approval request and returns it as stored.
func (f *fixture) request(o requestOpts) *runs.Record {
	f.t.Helper()
	n := f.newRequest(o)
	n.Outbox = f.announce(&n.Run, 0, n.Run.CreatedAt, n.Events, notify.Call{})
	if err := f.s.InsertRun(f.ctx, n); err != nil {
		f.t.Fatalf("InsertRun (request) %s: %v", n.Run.ID, err)
	}
	return f.get(n.Run.ID)
}

// ending is the Decide that ends an approval request with a decision of kind.
func ending(r *runs.Record, kind runtype.DecisionKind, when time.Time) runs.DecisionWrite {
	call := r.ToolCalls[0]
	d := runs.DecisionWrite{RunID: r.ID, Version: r.Version, After: r.LastSeq, ToolCallID: call.ToolCallID, Kind: kind,
		At: when, Finish: true, InstanceID: "instance-2"}
	ev := runtype.Event{Type: runtype.EventToolCallApproved, ToolCall: &call}
	switch kind {
	case runtype.DecisionDeclined:
		ev.Type = runtype.EventToolCallDeclined
	case runtype.DecisionExpired:
		ev.Type = runtype.EventToolCallExpired
	}
	d.Events = []runtype.Event{ev, {Type: runtype.EventRunFinished, Status: string(runtype.StatusCompleted)}}
	return d
}

// abandoning is the Decide that ends an approval request its asker stopped waiting for.
func abandoning(r *runs.Record, when time.Time) runs.DecisionWrite {
	d := ending(r, runtype.DecisionExpired, when)
	d.Abandoned, d.Reason = true, ptr("the agent stopped waiting")
	return d
}

func testExternalRequest(t *testing.T, open Opener) {
	each(t, open, "StoredSuspendedOnItsCallWithItsEvents", func(t *testing.T, f *fixture) {
		deadline := runtype.StoredTime(at(1).Add(30 * time.Minute))
		r := f.request(requestOpts{N: 1, ThreadID: ptr("th-1"), ResourceID: ptr("r1"), StartedBy: ptr("bot"),
			Context: ptr("Deploying **api**: the canary passed."), ExpiresAt: &deadline})
		if r.Status != runtype.StatusSuspended || r.SuspendedAt == nil || !r.SuspendedAt.Equal(runtype.StoredTime(at(1))) || r.LeaseOwner != nil ||
			r.Snapshot == nil || *r.Snapshot != `{"request":"tc_1"}` || r.LastSeq != 4 {
			t.Fatalf("stored %+v", r)
		}
		if r.Context == nil || *r.Context != "Deploying **api**: the canary passed." || deref(r.StartedBy) != "bot" || deref(r.ThreadID) != "th-1" {
			t.Fatalf("context %v, startedBy %v, thread %v", r.Context, r.StartedBy, r.ThreadID)
		}
		if len(r.ToolCalls) != 1 || r.ToolCalls[0].ToolCallID != "tc_1" || !r.ToolCalls[0].RequiresApproval ||
			r.ToolCalls[0].ExpiresAt == nil || !r.ToolCalls[0].ExpiresAt.Equal(deadline) {
			t.Fatalf("calls %+v", r.ToolCalls)
		}
		if evs := f.events(r.ID); len(evs) != 4 || evs[2].Type != runtype.EventToolCallApproval || evs[3].Seq != 4 {
			t.Fatalf("events %+v", evs)
		}
		list, err := f.s.ListSuspended(f.ctx, runs.ListSuspendedParams{}, 10, 0)
		if err != nil || len(list) != 1 || list[0].ID != r.ID || list[0].Context == nil {
			t.Fatalf("ListSuspended: %v, %v", list, err)
		}
		if n, err := f.s.CountSuspended(f.ctx, runs.ListSuspendedParams{}); err != nil || n != 1 {
			t.Fatalf("CountSuspended (maintained count) = %d, %v; want 1", n, err)
		}
		if ch := f.changes(); len(ch) != 1 || ch[0].RunID != r.ID || ch[0].Kind != runs.ChangeSuspended {
			t.Fatalf("changes %+v", ch)
		}
		due, err := f.s.DueExpiries(f.ctx, deadline, 10)
		if err != nil || len(due) != 1 || due[0].RunID != r.ID {
			t.Fatalf("DueExpiries at the deadline: %+v, %v", due, err)
		}
		if list, err := f.s.ExpiredRuns(f.ctx, 10); err != nil || len(list) != 0 {
			t.Fatalf("a request is never recovered: ExpiredRuns %+v, %v", list, err)
		}
	})

	each(t, open, "ADecisionEndsIt", func(t *testing.T, f *fixture) {
		for i, kind := range []runtype.DecisionKind{runtype.DecisionApproved, runtype.DecisionDeclined} {
			r := f.request(requestOpts{N: i + 1})
			d := ending(r, kind, at(9))
			d.DecidedBy, d.Reason = ptr("sam"), ptr("because")
			if kind == runtype.DecisionApproved {
				d.EditedArgs = json.RawMessage(`{"service":"web"}`)
			}
			if err := f.s.Decide(f.ctx, d); err != nil {
				t.Fatalf("Decide %s: %v", kind, err)
			}
			got := f.get(r.ID)
			if got.Status != runtype.StatusCompleted || got.Snapshot != nil || got.SuspendedAt != nil || got.LeaseOwner != nil ||
				len(got.ToolCalls) != 0 || got.LastSeq != 6 || got.Version != r.Version+1 {
				t.Fatalf("%s: stored %+v", kind, got)
			}
			if len(got.Decisions) != 1 || got.Decisions[0].Kind != kind || deref(got.Decisions[0].DecidedBy) != "sam" ||
				deref(got.Decisions[0].Reason) != "because" {
				t.Fatalf("%s: decisions %+v", kind, got.Decisions)
			}
			if kind == runtype.DecisionApproved && string(got.Decisions[0].EditedArgs) != `{"service":"web"}` {
				t.Fatalf("edited args %s", got.Decisions[0].EditedArgs)
			}
			if evs := f.events(r.ID); evs[5].Type != runtype.EventRunFinished {
				t.Fatalf("%s: events %+v", kind, evs)
			}
			wantStale(t, "a second decision", f.s.Decide(f.ctx, ending(r, runtype.DecisionDeclined, at(10))))
		}
		if n, err := f.s.CountSuspended(f.ctx, runs.ListSuspendedParams{}); err != nil || n != 0 {
			t.Fatalf("CountSuspended after the decisions = %d, %v; want 0", n, err)
		}
		if list, _, err := f.s.ListRecent(f.ctx, runs.RecentParams{Statuses: []runtype.Status{runtype.StatusCompleted}, PerPage: 10}); err != nil || len(list) != 2 {
			t.Fatalf("history: %d runs, %v; want 2", len(list), err)
		}
	})

	each(t, open, "AnExpiryEndsIt", func(t *testing.T, f *fixture) {
		deadline := runtype.StoredTime(at(1).Add(time.Minute))
		r := f.request(requestOpts{N: 1, ExpiresAt: &deadline})
		wantStale(t, "an expiry before the deadline", f.s.Decide(f.ctx, ending(r, runtype.DecisionExpired, at(30))))
		if err := f.s.Decide(f.ctx, ending(r, runtype.DecisionExpired, deadline)); err != nil {
			t.Fatal(err)
		}
		if got := f.get(r.ID); got.Status != runtype.StatusCompleted || got.Decisions[0].Kind != runtype.DecisionExpired {
			t.Fatalf("stored %s %+v", got.Status, got.Decisions)
		}
	})

	// A request whose asker stopped waiting ends then, EXPIRED, before its deadline or without
	// one; a person's decision after it is stale. Of the two racing, exactly one is stored.
	each(t, open, "AnAbandonedRequestEndsBeforeItsDeadline", func(t *testing.T, f *fixture) {
		deadline := runtype.StoredTime(at(1).Add(time.Hour))
		for i, expires := range []*time.Time{&deadline, nil} {
			r := f.request(requestOpts{N: i + 1, ExpiresAt: expires})
			if err := f.s.Decide(f.ctx, abandoning(r, at(5))); err != nil {
				t.Fatalf("request %d abandoned: %v", i+1, err)
			}
			got := f.get(r.ID)
			if got.Status != runtype.StatusCompleted || len(got.Decisions) != 1 || got.Decisions[0].Kind != runtype.DecisionExpired ||
				deref(got.Decisions[0].Reason) != "the agent stopped waiting" || !got.Decisions[0].DecidedAt.Equal(runtype.StoredTime(at(5))) {
				t.Fatalf("request %d: stored %s %+v", i+1, got.Status, got.Decisions)
			}
			if evs := f.events(r.ID); len(evs) != 6 || evs[4].Type != runtype.EventToolCallExpired || evs[5].Type != runtype.EventRunFinished {
				t.Fatalf("request %d: events %+v", i+1, evs)
			}
			wantStale(t, "a person's decision after it", f.s.Decide(f.ctx, ending(r, runtype.DecisionApproved, at(6))))
		}
		if n, err := f.s.CountSuspended(f.ctx, runs.ListSuspendedParams{}); err != nil || n != 0 {
			t.Fatalf("CountSuspended = %d, %v; want 0", n, err)
		}
		if ch := f.changes(); len(ch) != 4 || ch[1].Kind != runs.ChangeLeft || ch[3].Kind != runs.ChangeLeft {
			t.Fatalf("changes %+v: each request left the suspended set", ch)
		}
		for round := range 6 {
			r := f.request(requestOpts{N: 10 + round, ExpiresAt: &deadline})
			d := ending(r, runtype.DecisionApproved, at(20))
			d.DecidedBy = ptr("sam")
			errs := make([]error, 2)
			var wg sync.WaitGroup
			start := make(chan struct{})
			wg.Go(func() { <-start; errs[0] = f.s.Decide(f.ctx, d) })
			wg.Go(func() { <-start; errs[1] = f.s.Decide(f.ctx, abandoning(r, at(20))) })
			close(start)
			wg.Wait()
			w := oneWinner(t, "decision", errs)
			got := f.get(r.ID)
			if want := []runtype.DecisionKind{runtype.DecisionApproved, runtype.DecisionExpired}[w]; len(got.Decisions) != 1 || got.Decisions[0].Kind != want {
				t.Fatalf("round %d: %s won, stored %+v", round, want, got.Decisions)
			}
		}
	})

	each(t, open, "ApprovedByThePolicy", func(t *testing.T, f *fixture) {
		r := f.request(requestOpts{N: 1, Approved: true})
		if r.Status != runtype.StatusCompleted || r.Snapshot != nil || r.SuspendedAt != nil || len(r.ToolCalls) != 0 || r.LastSeq != 3 {
			t.Fatalf("stored %+v", r)
		}
		if len(r.Decisions) != 1 || r.Decisions[0].Kind != runtype.DecisionApproved || r.Decisions[0].DecidedBy != nil ||
			deref(r.Decisions[0].Reason) != "approved by policy" || !r.Decisions[0].DecidedAt.Equal(runtype.StoredTime(at(1))) {
			t.Fatalf("decisions %+v", r.Decisions)
		}
		if n, _ := f.s.CountSuspended(f.ctx, runs.ListSuspendedParams{}); n != 0 {
			t.Fatal("counted as suspended")
		}
		if ch := f.changes(); len(ch) != 0 {
			t.Fatalf("changes %+v: it never entered the suspended set", ch)
		}
	})

	each(t, open, "ClaimsTheKeyAndTheThread", func(t *testing.T, f *fixture) {
		key := &runs.Idempotency{KeyHash: "k1", RequestHash: "q1"}
		first := f.request(requestOpts{N: 1, ThreadID: ptr("th"), ResourceID: ptr("r1"), Idempotency: key})
		var dup *runs.DuplicateRequest
		err := f.s.InsertRun(f.ctx, f.newRequest(requestOpts{N: 2, Idempotency: key}))
		if !errors.As(err, &dup) || dup.RunID != first.ID || !dup.SameRequest {
			t.Fatalf("the same key again: %v", err)
		}
		err = f.s.InsertRun(f.ctx, f.newRequest(requestOpts{N: 3, Idempotency: &runs.Idempotency{KeyHash: "k1", RequestHash: "q2"}}))
		if !errors.As(err, &dup) || dup.SameRequest {
			t.Fatalf("the key with another request: %v", err)
		}
		err = f.s.InsertRun(f.ctx, f.newRequest(requestOpts{N: 4, ThreadID: ptr("th"), ResourceID: ptr("r2"), Idempotency: &runs.Idempotency{KeyHash: "k2", RequestHash: "q"}}))
		if !errors.Is(err, runs.ErrThreadOwned) {
			t.Fatalf("another resource's thread: %v", err)
		}
		for _, n := range []int{2, 3, 4} {
			if got, err := f.s.GetRun(f.ctx, id(n)); err != nil || got != nil {
				t.Fatalf("refused request %d stored: %v, %v", n, got, err)
			}
		}
		// The key the refused thread claim took was given back: it may be used again.
		if r := f.request(requestOpts{N: 5, Idempotency: &runs.Idempotency{KeyHash: "k2", RequestHash: "q"}}); r.ID != id(5) {
			t.Fatal("k2 stayed claimed")
		}
		if n, _ := f.s.CountSuspended(f.ctx, runs.ListSuspendedParams{}); n != 2 {
			t.Fatalf("%d suspended, want 2", n)
		}
	})

	// A key claimed WhilePending (the coding-agent hooks': a digest of what the call looks
	// like) names its request only while it waits: the same request then is its duplicate, and
	// once it ended the key is free, taken over by the next request — never a duplicate of the
	// ended one, whichever way it ended, however many ended before. A key without WhilePending
	// keeps naming its ended request.
	each(t, open, "AKeyWhilePendingIsFreeOnceItsRequestEnds", func(t *testing.T, f *fixture) {
		wp := func(request string) *runs.Idempotency {
			return &runs.Idempotency{KeyHash: "k-hook", RequestHash: request, WhilePending: true}
		}
		holder := f.request(requestOpts{N: 1, Idempotency: wp("q")})
		for n := 2; n <= 6; n++ {
			var dup *runs.DuplicateRequest
			err := f.s.InsertRun(f.ctx, f.newRequest(requestOpts{N: 100 + n, Idempotency: wp("q")}))
			if !errors.As(err, &dup) || dup.RunID != holder.ID || !dup.SameRequest {
				t.Fatalf("copy %d: the same request while %s waits: %v", n, holder.ID, err)
			}
			err = f.s.InsertRun(f.ctx, f.newRequest(requestOpts{N: 200 + n, Idempotency: wp("other")}))
			if !errors.As(err, &dup) || dup.RunID != holder.ID || dup.SameRequest {
				t.Fatalf("copy %d: another request with the key while %s waits: %v", n, holder.ID, err)
			}
			d := ending(holder, []runtype.DecisionKind{runtype.DecisionApproved, runtype.DecisionDeclined, runtype.DecisionExpired}[n%3], at(n))
			d.Abandoned = d.Kind == runtype.DecisionExpired
			if err := f.s.Decide(f.ctx, d); err != nil {
				t.Fatal(err)
			}
			holder = f.request(requestOpts{N: n, Idempotency: wp("q")}) // it took the key over
		}
		ended := f.get(id(1))
		if ended.Status != runtype.StatusCompleted || len(ended.Decisions) != 1 || ended.Decisions[0].Kind != runtype.DecisionExpired {
			t.Fatalf("the first request after its key moved on: %s %+v", ended.Status, ended.Decisions)
		}
		for _, n := range []int{102, 202, 106, 206} {
			if got, err := f.s.GetRun(f.ctx, id(n)); err != nil || got != nil {
				t.Fatalf("duplicate %d stored: %v, %v", n, got, err)
			}
		}

		// Without WhilePending the key names its request for ever.
		kept := &runs.Idempotency{KeyHash: "k-kept", RequestHash: "q"}
		r := f.request(requestOpts{N: 50, Idempotency: kept})
		if err := f.s.Decide(f.ctx, ending(r, runtype.DecisionApproved, at(51))); err != nil {
			t.Fatal(err)
		}
		var dup *runs.DuplicateRequest
		if err := f.s.InsertRun(f.ctx, f.newRequest(requestOpts{N: 52, Idempotency: kept})); !errors.As(err, &dup) || dup.RunID != r.ID {
			t.Fatalf("a decided request's key without WhilePending: %v, want the duplicate of %s", err, r.ID)
		}
	})

	// A forwarded call the policy let through (the MCP gateway's) is stored RUNNING, leased to
	// the instance that runs it, with its snapshot and its call decided by the policy; when that
	// lease passes, the run is among the expired ones, for recovery.
	each(t, open, "AForwardedCallIsStoredRunningUnderItsLease", func(t *testing.T, f *fixture) {
		n := f.newRequest(requestOpts{N: 1, Approved: true})
		n.Events = n.Events[:2] // no RUN_FINISHED: it runs
		n.Run.Status, n.Run.LastSeq = runtype.StatusRunning, 2
		n.Snapshot, n.Lease, n.TTL = `{"request":true,"forward":true}`, "lease-fwd", 2*time.Second
		if err := f.s.InsertRun(f.ctx, n); err != nil {
			t.Fatal(err)
		}
		r, err := f.s.GetRecord(f.ctx, n.Run.ID)
		if err != nil || r == nil {
			t.Fatalf("GetRecord: %v %v", r, err)
		}
		if r.Status != runtype.StatusRunning || r.LeaseOwner == nil || *r.LeaseOwner != "lease-fwd" || r.Snapshot == nil || *r.Snapshot != n.Snapshot {
			t.Fatalf("stored as %s, lease %v, snapshot %v", r.Status, r.LeaseOwner, r.Snapshot)
		}
		if len(r.Decisions) != 1 || r.Decisions[0].Kind != runtype.DecisionApproved || r.Decisions[0].DecidedBy != nil {
			t.Fatalf("decisions = %+v, want the policy's approval", r.Decisions)
		}
		if total, err := f.s.CountSuspended(f.ctx, runs.ListSuspendedParams{}); err != nil || total != 0 {
			t.Fatalf("%d suspended runs (%v), want none", total, err)
		}
		time.Sleep(2500 * time.Millisecond) // the database's clock: the lease passes
		expired, err := f.s.ExpiredRuns(f.ctx, 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(expired) != 1 || expired[0].ID != n.Run.ID {
			t.Fatalf("expired runs = %d, want the forwarded run", len(expired))
		}
	})

	// ReleaseKey frees a key while it names the run it is given (the MCP gateway's, once a
	// call's outcome was delivered): the same key then makes a new run. A release naming
	// another run — the key moved on since — leaves the key alone.
	each(t, open, "ReleaseKeyFreesOnlyTheKeyOfItsRun", func(t *testing.T, f *fixture) {
		k := func() *runs.Idempotency { return &runs.Idempotency{KeyHash: "k-gateway", RequestHash: "q"} }
		first := f.request(requestOpts{N: 1, Idempotency: k()})
		if err := f.s.ReleaseKey(f.ctx, "k-gateway", id(99)); err != nil {
			t.Fatal(err)
		}
		var dup *runs.DuplicateRequest
		if err := f.s.InsertRun(f.ctx, f.newRequest(requestOpts{N: 2, Idempotency: k()})); !errors.As(err, &dup) || dup.RunID != first.ID {
			t.Fatalf("after a release naming another run: %v, want the duplicate of %s", err, first.ID)
		}
		if err := f.s.ReleaseKey(f.ctx, "k-gateway", first.ID); err != nil {
			t.Fatal(err)
		}
		second := f.request(requestOpts{N: 3, Idempotency: k()}) // stored: the key was free
		if err := f.s.InsertRun(f.ctx, f.newRequest(requestOpts{N: 4, Idempotency: k()})); !errors.As(err, &dup) || dup.RunID != second.ID {
			t.Fatalf("the key after it was taken again: %v, want the duplicate of %s", err, second.ID)
		}
		if got := f.get(first.ID); got == nil || got.ID != first.ID {
			t.Fatal("releasing a key removed its run")
		}
	})

	// Of requests racing to take over a key whose request ended (the agent asking again on
	// several instances at once), exactly one is stored and the others name it. Several rounds,
	// each after the last round's winner ended.
	each(t, open, "OfRacingTakeoversExactlyOneIsStored", func(t *testing.T, f *fixture) {
		const racers, rounds = 8, 4
		k := &runs.Idempotency{KeyHash: "k-race", RequestHash: "q", WhilePending: true}
		holder := f.request(requestOpts{N: 1, Idempotency: k})
		for round := range rounds {
			if err := f.s.Decide(f.ctx, abandoning(holder, at(2+round))); err != nil {
				t.Fatal(err)
			}
			news := make([]runs.NewRun, racers)
			for i := range news {
				news[i] = f.newRequest(requestOpts{N: 10 + round*racers + i, Idempotency: k})
			}
			errs := f.insertAtOnce(news)
			winner := -1
			for i, err := range errs {
				if err == nil && winner >= 0 {
					t.Fatalf("round %d: racers %d and %d both stored", round, winner, i)
				} else if err == nil {
					winner = i
				}
			}
			if winner < 0 {
				t.Fatalf("round %d: no racer stored: %v", round, errs)
			}
			for i, err := range errs {
				var dup *runs.DuplicateRequest
				if i != winner && (!errors.As(err, &dup) || dup.RunID != news[winner].Run.ID || !dup.SameRequest) {
					t.Fatalf("round %d: racer %d: %v, want the duplicate of %s", round, i, err, news[winner].Run.ID)
				}
				if i != winner {
					f.notStored(fmt.Sprintf("round %d: loser %d", round, i), news[i].Run.ID)
				}
			}
			holder = f.get(news[winner].Run.ID)
		}
		if n, _ := f.s.CountSuspended(f.ctx, runs.ListSuspendedParams{}); n != 1 {
			t.Fatalf("%d requests wait, want 1 (the last round's winner)", n)
		}
	})

	withOutbox(t, open, "AnnouncedToWebhooks", []notify.Target{all}, func(t *testing.T, f *fixture, ob notify.Store) {
		r := f.request(requestOpts{N: 1})
		wantSummary(t, "after the request", summary(t, f.deliveries(ob, r.ID)), "all approval_requested approval PENDING")
		d := ending(r, runtype.DecisionDeclined, at(5))
		d.DecidedBy = ptr("sam")
		f.announceDecision(&r.Run, &d)
		if err := f.s.Decide(f.ctx, d); err != nil {
			t.Fatal(err)
		}
		wantSummary(t, "after the decline", summary(t, f.deliveries(ob, r.ID)),
			"all approval_requested approval PENDING", "all decided declined PENDING")
		approved := f.request(requestOpts{N: 2, Approved: true})
		if got := f.deliveries(ob, approved.ID); len(got) != 0 {
			t.Fatalf("a request approved by the policy announced %v", summary(t, got))
		}
	})
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
