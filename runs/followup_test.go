package runs_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"gorm.io/gorm"

	"interlock/agent"
	"interlock/gormstore"
	"interlock/internal/dbtest"
	"interlock/llm"
	"interlock/notify"
	"interlock/runs"
	"interlock/runtype"
)

// followUpOf is the example: remind after 10m, escalate to finance-lead after 30m, warn
// 10m before the 60m approvalTimeout.
var followUpOf = agent.FollowUp{RemindAfter: 10 * time.Minute, EscalateAfter: 30 * time.Minute, EscalateTo: []string{"finance-lead"}, ExpiringBefore: 10 * time.Minute}

// followedAgents are the demo support agent's refund tool with a 60m approvalTimeout and
// followUpOf: as "followed-agent", decided by role refunds, and as "followed-open", decided by
// any approver.
func followedAgents() []*agent.Agent {
	var out []*agent.Agent
	for _, id := range []string{"followed-agent", "followed-open"} {
		for _, t := range agent.DemoAgents(&llm.Demo{})[0].Tools {
			if t.Name != "issue_refund" {
				continue
			}
			c := *t
			c.ApprovalTimeout, c.FollowUp = time.Hour, followUpOf
			if id == "followed-agent" {
				c.ApproverRoles = []string{"refunds"}
			}
			out = append(out, &agent.Agent{ID: id, Name: id, Model: &llm.Demo{}, Tools: []*agent.Tool{&c}})
		}
	}
	return out
}

// followSetup is a service over db serving followedAgents, on clock, whose loops pass every
// 5ms, announcing every kind to one webhook; passes counts its expiry loop's passes.
func followSetup(t *testing.T, db *gorm.DB, clock *testClock) (*fixture, *loopPasses) {
	t.Helper()
	var passes *loopPasses
	f := setupWith(t, db, runs.Config{NowFunc: clock.now, ExpiryInterval: 5 * time.Millisecond,
		Webhooks: []notify.Target{{Name: "hook", Events: notify.Kinds}}},
		setupOpts{agents: followedAgents(), wrap: func(st runs.Store) runs.Store { passes = &loopPasses{Store: st}; return passes }})
	return f, passes
}

// waitEvent follows run from seq after until an event of type typ, and returns it.
func waitEvent(t *testing.T, f *fixture, runID string, after int64, typ runtype.EventType) runtype.Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(bg(), 20*time.Second)
	defer cancel()
	ch, err := f.svc.Follow(ctx, runID, after)
	if err != nil {
		t.Fatal(err)
	}
	for ev := range ch {
		if ev.Type == typ {
			return ev
		}
	}
	t.Fatalf("run %s: no %s within 20s", runID, typ)
	return runtype.Event{}
}

// deliveries are the webhook rows of a run as "kind", in order, with their payloads.
func deliveries(t *testing.T, db *gorm.DB, runID string) ([]string, []notify.Event) {
	t.Helper()
	list, err := gormstore.New(db).Deliveries(bg(), runID)
	if err != nil {
		t.Fatal(err)
	}
	kinds, events := make([]string, len(list)), make([]notify.Event, len(list))
	for i, d := range list {
		kinds[i] = string(d.Kind)
		if err := json.Unmarshal(d.Payload, &events[i]); err != nil {
			t.Fatal(err)
		}
	}
	return kinds, events
}

// TestFollowUpIsSentOnceEach: a call of a tool with remindAfter 10m, escalateAfter 30m and
// expiringBefore 10m (of 60m) gets, as the injected clock passes each due time, one
// TOOL_CALL_REMINDER, one TOOL_CALL_ESCALATED and one TOOL_CALL_EXPIRING, each with its webhook
// (approval.reminder, approval.escalated, approval.expiring: the call, the run, when it was
// due, to whom it is escalated) and its marker on the waiting call — and nothing before it is
// due, nor again on later passes of the loop.
func TestFollowUpIsSentOnceEach(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		clock := &testClock{}
		f, passes := followSetup(t, db, clock)
		r := f.suspended(t, runs.StartParams{AgentID: "followed-agent", Prompt: "refund order 42 for 30"})
		call := r.ToolCalls[0]
		base := *r.SuspendedAt
		for what, got := range map[string]*time.Time{"remindAt": call.RemindAt, "escalateAt": call.EscalateAt, "expiringAt": call.ExpiringAt} {
			if got == nil {
				t.Fatalf("%s missing on %+v", what, call)
			}
		}
		if !call.RemindAt.Equal(base.Add(10*time.Minute)) || !call.EscalateAt.Equal(base.Add(30*time.Minute)) || !call.ExpiringAt.Equal(base.Add(50*time.Minute)) {
			t.Fatalf("due times %v %v %v, want suspendedAt %v + 10m, 30m, 50m", call.RemindAt, call.EscalateAt, call.ExpiringAt, base)
		}
		waitPasses(t, "the loop", &passes.expiry, 3)
		if kinds, _ := deliveries(t, db, r.ID); !slices.Equal(kinds, []string{"approval_requested"}) {
			t.Fatalf("before anything is due: deliveries %v", kinds)
		}

		steps := []struct {
			advance time.Duration
			typ     runtype.EventType
		}{{11 * time.Minute, runtype.EventToolCallReminder}, {20 * time.Minute, runtype.EventToolCallEscalated}, {20 * time.Minute, runtype.EventToolCallExpiring}}
		after := r.LastSeq
		for _, s := range steps {
			clock.advance(s.advance)
			ev := waitEvent(t, f, r.ID, after, s.typ)
			after = ev.Seq
			if ev.ToolCall == nil || ev.ToolCall.ToolCallID != call.ToolCallID || ev.Reason == "" {
				t.Fatalf("%s = %+v, want the call and a reason", s.typ, ev)
			}
			waitPasses(t, "the loop", &passes.expiry, 3)
		}
		got, err := f.svc.Get(bg(), r.ID)
		if err != nil || got.Status != runtype.StatusSuspended || len(got.ToolCalls) != 1 {
			t.Fatalf("run after the warning: %+v, %v", got, err)
		}
		c := got.ToolCalls[0]
		if c.RemindedAt == nil || c.EscalatedAt == nil || c.ExpiringWarnedAt == nil || !slices.Equal(c.EscalateTo, []string{"finance-lead"}) {
			t.Fatalf("markers on the waiting call: %+v", c)
		}
		evs := allEvents(t, f, r.ID)
		for _, s := range steps {
			if n := countType(evs, s.typ); n != 1 {
				t.Errorf("%d %s events, want 1", n, s.typ)
			}
		}
		kinds, payloads := deliveries(t, db, r.ID)
		if !slices.Equal(kinds, []string{"approval_requested", "approval.reminder", "approval.escalated", "approval.expiring"}) {
			t.Fatalf("deliveries %v", kinds)
		}
		for i, due := range []*time.Time{call.RemindAt, call.EscalateAt, call.ExpiringAt} {
			p := payloads[i+1]
			if p.DueAt == nil || !p.DueAt.Equal(*due) || p.Run.ID != r.ID || p.ToolCall == nil || p.ToolCall.ToolName != "issue_refund" {
				t.Errorf("%s payload: %+v, want due %v", kinds[i+1], p, due)
			}
		}
		if p := payloads[2]; !slices.Equal(p.EscalatedTo, []string{"finance-lead"}) {
			t.Errorf("approval.escalated names %v, want [finance-lead]", p.EscalatedTo)
		}
		if p := payloads[3]; p.ToolCall.ExpiresAt == nil || !p.ToolCall.ExpiresAt.Equal(base.Add(time.Hour)) {
			t.Errorf("approval.expiring: expiresAt %v, want %v", p.ToolCall.ExpiresAt, base.Add(time.Hour))
		}
	})
}

// TestEscalationLetsItsRolesDecide: before the call's escalateAt, finance-lead may not decide a
// call only refunds may (FORBIDDEN, saying when it may); from then on it may, whether the loop
// has sent the escalation yet or not. A role the call is not escalated to still may not. Also
// for a tool any approver decides.
func TestEscalationLetsItsRolesDecide(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		clock := &testClock{}
		f := setupWith(t, db, runs.Config{NowFunc: clock.now, ExpiryInterval: time.Hour}, setupOpts{agents: followedAgents()})
		lead, other := as("fiona", nil, "finance-lead"), as("oscar", nil, "ops", runtype.RoleApprover)
		for _, id := range []string{"followed-agent", "followed-open"} {
			r := f.suspended(t, runs.StartParams{AgentID: id, Prompt: "refund order 42 for 30"})
			p := runs.DecideParams{RunID: r.ID}
			clock.advance(29 * time.Minute)
			_, err := f.svc.Approve(lead, p)
			wantCode(t, err, runtype.CodeForbidden)
			if !strings.Contains(err.Error(), "finance-lead may decide it too") {
				t.Errorf("%s: %q does not say when finance-lead may decide", id, err)
			}
			clock.advance(time.Minute)
			if id == "followed-agent" {
				_, err := f.svc.Approve(other, p)
				wantCode(t, err, runtype.CodeForbidden)
			}
			if _, err := f.svc.Decline(lead, p, "not this month"); err != nil {
				t.Fatalf("%s: finance-lead after the escalation: %v", id, err)
			}
			clock.advance(-30 * time.Minute)
		}
	})
}

// noticeFirst is a store whose first Decide finds that a reminder was sent since the decision
// read the run (as by another instance): the decision must be made again, not CONFLICT.
type noticeFirst struct {
	runs.Store
	now  func() time.Time
	done atomic.Bool
}

func (s *noticeFirst) Decide(ctx context.Context, d runs.DecisionWrite) error {
	if !s.done.Swap(true) {
		r, err := s.Store.GetRecord(ctx, d.RunID)
		if err != nil {
			return err
		}
		c := r.ToolCalls[0]
		ev := runtype.Event{Type: runtype.EventToolCallReminder, ToolCall: &c}
		if sent, err := s.Store.SendNotice(ctx, runs.NoticeWrite{RunID: r.ID, ToolCallID: c.ToolCallID, Kind: runs.NoticeReminder,
			After: r.LastSeq, At: s.now(), Events: []runtype.Event{ev}, InstanceID: "other"}); err != nil || !sent {
			return fmt.Errorf("the reminder in between: %v, %w", sent, err)
		}
	}
	return s.Store.Decide(ctx, d)
}

// TestADecisionRacingAReminderStands: a reminder appended between a decision's read and its
// compare-and-set does not make the decision CONFLICT: it is made again and stands.
func TestADecisionRacingAReminderStands(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		clock := &testClock{}
		f := setupWith(t, db, runs.Config{NowFunc: clock.now, ExpiryInterval: time.Hour}, setupOpts{agents: followedAgents(),
			wrap: func(st runs.Store) runs.Store { return &noticeFirst{Store: st, now: clock.now} }})
		r := f.suspended(t, runs.StartParams{AgentID: "followed-open", Prompt: "refund order 42 for 30"})
		clock.advance(11 * time.Minute)
		if _, err := f.svc.Approve(as("alice", nil, runtype.RoleApprover), runs.DecideParams{RunID: r.ID}); err != nil {
			t.Fatalf("approval racing a reminder: %v", err)
		}
		done := f.finished(t, r.ID)
		if done.Status != runtype.StatusCompleted || len(done.Decisions) != 1 || done.Decisions[0].Kind != runtype.DecisionApproved {
			t.Fatalf("run %s, decisions %+v", done.Status, done.Decisions)
		}
		if n := countType(allEvents(t, f, r.ID), runtype.EventToolCallReminder); n != 1 {
			t.Errorf("%d reminders, want 1", n)
		}
	})
}

// TestTwoServicesFollowUpOnce: two instances over one database, on one injected clock, their
// loops passing every 5ms: when the clock jumps past every due time of three waiting calls at
// once, each step of each call is stored and announced exactly once (one webhook row each).
func TestTwoServicesFollowUpOnce(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		clock := &testClock{}
		a, pa := followSetup(t, db, clock)
		b, pb := followSetup(t, db, clock)
		var ids []string
		for _, p := range []string{"refund order 1 for 2", "refund order 3 for 4", "refund order 5 for 6"} {
			ids = append(ids, a.suspended(t, runs.StartParams{AgentID: "followed-open", Prompt: p}).ID)
		}
		clock.advance(55 * time.Minute) // before the expiry, after every step
		for _, id := range ids {
			waitEvent(t, b, id, 0, runtype.EventToolCallExpiring)
			waitEvent(t, a, id, 0, runtype.EventToolCallEscalated)
		}
		waitPasses(t, "instance a", &pa.expiry, 3)
		waitPasses(t, "instance b", &pb.expiry, 3)
		for _, id := range ids {
			kinds, _ := deliveries(t, db, id)
			slices.Sort(kinds)
			if !slices.Equal(kinds, []string{"approval.escalated", "approval.expiring", "approval.reminder", "approval_requested"}) {
				t.Errorf("run %s: deliveries %v, want each once", id, kinds)
			}
			evs := allEvents(t, a, id)
			checkSeqs(t, evs)
			for _, typ := range []runtype.EventType{runtype.EventToolCallReminder, runtype.EventToolCallEscalated, runtype.EventToolCallExpiring} {
				if n := countType(evs, typ); n != 1 {
					t.Errorf("run %s: %d %s, want 1", id, n, typ)
				}
			}
		}
	})
}

// TestExternalRequestIsFollowedUp: an external agent's approval request follows its tool's
// follow-up as any waiting call: its due times, the reminder and the escalation with their
// webhooks, and finance-lead may decide it once it is escalated, which ends the request.
func TestExternalRequestIsFollowedUp(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		clock := &testClock{}
		tool := &agent.Tool{Name: "deploy", RequireApproval: true, ApprovalTimeout: time.Hour, FollowUp: followUpOf,
			ApproverRoles: []string{"sre"}, InputSchema: json.RawMessage(`{"type":"object"}`)}
		ext := &agent.Agent{ID: "followed-bot", Name: "bot", External: true, Tools: []*agent.Tool{tool}}
		var passes *loopPasses
		f := setupWith(t, db, runs.Config{NowFunc: clock.now, ExpiryInterval: 5 * time.Millisecond,
			Webhooks: []notify.Target{{Name: "hook", Events: notify.Kinds}}},
			setupOpts{agents: []*agent.Agent{ext}, wrap: func(st runs.Store) runs.Store { passes = &loopPasses{Store: st}; return passes }})
		r := request(t, f, bg(), runs.ApprovalParams{AgentID: "followed-bot", ToolName: "deploy"})
		if len(r.ToolCalls) != 1 || r.ToolCalls[0].RemindAt == nil || r.ToolCalls[0].EscalateAt == nil || r.ToolCalls[0].ExpiringAt == nil {
			t.Fatalf("request's call %+v, want its due times", r.ToolCalls)
		}
		clock.advance(11 * time.Minute)
		ev := waitEvent(t, f, r.ID, 0, runtype.EventToolCallReminder)
		lead := as("fiona", nil, "finance-lead")
		_, err := f.svc.Approve(lead, runs.DecideParams{RunID: r.ID})
		wantCode(t, err, runtype.CodeForbidden)
		clock.advance(20 * time.Minute)
		waitEvent(t, f, r.ID, ev.Seq, runtype.EventToolCallEscalated)
		waitPasses(t, "the loop", &passes.expiry, 3)
		done, err := f.svc.Approve(lead, runs.DecideParams{RunID: r.ID})
		if err != nil || done.Status != runtype.StatusCompleted {
			t.Fatalf("finance-lead's approval after the escalation: %+v, %v", done, err)
		}
		kinds, _ := deliveries(t, db, r.ID)
		if !slices.Equal(kinds, []string{"approval_requested", "approval.reminder", "approval.escalated", "decided"}) {
			t.Fatalf("deliveries %v", kinds)
		}
	})
}
