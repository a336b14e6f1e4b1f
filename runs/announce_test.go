package runs_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"gorm.io/gorm"

	"interlock/gormstore"
	"interlock/internal/dbtest"
	"interlock/notify"
	"interlock/runs"
	"interlock/runtype"
)

// TestAnnouncedOnTheTopLevelRunOnly: the service decides what its writes announce
// (announce.go). A call three levels deep waits for approval: only the chief's run, which shows
// it, announces it (the supervisor's and the support agent's runs are sub-agents' runs); the
// approval given on the chief's run is announced there as decided, to the webhooks taking each
// kind, in the transactions that stored them.
func TestAnnouncedOnTheTopLevelRunOnly(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		all := notify.Target{Name: "all", Events: notify.Kinds}
		decided := notify.Target{Name: "decided", Events: []notify.Kind{notify.Decided}}
		f := setupChainWith(t, db, runs.Config{Webhooks: []notify.Target{all, decided}})
		c := suspendedChain(t, f, "refund order 42 for 30")
		outbox := gormstore.New(db)
		summary := func(runID string) []string {
			t.Helper()
			list, err := outbox.Deliveries(bg(), runID)
			if err != nil {
				t.Fatal(err)
			}
			out := make([]string, len(list))
			for i, d := range list {
				out[i] = fmt.Sprintf("%s %s", d.Target, d.Kind)
			}
			return out
		}
		want := func(what string, got []string, want ...string) {
			t.Helper()
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("%s: deliveries %q, want %q", what, got, want)
			}
		}
		want("the chief's run", summary(c.chief.ID), "all approval_requested")
		want("the supervisor's run", summary(c.supervisor.ID))
		want("the support agent's run", summary(c.support.ID))

		if _, err := f.svc.Approve(as("alice", nil, runtype.RoleAdmin), runs.DecideParams{RunID: c.chief.ID}); err != nil {
			t.Fatal(err)
		}
		want("the chief's run after the approval", summary(c.chief.ID), "all approval_requested", "all decided", "decided decided")
		want("the supervisor's run after the approval", summary(c.supervisor.ID))
		want("the support agent's run after the approval", summary(c.support.ID))
	})
}

// TestAnnouncedAsStored: what each write announces is what it stored, as the store once read it
// back in the write's transaction: every delivery's event id names the seq of the event it
// announces (TOOL_CALL_APPROVAL or _SUSPENDED for approval_requested, the decision's event for
// decided, RUN_RESUMED for a resume), on the run's thread and resource, once per webhook; an
// approval with edited arguments is edit_approved exactly when the stored decision kept them;
// a resume names the call as it waited (its payload). Through a suspension for input and its
// resume, two calls waiting together (an edited approval that holds, then a decline), and a
// chain of supervisors (an edited approval on the top-level run).
func TestAnnouncedAsStored(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		all := notify.Target{Name: "all", Events: notify.Kinds}
		cfg := runs.Config{Webhooks: []notify.Target{all}}
		f := setup(t, db, cfg)
		ctx := as("alice", nil, runtype.RoleAdmin) // a person decides: a resume by nobody is not announced
		st := gormstore.New(db)

		asked := f.suspended(t, runs.StartParams{Prompt: "ask the customer for their favourite colour", ThreadID: ptr("th-1"), ResourceID: ptr("res-1")})
		if _, err := f.svc.Resume(ctx, runs.DecideParams{RunID: asked.ID}, json.RawMessage(`{"answer":"blue"}`)); err != nil {
			t.Fatal(err)
		}
		f.finished(t, asked.ID)
		checkAnnounced(t, st, asked.ID, "approval_requested", "decided/resumed")

		two := f.suspended(t, runs.StartParams{Prompt: "refund orders 7 and 8", ThreadID: ptr("th-2"), ResourceID: ptr("res-1")})
		first := two.ToolCalls[0]
		if _, err := f.svc.EditAndApprove(ctx, runs.DecideParams{RunID: two.ID, ToolCallID: &first.ToolCallID}, first.Args); err != nil {
			t.Fatal(err)
		}
		if _, err := f.svc.Decline(ctx, runs.DecideParams{RunID: two.ID, ToolCallID: &two.ToolCalls[1].ToolCallID}, "no"); err != nil {
			t.Fatal(err)
		}
		f.finished(t, two.ID)
		checkAnnounced(t, st, two.ID, "approval_requested", "approval_requested", "decided/edit_approved", "decided/declined")

		chained := setupChainWith(t, db, cfg)
		c := suspendedChain(t, chained, "refund order 42 for 30")
		args := c.chief.ToolCalls[0].Args
		if _, err := chained.svc.EditAndApprove(as("alice", nil, runtype.RoleAdmin), runs.DecideParams{RunID: c.chief.ID}, args); err != nil {
			t.Fatal(err)
		}
		chained.finished(t, c.chief.ID)
		checkAnnounced(t, st, c.chief.ID, "approval_requested", "decided/edit_approved")
		checkAnnounced(t, st, c.supervisor.ID)
		checkAnnounced(t, st, c.support.ID)
	})
}

// checkAnnounced checks the deliveries of run runID (to one webhook) against its stored events,
// calls and decisions, and that they are of the kinds want ("decided/declined"), in order.
func checkAnnounced(t *testing.T, st *gormstore.Store, runID string, want ...string) {
	t.Helper()
	ctx := bg()
	r, err := st.GetRun(ctx, runID)
	if err != nil || r == nil {
		t.Fatalf("GetRun %s: %v, %v", runID, r, err)
	}
	evs, err := st.Events(ctx, runID, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	list, err := st.Deliveries(ctx, runID)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	seen := map[string]bool{}
	for _, d := range list {
		var e notify.Event
		if err := json.Unmarshal(d.Payload, &e); err != nil {
			t.Fatal(err)
		}
		kind := string(e.Type)
		if e.Decision != "" {
			kind += "/" + e.Decision
		}
		got = append(got, kind)
		if seen[d.Target+" "+d.EventID] {
			t.Errorf("run %s: %s delivered twice to %s", runID, d.EventID, d.Target)
		}
		seen[d.Target+" "+d.EventID] = true
		if e.ID != d.EventID || !sameStr(e.Run.ThreadID, r.ThreadID) || !sameStr(e.Run.ResourceID, r.ResourceID) {
			t.Errorf("run %s: %s is event %s of thread %v resource %v; want the run's %v, %v", runID, d.EventID, e.ID, deref(e.Run.ThreadID), deref(e.Run.ResourceID), deref(r.ThreadID), deref(r.ResourceID))
		}
		var ev *runtype.Event
		for i := range evs {
			if notify.EventID(runID, evs[i].Seq) == e.ID {
				ev = &evs[i]
			}
		}
		if ev == nil || e.ToolCall == nil {
			t.Errorf("run %s: %s (%s) names no stored event or no call", runID, e.ID, kind)
			continue
		}
		wantType := map[string][]runtype.EventType{
			"approval_requested": {runtype.EventToolCallApproval, runtype.EventToolCallSuspended},
			"decided/approved":   {runtype.EventToolCallApproved}, "decided/edit_approved": {runtype.EventToolCallApproved},
			"decided/declined": {runtype.EventToolCallDeclined}, "decided/resumed": {runtype.EventRunResumed}, "expired": {runtype.EventToolCallExpired},
		}[kind]
		if !slices.Contains(wantType, ev.Type) {
			t.Errorf("run %s: %s (%s) names event %d, a %s", runID, e.ID, kind, ev.Seq, ev.Type)
		}
		if ev.ToolCall != nil && ev.ToolCall.ToolCallID != e.ToolCall.ToolCallID {
			t.Errorf("run %s: %s (%s) is of call %s, its event of %s", runID, e.ID, kind, e.ToolCall.ToolCallID, ev.ToolCall.ToolCallID)
		}
		if e.Type != notify.Decided {
			continue
		}
		var dec *runtype.Decision
		for i := range r.Decisions {
			if r.Decisions[i].ToolCallID == e.ToolCall.ToolCallID {
				dec = &r.Decisions[i]
			}
		}
		if dec == nil {
			t.Errorf("run %s: %s decides call %s, which has no stored decision", runID, e.ID, e.ToolCall.ToolCallID)
			continue
		}
		if edited := dec.EditedArgs != nil; (e.Decision == "edit_approved") != edited && dec.Kind == runtype.DecisionApproved {
			t.Errorf("run %s: %s is %s, stored with edited args: %v", runID, e.ID, e.Decision, edited)
		}
		if e.Decision == "resumed" {
			var waited *runtype.Event
			for i := range evs {
				if evs[i].Type == runtype.EventToolCallSuspended && evs[i].ToolCall.ToolCallID == e.ToolCall.ToolCallID {
					waited = &evs[i]
				}
			}
			if waited == nil || string(waited.ToolCall.SuspendPayload) != string(e.ToolCall.SuspendPayload) || string(waited.ToolCall.Args) != string(e.ToolCall.Args) {
				t.Errorf("run %s: resumed %+v, not the call as it waited (%+v)", runID, e.ToolCall, waited)
			}
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("run %s: announced %v, want %v", runID, got, want)
	}
}

func sameStr(a, b *string) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }

func deref(p *string) string {
	if p == nil {
		return "<nil>"
	}
	return *p
}

// TestAnnouncedAsStoredByTheServer: as TestAnnouncedAsStored, for what the server decides and
// for requests: a sub-agent's call that expires (announced on the supervisor's run only), an
// external agent's request decided with edited arguments, and one its asker abandons.
func TestAnnouncedAsStoredByTheServer(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		all := notify.Target{Name: "all", Events: notify.Kinds}
		st := gormstore.New(db)
		clock := &testClock{}
		f := setupWith(t, db, runs.Config{NowFunc: clock.now, ExpiryInterval: 10 * time.Millisecond, Webhooks: []notify.Target{all}},
			setupOpts{agents: append(expiringAgents(), externalAgents()...)})
		top := f.suspended(t, runs.StartParams{AgentID: "expiring-supervisor", Prompt: "refund order 9 for 3", ThreadID: ptr("th-x"), ResourceID: ptr("res-x")})
		clock.advance(31 * time.Minute)
		f.finished(t, top.ID)
		checkAnnounced(t, st, top.ID, "approval_requested", "expired")
		var child string
		if err := db.Table("agent_runs").Where("parent_run_id = ?", top.ID).Select("id").Row().Scan(&child); err != nil {
			t.Fatal(err)
		}
		checkAnnounced(t, st, child)

		sre := as("sam", nil, runtype.RoleAdmin)
		edited := request(t, f, sre, runs.ApprovalParams{ThreadID: "th-r", ResourceID: "res-r"})
		if _, err := f.svc.EditAndApprove(sre, runs.DecideParams{RunID: edited.ID}, json.RawMessage(`{"service":"api","version":"1.2.2"}`)); err != nil {
			t.Fatal(err)
		}
		checkAnnounced(t, st, edited.ID, "approval_requested", "decided/edit_approved")

		left := request(t, f, sre, runs.ApprovalParams{AgentID: "hooks", ToolName: "Bash", Args: json.RawMessage(`{"command":"ls"}`)})
		if _, ended, err := f.svc.Abandon(bg(), left.ID, "the hook", "it timed out"); err != nil || !ended {
			t.Fatalf("Abandon = %v, %v", ended, err)
		}
		checkAnnounced(t, st, left.ID, "approval_requested", "expired")
	})
}

// TestAnnouncedResumeThroughSupervisors: a sub-agent's call waiting for input, resumed on the
// top-level run that shows it, is announced there as resumed, naming the call as that run
// showed it (its id there, its payload).
func TestAnnouncedResumeThroughSupervisors(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		f := setupChainWith(t, db, runs.Config{Webhooks: []notify.Target{{Name: "all", Events: notify.Kinds}}})
		c := suspendedChain(t, f, "ask the customer for their favourite colour")
		if _, err := f.svc.Resume(as("alice", nil, runtype.RoleAdmin), runs.DecideParams{RunID: c.chief.ID}, json.RawMessage(`{"answer":"blue"}`)); err != nil {
			t.Fatal(err)
		}
		f.finished(t, c.chief.ID)
		st := gormstore.New(db)
		checkAnnounced(t, st, c.chief.ID, "approval_requested", "decided/resumed")
		checkAnnounced(t, st, c.supervisor.ID)
		checkAnnounced(t, st, c.support.ID)
	})
}
