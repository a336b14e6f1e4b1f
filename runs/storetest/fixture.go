package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"interlock/llm"
	"interlock/notify"
	"interlock/runs"
	"interlock/runtype"
)

// t0 is the base of the times the suite gives the store: off a millisecond and outside UTC, so
// that every read checks the store keeps instants in UTC at millisecond precision.
var t0 = time.Date(2025, 3, 14, 9, 26, 53, 589_793_238, time.FixedZone("UTC+1", 3600))

// at is t0 plus n seconds.
func at(n int) time.Time { return t0.Add(time.Duration(n) * time.Second) }

// hour is the TTL of a lease that does not expire during a test.
const hour = time.Hour

// fixture is a store for one subtest, with builders of the states the suite starts from.
type fixture struct {
	t   *testing.T
	ctx context.Context
	s   runs.Store
	n   int // the last run number id handed out
	// webhooks: the writes of suspend, decide and request carry the outbox rows that announce
	// their events to them (none when empty), as the run service's would.
	webhooks []notify.Target
}

func setup(t *testing.T, open Opener) *fixture {
	t.Helper()
	return &fixture{t: t, ctx: t.Context(), s: open(t)}
}

// announce is the outbox rows the run service hands the store with evs, appended to run r
// after seq after at instant at, for the fixture's webhooks (runs.Announce).
func (f *fixture) announce(r *runtype.Run, after int64, at time.Time, evs []runtype.Event, decided notify.Call) []runs.Announcement {
	f.t.Helper()
	if len(f.webhooks) == 0 {
		return nil
	}
	list, err := runs.Announce(f.webhooks, r, after, at, evs, decided)
	if err != nil {
		f.t.Fatalf("Announce: %v", err)
	}
	return list
}

// announceDecision sets d.Outbox to the rows announcing d's events on run r as read.
func (f *fixture) announceDecision(r *runtype.Run, d *runs.DecisionWrite) {
	f.t.Helper()
	var decided notify.Call
	for _, c := range r.ToolCalls {
		if c.ToolCallID != d.ToolCallID {
			continue
		}
		decided.Edited = d.Kind == runtype.DecisionApproved && d.EditedArgs != nil
		if d.Kind == runtype.DecisionResumed {
			decided.Resumed = &runtype.ToolCall{ToolCallID: c.ToolCallID, ToolName: c.ToolName, Args: c.Args, SuspendPayload: c.SuspendPayload}
		}
	}
	d.Outbox = f.announce(r, d.After, d.At, d.Events, decided)
}

// announceSuspension sets s.Outbox to the rows announcing s's events.
func (f *fixture) announceSuspension(s *runs.Suspension) {
	f.t.Helper()
	if len(f.webhooks) > 0 {
		s.Outbox = f.announce(&f.get(s.RunID).Run, s.After, s.At, s.Events, notify.Call{})
	}
}

// id is the run id of number n. Ids of higher numbers sort after those of lower ones, so that
// the tests can pick an id order that differs from the order of creation or of time.
func id(n int) string { return fmt.Sprintf("01900000-0000-7000-8000-%012d", n) }

// live is a RUNNING run as the instance holding its lease knows it.
type live struct {
	ID    string
	Lease string
	Seq   int64 // the last seq written
}

// runOpts describe a run to insert; zero fields take defaults.
type runOpts struct {
	N                   int // the run's number (see id); default the next one
	AgentID             string
	ParentRunID         *string
	ThreadID            *string
	ResourceID          *string
	StartedBy           *string
	Prompt              string
	RequireToolApproval bool
	CreatedAt           time.Time
	Lease               string
	TTL                 time.Duration // default an hour
	Snapshot            string
	Events              []runtype.Event // default one RUN_STARTED
	Idempotency         *runs.Idempotency
}

// insert stores a new running run.
func (f *fixture) insert(o runOpts) *live {
	f.t.Helper()
	n := f.newRun(o)
	if err := f.s.InsertRun(f.ctx, n); err != nil {
		f.t.Fatalf("InsertRun %s: %v", n.Run.ID, err)
	}
	return &live{ID: n.Run.ID, Lease: n.Lease, Seq: int64(len(n.Events))}
}

// insertAtOnce inserts the runs from as many goroutines released together, and returns each
// insert's error: the racing first runs of a thread, or retries with one idempotency key.
func (f *fixture) insertAtOnce(news []runs.NewRun) []error {
	errs := make([]error, len(news))
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range news {
		wg.Go(func() { <-start; errs[i] = f.s.InsertRun(f.ctx, news[i]) })
	}
	close(start)
	wg.Wait()
	return errs
}

// newRun is the run insert stores, with the defaults of runOpts filled in.
func (f *fixture) newRun(o runOpts) runs.NewRun {
	if o.N == 0 {
		f.n++
		o.N = f.n
	}
	f.n = max(f.n, o.N)
	if o.AgentID == "" {
		o.AgentID = "agent"
	}
	if o.Prompt == "" {
		o.Prompt = "prompt of " + id(o.N)
	}
	if o.CreatedAt.IsZero() {
		o.CreatedAt = at(o.N)
	}
	if o.Lease == "" {
		o.Lease = fmt.Sprintf("lease-%d-0", o.N)
	}
	if o.TTL == 0 {
		o.TTL = hour
	}
	if o.Snapshot == "" {
		o.Snapshot = `{"snapshot":0}`
	}
	if o.Events == nil {
		o.Events = []runtype.Event{{Type: runtype.EventRunStarted, Status: string(runtype.StatusRunning)}}
	}
	r := runtype.Run{
		ID: id(o.N), AgentID: o.AgentID, ParentRunID: o.ParentRunID, ThreadID: o.ThreadID,
		ResourceID: o.ResourceID, StartedBy: o.StartedBy, Prompt: o.Prompt, RequireToolApproval: o.RequireToolApproval,
		Status: runtype.StatusRunning, CreatedAt: o.CreatedAt, UpdatedAt: o.CreatedAt,
		LastSeq: int64(len(o.Events)),
	}
	return runs.NewRun{Run: r, Snapshot: o.Snapshot, Lease: o.Lease, TTL: o.TTL, Events: o.Events, Idempotency: o.Idempotency}
}

// cp is a checkpoint by the holder of r.
func cp(r *live, when time.Time, evs ...runtype.Event) runs.Checkpoint {
	return runs.Checkpoint{RunID: r.ID, Lease: r.Lease, TTL: hour, After: r.Seq, At: when, Events: evs}
}

// checkpoint stores evs as the holder of r, and advances r.
func (f *fixture) checkpoint(r *live, when time.Time, evs ...runtype.Event) {
	f.t.Helper()
	if err := f.s.Checkpoint(f.ctx, cp(r, when, evs...)); err != nil {
		f.t.Fatalf("Checkpoint %s: %v", r.ID, err)
	}
	r.Seq += int64(len(evs))
}

// approval is a call that waits for approval.
func approval(callID string) runtype.ToolCall {
	return runtype.ToolCall{ToolCallID: callID, ToolName: "issue_refund", Args: json.RawMessage(`{"amount":30,"order":42}`), RequiresApproval: true}
}

// suspendEvents are the events that announce a suspension on c.
func suspendEvents(c runtype.ToolCall) []runtype.Event {
	return []runtype.Event{
		{Type: runtype.EventToolCallApproval, ToolCall: &c},
		{Type: runtype.EventRunSuspended, Status: string(runtype.StatusSuspended)},
	}
}

// suspension is the Suspend the holder of r writes to wait on c.
func suspension(r *live, c runtype.ToolCall, when time.Time, instance string) runs.Suspension {
	snap := fmt.Sprintf(`{"waitsOn":%q}`, c.ToolCallID)
	ck := cp(r, when, suspendEvents(c)...)
	ck.Snapshot = &snap
	return runs.Suspension{Checkpoint: ck, Calls: []runtype.ToolCall{c}, InstanceID: instance}
}

// suspend stores r as suspended on c and returns the run as stored.
func (f *fixture) suspend(r *live, c runtype.ToolCall, when time.Time, instance string) *runs.Record {
	f.t.Helper()
	s := suspension(r, c, when, instance)
	f.announceSuspension(&s)
	if err := f.s.Suspend(f.ctx, s); err != nil {
		f.t.Fatalf("Suspend %s: %v", r.ID, err)
	}
	r.Seq += int64(len(s.Events))
	return f.get(r.ID)
}

// suspended inserts a run and suspends it on an approval, at its creation time.
func (f *fixture) suspended(o runOpts) *runs.Record {
	f.t.Helper()
	r := f.insert(o)
	got := f.get(r.ID)
	return f.suspend(r, approval("call-1"), got.CreatedAt, "instance-1")
}

// decision is the Decide of the first pending call of run as read, leasing the run to lease.
func decision(r *runs.Record, kind runtype.DecisionKind, lease string, when time.Time) runs.DecisionWrite {
	call := r.ToolCalls[0]
	d := runs.DecisionWrite{
		RunID: r.ID, Version: r.Version, After: r.LastSeq, ToolCallID: call.ToolCallID, Kind: kind,
		At: when, Snapshot: fmt.Sprintf(`{"decided":%q}`, call.ToolCallID), Lease: lease, TTL: hour,
		InstanceID: "instance-1",
	}
	switch kind {
	case runtype.DecisionApproved:
		d.Events = []runtype.Event{{Type: runtype.EventToolCallApproved, ToolCall: &call}, {Type: runtype.EventRunResumed, Status: string(runtype.StatusRunning)}}
	case runtype.DecisionDeclined:
		d.Events = []runtype.Event{{Type: runtype.EventToolCallDeclined, ToolCall: &call}, {Type: runtype.EventRunResumed, Status: string(runtype.StatusRunning)}}
	default:
		d.Events = []runtype.Event{{Type: runtype.EventRunResumed, Status: string(runtype.StatusRunning)}}
	}
	return d
}

// decide approves (or otherwise decides) the first pending call of run, and returns the run as
// its new holder knows it.
func (f *fixture) decide(r *runs.Record, d runs.DecisionWrite) *live {
	f.t.Helper()
	f.announceDecision(&r.Run, &d)
	if err := f.s.Decide(f.ctx, d); err != nil {
		f.t.Fatalf("Decide %s: %v", r.ID, err)
	}
	return &live{ID: r.ID, Lease: d.Lease, Seq: d.After + int64(len(d.Events))}
}

// finishing is the Finish that completes r.
func finishing(r *live, when time.Time) runs.Finish {
	out := "done: " + r.ID
	return runs.Finish{
		Checkpoint: cp(r, when, runtype.Event{Type: runtype.EventRunFinished, Status: string(runtype.StatusCompleted)}),
		Status:     runtype.StatusCompleted, Output: &out,
	}
}

// finish completes r.
func (f *fixture) finish(r *live, when time.Time) {
	f.t.Helper()
	fin := finishing(r, when)
	if err := f.s.Finish(f.ctx, fin); err != nil {
		f.t.Fatalf("Finish %s: %v", r.ID, err)
	}
	r.Seq += int64(len(fin.Events))
}

// fail stores r as FAILED.
func (f *fixture) fail(r *live, when time.Time) {
	f.t.Helper()
	msg, code := "the run stopped on an internal error", "INTERNAL"
	err := f.s.Finish(f.ctx, runs.Finish{
		Checkpoint: cp(r, when, runtype.Event{Type: runtype.EventRunFailed, Status: string(runtype.StatusFailed), Error: msg, ErrorCode: code}),
		Status:     runtype.StatusFailed, Error: &msg, ErrorCode: &code,
	})
	if err != nil {
		f.t.Fatalf("Finish %s as FAILED: %v", r.ID, err)
	}
	r.Seq++
}

// eventsAfter returns the events of a run after seq after.
func (f *fixture) eventsAfter(runID string, after int64) []runtype.Event {
	f.t.Helper()
	evs, err := f.s.Events(f.ctx, runID, after, 10_000)
	if err != nil {
		f.t.Fatalf("Events %s after %d: %v", runID, after, err)
	}
	return evs
}

// finished inserts a run and completes it at when.
func (f *fixture) finished(o runOpts, when time.Time) *live {
	f.t.Helper()
	r := f.insert(o)
	f.finish(r, when)
	return r
}

// get returns the stored run's record, which must exist.
func (f *fixture) get(runID string) *runs.Record {
	f.t.Helper()
	r, err := f.s.GetRecord(f.ctx, runID)
	if err != nil {
		f.t.Fatalf("GetRecord %s: %v", runID, err)
	}
	if r == nil {
		f.t.Fatalf("GetRecord %s: no such run", runID)
	}
	return r
}

// events returns all events of a run.
func (f *fixture) events(runID string) []runtype.Event {
	f.t.Helper()
	evs, err := f.s.Events(f.ctx, runID, 0, 10_000)
	if err != nil {
		f.t.Fatalf("Events %s: %v", runID, err)
	}
	return evs
}

// expiredIDs returns the ids ExpiredRuns lists, in its order.
func (f *fixture) expiredIDs() []string {
	f.t.Helper()
	list, err := f.s.ExpiredRuns(f.ctx, 1000)
	if err != nil {
		f.t.Fatalf("ExpiredRuns: %v", err)
	}
	ids := make([]string, len(list))
	for i, r := range list {
		ids[i] = r.ID
	}
	return ids
}

// expired reports whether ExpiredRuns lists the run.
func (f *fixture) expired(runID string) bool {
	f.t.Helper()
	return slices.Contains(f.expiredIDs(), runID)
}

// expire lets the lease of r run out: it renews it for a millisecond and waits until
// ExpiredRuns lists the run. Leases are the database's time, so the suite cannot set them; it
// waits for them, which takes a few milliseconds.
func (f *fixture) expire(r *live) {
	f.t.Helper()
	if err := f.s.RenewLease(f.ctx, r.ID, r.Lease, time.Millisecond); err != nil {
		f.t.Fatalf("RenewLease %s for 1ms: %v", r.ID, err)
	}
	f.eventually("the lease of "+r.ID+" expires", func() bool { return f.expired(r.ID) })
}

// claim takes an expired run over with a new lease, as read now.
func (f *fixture) claim(r *live, lease string) {
	f.t.Helper()
	got := f.get(r.ID)
	ok, err := f.s.ClaimExpired(f.ctx, runs.Claim{RunID: r.ID, Version: got.Version, LastSeq: got.LastSeq, Lease: lease, TTL: hour})
	if err != nil || !ok {
		f.t.Fatalf("ClaimExpired %s = %v, %v; want true", r.ID, ok, err)
	}
	r.Lease = lease
}

// eventually waits until cond holds. The deadline only stops a broken store from hanging the
// suite: nothing is asserted about how long it takes.
func (f *fixture) eventually(what string, cond func() bool) {
	f.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			f.t.Fatalf("waited 30s for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// changes returns every suspended-set change recorded, by any instance.
func (f *fixture) changes() []runs.ChangeRecord {
	f.t.Helper()
	list, err := f.s.Changes(f.ctx, time.Time{}, "no-such-instance")
	if err != nil {
		f.t.Fatalf("Changes: %v", err)
	}
	return list
}

// history returns the last 1000 messages of a thread of a resource.
func (f *fixture) history(resourceID *string, threadID string) []llm.Message {
	f.t.Helper()
	msgs, err := f.s.ThreadHistory(f.ctx, resourceID, threadID, 1000)
	if err != nil {
		f.t.Fatalf("ThreadHistory %s: %v", threadID, err)
	}
	return msgs
}

// wantLeaseLost fails unless err is ErrLeaseLost.
func wantLeaseLost(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, runs.ErrLeaseLost) {
		t.Fatalf("%s: error %v, want ErrLeaseLost", what, err)
	}
}

// wantStale fails unless err is ErrStale.
func wantStale(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, runs.ErrStale) {
		t.Fatalf("%s: error %v, want ErrStale", what, err)
	}
}

func ptr[T any](v T) *T { return &v }

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// oneWinner returns which of racing compare-and-sets took: exactly one error must be nil and
// every other ErrStale. who names the racers in the failures ("decider").
func oneWinner(t *testing.T, who string, errs []error) int {
	t.Helper()
	return oneWinnerOf(t, who, errs, runs.ErrStale)
}

// oneWinnerOf is oneWinner whose losers fail with lost.
func oneWinnerOf(t *testing.T, who string, errs []error, lost error) int {
	t.Helper()
	winner := -1
	for i, err := range errs {
		switch {
		case err == nil && winner >= 0:
			t.Fatalf("%ss %d and %d both won", who, winner, i)
		case err == nil:
			winner = i
		case !errors.Is(err, lost):
			t.Errorf("%s %d: %v, want %v", who, i, err, lost)
		}
	}
	if winner < 0 {
		t.Fatalf("no %s won", who)
	}
	return winner
}
