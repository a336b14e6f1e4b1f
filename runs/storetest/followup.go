package storetest

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"interlock/notify"
	"interlock/runs"
	"interlock/runtype"
)

// followed is an approval that expires at 600s, with a reminder due at 100s, an escalation to
// finance-lead at 200s and an expiry warning at 500s.
func followed(callID string) runtype.ToolCall {
	c := expiring(callID, at(600))
	remind, escalate, warn := at(100), at(200), at(500)
	c.RemindAt, c.EscalateAt, c.ExpiringAt, c.EscalateTo = &remind, &escalate, &warn, []string{"finance-lead"}
	return c
}

// suspendedFollowed inserts a run and suspends it, at its creation time, on followed("call-1").
func (f *fixture) suspendedFollowed() (*runs.Record, *live) {
	f.t.Helper()
	r := f.insert(runOpts{})
	return f.suspend(r, followed("call-1"), f.get(r.ID).CreatedAt, "instance-1"), r
}

// dueNotices returns what DueNotices lists at now, as "run/call kind".
func (f *fixture) dueNotices(now time.Time, limit int) []string {
	f.t.Helper()
	list, err := f.s.DueNotices(f.ctx, now, limit)
	if err != nil {
		f.t.Fatalf("DueNotices: %v", err)
	}
	out := make([]string, len(list))
	for i, d := range list {
		out[i] = fmt.Sprintf("%s/%s %s", d.RunID, d.ToolCallID, d.Kind)
	}
	return out
}

// noticeEvent is the event of a follow-up step of kind on the call as read.
func noticeEvent(kind runs.NoticeKind, c runtype.ToolCall) runtype.Event {
	typ := map[runs.NoticeKind]runtype.EventType{runs.NoticeReminder: runtype.EventToolCallReminder,
		runs.NoticeEscalation: runtype.EventToolCallEscalated, runs.NoticeExpiring: runtype.EventToolCallExpiring}[kind]
	return runtype.Event{Type: typ, ToolCall: &c}
}

// notice is the write that sends step kind of r's first call at when, as the service makes it
// from r as read.
func (f *fixture) notice(r *runs.Record, kind runs.NoticeKind, when time.Time) runs.NoticeWrite {
	f.t.Helper()
	evs := []runtype.Event{noticeEvent(kind, r.ToolCalls[0])}
	return runs.NoticeWrite{RunID: r.ID, ToolCallID: r.ToolCalls[0].ToolCallID, Kind: kind, After: r.LastSeq, At: when,
		Events: evs, InstanceID: "instance-1", Outbox: f.announce(&r.Run, r.LastSeq, when, evs, notify.Call{})}
}

func testFollowUp(t *testing.T, open Opener) {
	each(t, open, "DueTimesAreStoredWithThePendingCall", func(t *testing.T, f *fixture) {
		r, _ := f.suspendedFollowed()
		c := r.ToolCalls[0]
		if c.RemindAt == nil || c.EscalateAt == nil || c.ExpiringAt == nil {
			t.Fatalf("pending call %s, want its due times", body(c))
		}
		wantTime(t, "remindAt", *c.RemindAt, at(100))
		wantTime(t, "escalateAt", *c.EscalateAt, at(200))
		wantTime(t, "expiringAt", *c.ExpiringAt, at(500))
		if !slices.Equal(c.EscalateTo, []string{"finance-lead"}) || c.RemindedAt != nil || c.EscalatedAt != nil || c.ExpiringWarnedAt != nil {
			t.Fatalf("pending call %s, want escalateTo [finance-lead] and nothing sent", body(c))
		}
		plain := f.suspended(runOpts{}).ToolCalls[0]
		if plain.RemindAt != nil || plain.EscalateAt != nil || plain.ExpiringAt != nil || plain.EscalateTo != nil {
			t.Errorf("a call without follow-up has %s", body(plain))
		}
	})

	each(t, open, "DueNoticesListsDueStepsOfTopLevelRunsEarliestFirst", func(t *testing.T, f *fixture) {
		a, _ := f.suspendedFollowed()
		b, _ := f.suspendedFollowed()
		f.suspended(runOpts{}) // nothing to follow up
		decided, _ := f.suspendedFollowed()
		f.decide(decided, decision(decided, runtype.DecisionApproved, "lease-d", at(50)))
		parent, child := f.delegated()
		s := suspension(child, followed("inner-1"), at(30), "instance-1")
		s.Ancestors = []runs.AncestorWrite{surfaced(parent, followed("inner-1"))}
		if err := f.s.Suspend(f.ctx, s); err != nil {
			t.Fatal(err)
		}
		wantIDs(t, "due at 99s", f.dueNotices(at(99), 100))
		wantIDs(t, "due at 100s", f.dueNotices(at(100), 100),
			a.ID+"/call-1 reminder", b.ID+"/call-1 reminder", parent.ID+"/delegate-1 reminder")
		wantIDs(t, "due at 500s, limit 4", f.dueNotices(at(500), 4),
			a.ID+"/call-1 reminder", b.ID+"/call-1 reminder", parent.ID+"/delegate-1 reminder", a.ID+"/call-1 escalation")
		if got := f.dueNotices(at(500), 100); len(got) != 9 {
			t.Errorf("due at 500s = %v, want the three steps of three calls", got)
		}
		// Past the deadline the call expires: no warning any more.
		for _, d := range f.dueNotices(at(600), 100) {
			if slices.Contains([]string{a.ID + "/call-1 expiring", b.ID + "/call-1 expiring"}, d) {
				t.Errorf("due at the deadline lists %s", d)
			}
		}
	})

	withOutbox(t, open, "SendNoticeAppendsItsEventOnce", []notify.Target{{Name: "all", Events: notify.Kinds}}, func(t *testing.T, f *fixture, ob notify.Store) {
		r, _ := f.suspendedFollowed()
		before := len(f.changes())
		w := f.notice(r, runs.NoticeReminder, at(101))
		sent, err := f.s.SendNotice(f.ctx, w)
		if err != nil || !sent {
			t.Fatalf("SendNotice = %v, %v; want sent", sent, err)
		}
		got := f.get(r.ID)
		if got.Status != runtype.StatusSuspended || got.Version != r.Version || got.LastSeq != r.LastSeq+1 || got.ToolCalls[0].RemindedAt == nil {
			t.Fatalf("after the reminder: %s v%d seq %d, call %s", got.Status, got.Version, got.LastSeq, body(got.ToolCalls))
		}
		wantTime(t, "remindedAt", *got.ToolCalls[0].RemindedAt, at(101))
		wantEvents(t, "events", f.eventsAfter(r.ID, r.LastSeq), stored(r.ID, r.LastSeq, at(101), w.Events...))
		if ch := f.changes(); len(ch) != before+1 || ch[len(ch)-1].Kind != runs.ChangeChanged {
			t.Errorf("changes after the reminder: %+v, want one CHANGED more", ch)
		}
		wantSummary(t, "deliveries", summary(t, f.deliveries(ob, r.ID)), "all approval_requested approval PENDING", "all approval.reminder  PENDING")
		// Sent once: the same step again, from the run as it is now, stores nothing.
		again, err := f.s.SendNotice(f.ctx, f.notice(got, runs.NoticeReminder, at(102)))
		if err != nil || again {
			t.Fatalf("second SendNotice = %v, %v; want not sent", again, err)
		}
		wantUnchanged(t, "a second reminder", f.get(r.ID), got)
		wantIDs(t, "due at 101s", f.dueNotices(at(101), 10))
		if n := len(f.deliveries(ob, r.ID)); n != 2 {
			t.Errorf("%d deliveries after a second reminder, want 2", n)
		}
	})

	each(t, open, "OfConcurrentSendersExactlyOneSends", func(t *testing.T, f *fixture) {
		r, _ := f.suspendedFollowed()
		const writers = 8
		var wg sync.WaitGroup
		sent := make([]bool, writers)
		errs := make([]error, writers)
		for i := range writers {
			w := f.notice(r, runs.NoticeEscalation, at(201))
			w.InstanceID = fmt.Sprintf("instance-%d", i)
			wg.Go(func() { sent[i], errs[i] = f.s.SendNotice(f.ctx, w) })
		}
		wg.Wait()
		n := 0
		for i := range writers {
			switch {
			case sent[i] && errs[i] == nil:
				n++
			case !sent[i] && (errs[i] == nil || errors.Is(errs[i], runs.ErrStale)):
			default:
				t.Errorf("writer %d: %v, %v", i, sent[i], errs[i])
			}
		}
		if n != 1 {
			t.Fatalf("%d writers sent the escalation, want 1", n)
		}
		evs := f.events(r.ID)
		wantGapless(t, evs, r.LastSeq+1)
		if evs[len(evs)-1].Type != runtype.EventToolCallEscalated {
			t.Errorf("last event %s, want TOOL_CALL_ESCALATED", evs[len(evs)-1].Type)
		}
	})

	each(t, open, "NothingIsSentEarlyOrOnceTheCallIsDecided", func(t *testing.T, f *fixture) {
		r, _ := f.suspendedFollowed()
		early, err := f.s.SendNotice(f.ctx, f.notice(r, runs.NoticeReminder, at(99)))
		if err != nil || early {
			t.Fatalf("SendNotice before it is due = %v, %v; want not sent", early, err)
		}
		wantUnchanged(t, "an early reminder", f.get(r.ID), r)
		f.decide(r, decision(r, runtype.DecisionDeclined, "lease-d", at(150)))
		wantStale(t, "a reminder read before the decision", errOf(f.s.SendNotice(f.ctx, f.notice(r, runs.NoticeReminder, at(151)))))
		wantIDs(t, "due after the decision", f.dueNotices(at(550), 10))
	})

	each(t, open, "ADecisionReadBeforeANoticeIsStale", func(t *testing.T, f *fixture) {
		r, _ := f.suspendedFollowed()
		if sent, err := f.s.SendNotice(f.ctx, f.notice(r, runs.NoticeReminder, at(100))); err != nil || !sent {
			t.Fatalf("SendNotice = %v, %v", sent, err)
		}
		// The run's last seq moved: the decision read before must read it again (the service
		// does, when only notices moved it).
		wantStale(t, "a decision read before the reminder", f.s.Decide(f.ctx, decision(r, runtype.DecisionApproved, "lease-d", at(101))))
		f.decide(f.get(r.ID), decision(f.get(r.ID), runtype.DecisionApproved, "lease-d", at(101)))
	})
}

// errOf is the error of a (value, error) pair.
func errOf[T any](_ T, err error) error { return err }
