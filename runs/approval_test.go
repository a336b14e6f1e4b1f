package runs_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"gorm.io/gorm"

	"interlock/agent"
	"interlock/internal/dbtest"
	"interlock/llm"
	"interlock/runs"
	"interlock/runtype"
)

// externalAgents are the external agents of the approval tests: deploy-bot asks about deploy
// (a schema, approval, roles sre, a 30m timeout) and status (no approval needed); hooks asks
// about any tool name.
func externalAgents() []*agent.Agent {
	deploy := &agent.Tool{Name: "deploy", RequireApproval: true, ApproverRoles: []string{"sre"}, ApprovalTimeout: 30 * time.Minute,
		InputSchema: json.RawMessage(`{"type":"object","properties":{"service":{"type":"string"},"version":{"type":"string"}},"required":["service","version"],"additionalProperties":false}`)}
	status := &agent.Tool{Name: "status", InputSchema: json.RawMessage(`{"type":"object"}`)}
	return []*agent.Agent{
		{ID: "deploy-bot", Name: "Deploy bot", External: true, Tools: []*agent.Tool{deploy, status}},
		{ID: "hooks", Name: "Hooks", External: true, AnyTool: &agent.Tool{Name: "*", RequireApproval: true}},
	}
}

func externalSetup(t *testing.T, db *gorm.DB, cfg runs.Config) *fixture {
	t.Helper()
	return setupWith(t, db, cfg, setupOpts{agents: externalAgents()})
}

var deployArgs = json.RawMessage(`{ "version": "1.2.3", "service": "api" }`)

func request(t *testing.T, f *fixture, ctx context.Context, p runs.ApprovalParams) *runtype.Run {
	t.Helper()
	if p.AgentID == "" {
		p.AgentID, p.ToolName = "deploy-bot", "deploy"
	}
	if p.Args == nil {
		p.Args = deployArgs
	}
	r, err := f.svc.RequestApproval(ctx, p)
	if err != nil {
		t.Fatalf("RequestApproval: %v", err)
	}
	return r
}

func countRuns(t *testing.T, db *gorm.DB) int64 {
	t.Helper()
	var n int64
	if err := db.Table("agent_runs").Count(&n).Error; err != nil {
		t.Fatal(err)
	}
	return n
}

func eventTypes(evs []runtype.Event) []runtype.EventType {
	out := make([]runtype.EventType, len(evs))
	for i, ev := range evs {
		out[i] = ev.Type
	}
	return out
}

func sameTypes(got []runtype.EventType, want ...runtype.EventType) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		if got[i] != want[i] {
			return false
		}
	}
	return true
}

// TestApprovalRequestSuspendsAndItsDecisionEndsIt: a request is a run SUSPENDED on its one
// call, in the inbox like any other, with its context and its requester as startedBy; the
// approval ends it (COMPLETED, TOOL_CALL_APPROVED then RUN_FINISHED), and nothing runs here.
func TestApprovalRequestSuspendsAndItsDecisionEndsIt(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		f := externalSetup(t, db, runs.Config{})
		bot := as("deploy-bot-token", nil, runtype.RoleRequester)
		r := request(t, f, bot, runs.ApprovalParams{Context: "Deploying **api** 1.2.3: the canary passed.", ThreadID: "deploy-42"})
		if r.Status != runtype.StatusSuspended || len(r.ToolCalls) != 1 || r.StartedBy == nil || *r.StartedBy != "deploy-bot-token" {
			t.Fatalf("request: %s, calls %+v, startedBy %v", r.Status, r.ToolCalls, r.StartedBy)
		}
		call := r.ToolCalls[0]
		if string(call.Args) != `{"version":"1.2.3","service":"api"}` || !call.RequiresApproval || call.ExpiresAt == nil ||
			!call.ExpiresAt.Equal(r.SuspendedAt.Add(30*time.Minute)) || call.ToolCallID != "tc_1" {
			t.Fatalf("call %+v (args %s): want the canonical args, waiting for approval until suspendedAt+30m", call, call.Args)
		}
		got, err := f.svc.Get(bot, r.ID)
		if err != nil {
			t.Fatalf("the requester reads its own request: %v", err)
		}
		if got.Context == nil || *got.Context != "Deploying **api** 1.2.3: the canary passed." || got.ThreadID == nil || *got.ThreadID != "deploy-42" {
			t.Fatalf("stored context %v, thread %v", got.Context, got.ThreadID)
		}
		list, err := f.svc.ListSuspended(bg(), runs.ListSuspendedParams{})
		if err != nil || list.Total != 1 || list.Runs[0].ID != r.ID || list.Runs[0].Context == nil {
			t.Fatalf("inbox: %+v, %v", list, err)
		}
		if !sameTypes(eventTypes(allEventsUntil(t, f, r.ID, 4)), runtype.EventRunStarted, runtype.EventToolCallRequested, runtype.EventToolCallApproval, runtype.EventRunSuspended) {
			t.Fatalf("events of the request: %v", eventTypes(allEventsUntil(t, f, r.ID, 4)))
		}
		decided, err := f.svc.Approve(as("sam", nil, "sre"), runs.DecideParams{RunID: r.ID})
		if err != nil {
			t.Fatal(err)
		}
		if decided.Status != runtype.StatusCompleted || len(decided.Decisions) != 1 || decided.Decisions[0].Kind != runtype.DecisionApproved ||
			*decided.Decisions[0].DecidedBy != "sam" {
			t.Fatalf("approved: %s, decisions %+v", decided.Status, decided.Decisions)
		}
		evs := allEvents(t, f, r.ID)
		if !sameTypes(eventTypes(evs), runtype.EventRunStarted, runtype.EventToolCallRequested, runtype.EventToolCallApproval, runtype.EventRunSuspended,
			runtype.EventToolCallApproved, runtype.EventRunFinished) || evs[5].Status != string(runtype.StatusCompleted) {
			t.Fatalf("events: %v", eventTypes(evs))
		}
		stored, err := f.svc.Get(bg(), r.ID)
		if err != nil || stored.Status != runtype.StatusCompleted || f.record(t, r.ID).Snapshot != nil || len(stored.ToolCalls) != 0 {
			t.Fatalf("stored: %+v, %v", stored, err)
		}
		if list, _ := f.svc.ListSuspended(bg(), runs.ListSuspendedParams{}); list.Total != 0 {
			t.Fatalf("the decided request is still in the inbox")
		}
		_, err = f.svc.Decline(as("sam", nil, "sre"), runs.DecideParams{RunID: r.ID}, "too late")
		wantCode(t, err, runtype.CodeConflict)
	})
}

// allEventsUntil reads the first n events of a run that is not finished.
func allEventsUntil(t *testing.T, f *fixture, runID string, n int) []runtype.Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(bg(), 20*time.Second)
	defer cancel()
	ch, err := f.svc.Follow(ctx, runID, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []runtype.Event
	for ev := range ch {
		if out = append(out, ev); len(out) == n {
			break
		}
	}
	return out
}

// TestApprovalDecisions: edit-and-approve keeps the edited args (checked against the schema),
// decline keeps the reason, and an expiry ends the request EXPIRED — each with its event, then
// RUN_FINISHED.
func TestApprovalDecisions(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		clock := &testClock{}
		f := externalSetup(t, db, runs.Config{NowFunc: clock.now, ExpiryInterval: 10 * time.Millisecond})
		sre := as("sam", nil, "sre")

		edited := request(t, f, bg(), runs.ApprovalParams{})
		_, err := f.svc.EditAndApprove(sre, runs.DecideParams{RunID: edited.ID}, json.RawMessage(`{"service":"api"}`))
		wantCode(t, err, runtype.CodeBadUserInput) // version is required
		out, err := f.svc.EditAndApprove(sre, runs.DecideParams{RunID: edited.ID}, json.RawMessage(`{"service":"api","version":"1.2.2"}`))
		if err != nil {
			t.Fatal(err)
		}
		if d := out.Decisions[0]; out.Status != runtype.StatusCompleted || string(d.EditedArgs) != `{"service":"api","version":"1.2.2"}` || string(d.Args) != `{"version":"1.2.3","service":"api"}` {
			t.Fatalf("edited: %s, %+v", out.Status, out.Decisions)
		}
		if evs := allEvents(t, f, edited.ID); evs[4].Type != runtype.EventToolCallApproved || string(evs[4].ToolCall.Args) != `{"service":"api","version":"1.2.2"}` {
			t.Fatalf("TOOL_CALL_APPROVED carries the args to run: %+v", evs[4])
		}

		declined := request(t, f, bg(), runs.ApprovalParams{})
		out, err = f.svc.Decline(sre, runs.DecideParams{RunID: declined.ID}, "not on a Friday")
		if err != nil {
			t.Fatal(err)
		}
		if d := out.Decisions[0]; out.Status != runtype.StatusCompleted || d.Kind != runtype.DecisionDeclined || *d.Reason != "not on a Friday" {
			t.Fatalf("declined: %s, %+v", out.Status, out.Decisions)
		}
		if !sameTypes(eventTypes(allEvents(t, f, declined.ID))[4:], runtype.EventToolCallDeclined, runtype.EventRunFinished) {
			t.Fatalf("decline events: %v", eventTypes(allEvents(t, f, declined.ID)))
		}

		expiring := request(t, f, bg(), runs.ApprovalParams{})
		clock.advance(31 * time.Minute)
		f.until(t, expiring.ID, 0, runtype.StatusCompleted)
		evs := allEvents(t, f, expiring.ID)
		if !sameTypes(eventTypes(evs)[4:], runtype.EventToolCallExpired, runtype.EventRunFinished) {
			t.Fatalf("expiry events: %v", eventTypes(evs))
		}
		got, _ := f.svc.Get(bg(), expiring.ID)
		if got.Status != runtype.StatusCompleted || got.Decisions[0].Kind != runtype.DecisionExpired || got.Decisions[0].DecidedBy != nil {
			t.Fatalf("expired: %s, %+v", got.Status, got.Decisions)
		}
	})
}

// TestApprovalWithoutApprovalNeeded: a tool that needs no approval is let through by the policy
// at once: the run is COMPLETED, never in the inbox, with an AUTO_APPROVED decision by nobody.
func TestApprovalWithoutApprovalNeeded(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		f := externalSetup(t, db, runs.Config{})
		r := request(t, f, bg(), runs.ApprovalParams{AgentID: "deploy-bot", ToolName: "status", Args: json.RawMessage(`{}`)})
		if r.Status != runtype.StatusCompleted || len(r.Decisions) != 1 || r.Decisions[0].Kind != runtype.DecisionAutoApproved || r.Decisions[0].DecidedBy != nil {
			t.Fatalf("returned %s, %+v", r.Status, r.Decisions)
		}
		got, err := f.svc.Get(bg(), r.ID)
		if err != nil || got.Status != runtype.StatusCompleted || len(got.Decisions) != 1 || got.Decisions[0].Kind != runtype.DecisionAutoApproved ||
			got.Decisions[0].Reason == nil || f.record(t, r.ID).Snapshot != nil {
			t.Fatalf("stored %+v, %v", got, err)
		}
		if !sameTypes(eventTypes(allEvents(t, f, r.ID)), runtype.EventRunStarted, runtype.EventToolCallRequested, runtype.EventRunFinished) {
			t.Fatalf("events %v", eventTypes(allEvents(t, f, r.ID)))
		}
		if list, _ := f.svc.ListSuspended(bg(), runs.ListSuspendedParams{}); list.Total != 0 {
			t.Fatal("a request approved by the policy entered the inbox")
		}
	})
}

// TestApprovalRequestRefusals: what is wrong with a request is BAD_USER_INPUT (NOT_FOUND for an
// unknown agent), and nothing is stored.
func TestApprovalRequestRefusals(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		f := externalSetup(t, db, runs.Config{})
		for _, tc := range []struct {
			name string
			p    runs.ApprovalParams
			code runtype.Code
			says string
		}{
			{"schema", runs.ApprovalParams{AgentID: "deploy-bot", ToolName: "deploy", Args: json.RawMessage(`{"service":"api"}`)}, runtype.CodeBadUserInput, "inputSchema of deploy"},
			{"extra property", runs.ApprovalParams{AgentID: "deploy-bot", ToolName: "deploy", Args: json.RawMessage(`{"service":"api","version":"1","force":true}`)}, runtype.CodeBadUserInput, "inputSchema"},
			{"not an object", runs.ApprovalParams{AgentID: "hooks", ToolName: "Bash", Args: json.RawMessage(`["ls"]`)}, runtype.CodeBadUserInput, "JSON object"},
			{"not JSON", runs.ApprovalParams{AgentID: "hooks", ToolName: "Bash", Args: json.RawMessage(`{"command":`)}, runtype.CodeBadUserInput, "args"},
			{"duplicate key", runs.ApprovalParams{AgentID: "hooks", ToolName: "Bash", Args: json.RawMessage(`{"a":1,"a":2}`)}, runtype.CodeBadUserInput, "args"},
			{"no args", runs.ApprovalParams{AgentID: "hooks", ToolName: "Bash"}, runtype.CodeBadUserInput, "JSON object"},
			{"internal agent", runs.ApprovalParams{AgentID: "support-agent", ToolName: "issue_refund", Args: json.RawMessage(`{}`)}, runtype.CodeBadUserInput, "startRun"},
			{"unknown agent", runs.ApprovalParams{AgentID: "nobody", ToolName: "x", Args: json.RawMessage(`{}`)}, runtype.CodeNotFound, "no agent"},
			{"unknown tool", runs.ApprovalParams{AgentID: "deploy-bot", ToolName: "rm", Args: json.RawMessage(`{}`)}, runtype.CodeBadUserInput, `no tool "rm"`},
			{"no tool", runs.ApprovalParams{AgentID: "hooks", Args: json.RawMessage(`{}`)}, runtype.CodeBadUserInput, "toolName"},
			{"long context", runs.ApprovalParams{AgentID: "hooks", ToolName: "Bash", Args: json.RawMessage(`{}`), Context: strings.Repeat("x", runs.MaxContextLength+1)}, runtype.CodeBadUserInput, "context"},
			{"long thread", runs.ApprovalParams{AgentID: "hooks", ToolName: "Bash", Args: json.RawMessage(`{}`), ThreadID: strings.Repeat("t", 192)}, runtype.CodeBadUserInput, "threadId"},
		} {
			_, err := f.svc.RequestApproval(bg(), tc.p)
			wantCode(t, err, tc.code)
			if !strings.Contains(err.Error(), tc.says) {
				t.Errorf("%s: %q does not say %q", tc.name, err, tc.says)
			}
		}
		if n := countRuns(t, db); n != 0 {
			t.Fatalf("%d runs stored by refused requests", n)
		}
		// An external agent is not started.
		_, err := f.svc.StartRun(bg(), runs.StartParams{AgentID: "hooks", Prompt: "hello"})
		wantCode(t, err, runtype.CodeBadUserInput)
		// Any tool name of hooks is accepted, without a schema.
		r := request(t, f, bg(), runs.ApprovalParams{AgentID: "hooks", ToolName: "mcp__github__create_pull_request", Args: json.RawMessage(`{"title":"x"}`)})
		if r.Status != runtype.StatusSuspended || r.ToolCalls[0].ToolName != "mcp__github__create_pull_request" {
			t.Fatalf("any tool: %s %+v", r.Status, r.ToolCalls)
		}
	})
}

// TestApprovalRoles: requesting needs the requester role (or operator and above); the
// requester reads only its own requests, lists nothing, decides nothing; approverRoles and
// separation of duties apply to requests as to any run.
func TestApprovalRoles(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		f := externalSetup(t, db, runs.Config{SeparationOfDuties: true})
		bot := as("bot", nil, runtype.RoleRequester)
		other := as("other-bot", nil, runtype.RoleRequester)
		_, err := f.svc.RequestApproval(context.Background(), runs.ApprovalParams{AgentID: "hooks", ToolName: "Bash", Args: json.RawMessage(`{}`)})
		wantCode(t, err, runtype.CodeUnauthenticated)
		for _, ctx := range []context.Context{as("v", nil, runtype.RoleViewer), as("c", nil, "sre")} {
			_, err := f.svc.RequestApproval(ctx, runs.ApprovalParams{AgentID: "hooks", ToolName: "Bash", Args: json.RawMessage(`{}`)})
			wantCode(t, err, runtype.CodeForbidden)
		}
		request(t, f, as("op", nil, runtype.RoleOperator), runs.ApprovalParams{AgentID: "hooks", ToolName: "Bash", Args: json.RawMessage(`{}`)})
		r := request(t, f, bot, runs.ApprovalParams{})

		_, err = f.svc.Get(other, r.ID)
		wantCode(t, err, runtype.CodeNotFound)
		_, err = f.svc.ListSuspended(bot, runs.ListSuspendedParams{})
		wantCode(t, err, runtype.CodeForbidden)
		_, err = f.svc.Approve(bot, runs.DecideParams{RunID: r.ID})
		wantCode(t, err, runtype.CodeForbidden)
		_, err = f.svc.Decline(bot, runs.DecideParams{RunID: r.ID}, "")
		wantCode(t, err, runtype.CodeForbidden)
		_, err = f.svc.Approve(as("alice", nil, runtype.RoleApprover), runs.DecideParams{RunID: r.ID})
		wantCode(t, err, runtype.CodeForbidden) // deploy: approverRoles [sre]
		// Separation of duties: a principal that requested (an operator with sre) may not approve
		// its own request, only decline it.
		mine := request(t, f, as("sam", nil, runtype.RoleOperator, "sre"), runs.ApprovalParams{})
		_, err = f.svc.Approve(as("sam", nil, runtype.RoleOperator, "sre"), runs.DecideParams{RunID: mine.ID})
		wantCode(t, err, runtype.CodeForbidden)
		if _, err := f.svc.Approve(as("sue", nil, "sre"), runs.DecideParams{RunID: mine.ID}); err != nil {
			t.Fatal(err)
		}
		// A scoped requester asks only about its resources, and sees only them.
		scoped := as("tenant-bot", []string{"t1"}, runtype.RoleRequester)
		_, err = f.svc.RequestApproval(scoped, runs.ApprovalParams{AgentID: "hooks", ToolName: "Bash", Args: json.RawMessage(`{}`), ResourceID: "t2"})
		wantCode(t, err, runtype.CodeForbidden)
		_, err = f.svc.RequestApproval(scoped, runs.ApprovalParams{AgentID: "hooks", ToolName: "Bash", Args: json.RawMessage(`{}`)})
		wantCode(t, err, runtype.CodeForbidden)
		t1 := request(t, f, scoped, runs.ApprovalParams{ResourceID: "t1"})
		_, err = f.svc.Get(as("t2-viewer", []string{"t2"}, runtype.RoleViewer), t1.ID)
		wantCode(t, err, runtype.CodeNotFound)
	})
}

// TestApprovalIdempotency: the same key from the same principal returns the same run, decided
// or not, from either of two services over one database; another request under the key is
// BAD_USER_INPUT; another principal's equal key is another key.
func TestApprovalIdempotency(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		a := externalSetup(t, db, runs.Config{})
		b := externalSetup(t, db, runs.Config{})
		bot := as("bot", nil, runtype.RoleRequester)
		p := runs.ApprovalParams{AgentID: "deploy-bot", ToolName: "deploy", Args: deployArgs, IdempotencyKey: "deploy-api-1.2.3", Context: "why"}
		first := request(t, a, bot, p)
		spaced := p
		spaced.Args = json.RawMessage(`{"version":"1.2.3",   "service":"api"}`)
		again := request(t, b, bot, spaced)
		if again.ID != first.ID {
			t.Fatalf("the same key made runs %s and %s", first.ID, again.ID)
		}
		if _, err := b.svc.Approve(as("sam", nil, "sre"), runs.DecideParams{RunID: first.ID}); err != nil {
			t.Fatal(err)
		}
		decided := request(t, a, bot, p)
		if decided.ID != first.ID || decided.Status != runtype.StatusCompleted {
			t.Fatalf("after the decision: %s %s", decided.ID, decided.Status)
		}
		changed := p
		changed.Context = "another reason"
		_, err := a.svc.RequestApproval(bot, changed)
		wantCode(t, err, runtype.CodeBadUserInput)
		if r := request(t, a, as("other", nil, runtype.RoleRequester), p); r.ID == first.ID {
			t.Fatal("another principal's key returned the first principal's run")
		}
		if n := countRuns(t, db); n != 2 {
			t.Fatalf("%d runs, want 2", n)
		}
	})
}

// TestAwaitApproval: AwaitApproval returns at once when asked not to wait or when decided,
// ends with the decision taken on another service over the same database, and when its ctx
// ends; it serves only approval requests.
func TestAwaitApproval(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		a := externalSetup(t, db, runs.Config{PollInterval: 20 * time.Millisecond})
		b := externalSetup(t, db, runs.Config{PollInterval: 20 * time.Millisecond})
		bot := as("bot", nil, runtype.RoleRequester)
		r := request(t, a, bot, runs.ApprovalParams{})
		got, err := a.svc.AwaitApproval(bot, r.ID, 0)
		if err != nil || got.Status != runtype.StatusSuspended {
			t.Fatalf("no wait: %v, %v", got, err)
		}
		got, err = a.svc.AwaitApproval(bot, r.ID, 30*time.Millisecond)
		if err != nil || got.Status != runtype.StatusSuspended {
			t.Fatalf("a wait that passes: %v, %v", got, err)
		}
		done := make(chan *runtype.Run, 1)
		go func() {
			got, err := a.svc.AwaitApproval(bot, r.ID, time.Minute)
			if err != nil {
				t.Error(err)
			}
			done <- got
		}()
		for a.svc.Followers(r.ID) == 0 {
			time.Sleep(time.Millisecond)
		}
		if _, err := b.svc.Decline(as("sam", nil, "sre"), runs.DecideParams{RunID: r.ID}, "no"); err != nil {
			t.Fatal(err)
		}
		select {
		case got := <-done:
			if got == nil || got.Status != runtype.StatusCompleted || got.Decisions[0].Kind != runtype.DecisionDeclined {
				t.Fatalf("woken with %+v", got)
			}
		case <-time.After(20 * time.Second):
			t.Fatal("a decision on another service did not end the wait")
		}
		// A wait ends when its ctx does (the client went away): on a service whose poll of other
		// instances never runs, so that nothing else wakes it.
		quiet := externalSetup(t, db, runs.Config{PollInterval: time.Hour})
		ctx, cancel := context.WithCancel(bot)
		pending := request(t, quiet, bot, runs.ApprovalParams{})
		ended := make(chan error, 1)
		go func() { _, err := quiet.svc.AwaitApproval(ctx, pending.ID, time.Hour); ended <- err }()
		for quiet.svc.Followers(pending.ID) == 0 {
			time.Sleep(time.Millisecond)
		}
		cancel()
		select {
		case err := <-ended:
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("ended with %v", err)
			}
		case <-time.After(20 * time.Second):
			t.Fatal("the wait did not end with its ctx")
		}
		if n := quiet.svc.Followers(pending.ID); n != 0 {
			t.Fatalf("%d subscriptions left after the wait ended", n)
		}
		internal := a.suspended(t, runs.StartParams{Prompt: "refund order 1 for 5"})
		_, err = a.svc.AwaitApproval(bg(), internal.ID, 0)
		wantCode(t, err, runtype.CodeNotFound)
	})
}

// TestARequestStaysARequestWhenItsAgentRunsInInterlock: a request stored while its agent was
// external, decided after the config gave that agent a model and an executor for the tool, is
// ended by the decision as a request: no model is called and Interlock never runs the tool
// (its caller does). The snapshot says it is a request, not the agent's config of the day.
func TestARequestStaysARequestWhenItsAgentRunsInInterlock(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		asked := externalSetup(t, db, runs.Config{})
		r := request(t, asked, bg(), runs.ApprovalParams{})

		var ran atomic.Int64
		deploy := &agent.Tool{Name: "deploy", RequireApproval: true, ApproverRoles: []string{"sre"},
			InputSchema: json.RawMessage(`{"type":"object"}`),
			ExecuteFunc: func(context.Context, *agent.Call) (any, error) { ran.Add(1); return "deployed", nil }}
		now := setupWith(t, db, runs.Config{}, setupOpts{agents: []*agent.Agent{
			{ID: "deploy-bot", Name: "Deploy bot", Model: &llm.Demo{}, Tools: []*agent.Tool{deploy}}}})
		out, err := now.svc.Approve(as("sam", nil, "sre"), runs.DecideParams{RunID: r.ID})
		if err != nil {
			t.Fatal(err)
		}
		evs := allEventsUntil(t, now, r.ID, 6)
		if out.Status != runtype.StatusCompleted || !sameTypes(eventTypes(evs)[4:], runtype.EventToolCallApproved, runtype.EventRunFinished) {
			t.Fatalf("decided: %s, events %v", out.Status, eventTypes(evs))
		}
		if got, _ := now.svc.Get(bg(), r.ID); got.Status != runtype.StatusCompleted || ran.Load() != 0 {
			t.Fatalf("run %s, the tool ran %d times", got.Status, ran.Load())
		}
	})
}

// TestARequesterReadsOnlyItsRequests: a subject that once started runs as an operator and now
// holds only the requester role reads the approval requests it made, not those runs (NOT_FOUND,
// as for any run it may not see).
func TestARequesterReadsOnlyItsRequests(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		f := externalSetup(t, db, runs.Config{})
		started, err := f.svc.StartRun(as("bot", nil, runtype.RoleOperator), runs.StartParams{AgentID: "counter-agent", Prompt: "refund order 1"})
		if err != nil {
			t.Fatal(err)
		}
		bot := as("bot", nil, runtype.RoleRequester)
		asked := request(t, f, bot, runs.ApprovalParams{})
		if r, err := f.svc.Get(bot, asked.ID); err != nil || r.ID != asked.ID {
			t.Fatalf("its request: %v, %v", r, err)
		}
		_, err = f.svc.Get(bot, started.ID)
		wantCode(t, err, runtype.CodeNotFound)
	})
}

// TestADecisionOnARunWhoseAgentIsGoneIsRefused: a request whose agent is no longer in the
// config is not decided — CONFLICT naming the agent, not an internal error — and stays waiting.
func TestADecisionOnARunWhoseAgentIsGoneIsRefused(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		r := request(t, externalSetup(t, db, runs.Config{}), bg(), runs.ApprovalParams{})
		now := setupWith(t, db, runs.Config{}, setupOpts{agents: []*agent.Agent{}})
		_, err := now.svc.Approve(as("sam", nil, runtype.RoleAdmin), runs.DecideParams{RunID: r.ID})
		wantCode(t, err, runtype.CodeConflict)
		if !strings.Contains(err.Error(), `"deploy-bot"`) {
			t.Fatalf("the refusal does not name the agent: %v", err)
		}
		if got, _ := now.svc.Get(bg(), r.ID); got.Status != runtype.StatusSuspended || len(got.Decisions) != 0 {
			t.Fatalf("run %s with %d decisions, want it still waiting", got.Status, len(got.Decisions))
		}
	})
}

// TestARequestCutOffFromTheDatabaseIsStoredOnceOnRetry: an approval request whose database
// connections are cut while it is stored is refused UNAVAILABLE (a retry can help), stores
// nothing half-written, and its retry with the same idempotency key stores it once; a request
// whose database stops answering mid-call and whose caller gives up is stored at most once
// when the caller sends it again (MariaDB through a proxy the test controls).
func TestARequestCutOffFromTheDatabaseIsStoredOnceOnRetry(t *testing.T) {
	t.Parallel()
	direct, proxied, proxy := cutOffPair(t)
	f := setupWith(t, proxied, runs.Config{}, setupOpts{agents: externalAgents()})
	t.Cleanup(proxy.Restore)
	bot := as("bot", nil, runtype.RoleRequester)
	p := runs.ApprovalParams{AgentID: "deploy-bot", ToolName: "deploy", Args: deployArgs, IdempotencyKey: "cut-1"}

	proxy.Cut(true)
	_, err := f.svc.RequestApproval(bot, p)
	wantCode(t, err, runtype.CodeUnavailable)
	if n := countRuns(t, direct); n != 0 {
		t.Fatalf("%d runs stored by a refused request", n)
	}
	proxy.Restore()
	first := request(t, f, bot, p)
	if again := request(t, f, bot, p); again.ID != first.ID {
		t.Fatalf("the retry made run %s, not %s", again.ID, first.ID)
	}

	p.IdempotencyKey = "frozen-1"
	proxy.Freeze()
	ctx, cancel := context.WithTimeout(bot, 500*time.Millisecond)
	_, err = f.svc.RequestApproval(ctx, p)
	cancel()
	if err == nil {
		t.Fatal("a request stored while nothing answered")
	}
	proxy.Restore()
	second := request(t, f, bot, p)
	if again := request(t, f, bot, p); again.ID != second.ID || second.ID == first.ID {
		t.Fatalf("the retries made runs %s and %s", second.ID, again.ID)
	}
	if n := countRuns(t, direct); n != 2 {
		t.Fatalf("%d runs stored for two requests", n)
	}
	if got, _ := f.svc.Get(bg(), second.ID); got.Status != runtype.StatusSuspended || len(got.ToolCalls) != 1 {
		t.Fatalf("the request is %s with %d calls", got.Status, len(got.ToolCalls))
	}
}

// TestABoundRequesterRequestsOnlyForItsAgents: a principal bound to agents (a token's agents,
// a JWT's claims.agents) requests approvals only for them — FORBIDDEN for any other agent,
// known or not, with nothing stored — and one bound to none for no agent; an unbound one for
// any.
func TestABoundRequesterRequestsOnlyForItsAgents(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		f := externalSetup(t, db, runs.Config{})
		bound := func(agents ...string) context.Context {
			agents = append([]string{}, agents...) // none given: bound to no agent, not unbound
			return runtype.WithPrincipal(context.Background(), &runtype.Principal{Subject: "laptop", Roles: []runtype.Role{runtype.RoleRequester}, Agents: agents})
		}
		hooks := runs.ApprovalParams{AgentID: "hooks", ToolName: "Bash", Args: json.RawMessage(`{}`)}
		for name, ctx := range map[string]context.Context{"bound to hooks": bound("hooks"), "bound to none": bound()} {
			for _, p := range []runs.ApprovalParams{
				{AgentID: "deploy-bot", ToolName: "deploy", Args: deployArgs},
				{AgentID: "deploy-bot", ToolName: "status", Args: json.RawMessage(`{}`)}, // the policy would approve it
				{AgentID: "nobody", ToolName: "x", Args: json.RawMessage(`{}`)},
			} {
				_, err := f.svc.RequestApproval(ctx, p)
				wantCode(t, err, runtype.CodeForbidden)
				if !strings.Contains(err.Error(), "laptop may request approvals") {
					t.Errorf("%s asking for %s: %v", name, p.AgentID, err)
				}
			}
		}
		_, err := f.svc.RequestApproval(bound(), hooks)
		wantCode(t, err, runtype.CodeForbidden)
		if n := countRuns(t, db); n != 0 {
			t.Fatalf("refused requests stored %d runs", n)
		}
		if r := request(t, f, bound("hooks", "other"), hooks); r.AgentID != "hooks" {
			t.Fatalf("a request for its agent: %+v", r)
		}
		request(t, f, as("bot", nil, runtype.RoleRequester), runs.ApprovalParams{}) // unbound: any agent
		if n := countRuns(t, db); n != 2 {
			t.Fatalf("%d runs, want 2", n)
		}
	})
}

// TestARequesterFollowsItsRequests: a requester follows the events of the requests it made
// (runEvents), to the decision; another requester's request and an internal run are NOT_FOUND
// to it, as an unknown run; a principal with no role is FORBIDDEN.
func TestARequesterFollowsItsRequests(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		f := externalSetup(t, db, runs.Config{})
		started, err := f.svc.StartRun(as("bot", nil, runtype.RoleOperator), runs.StartParams{AgentID: "counter-agent", Prompt: "refund order 1"})
		if err != nil {
			t.Fatal(err)
		}
		bot := as("bot", nil, runtype.RoleRequester)
		mine := request(t, f, bot, runs.ApprovalParams{})
		theirs := request(t, f, as("other-bot", nil, runtype.RoleRequester), runs.ApprovalParams{})
		for _, id := range []string{theirs.ID, started.ID, "00000000-0000-7000-8000-000000000000"} {
			_, err := f.svc.Follow(bot, id, 0)
			wantCode(t, err, runtype.CodeNotFound)
		}
		_, err = f.svc.Follow(as("nora", nil), mine.ID, 0)
		wantCode(t, err, runtype.CodeForbidden)
		ctx, cancel := context.WithTimeout(bot, 20*time.Second)
		defer cancel()
		evs, err := f.svc.Follow(ctx, mine.ID, 0)
		if err != nil {
			t.Fatal(err)
		}
		var got []runtype.EventType
		for ev := range evs {
			got = append(got, ev.Type)
			if ev.Type == runtype.EventRunSuspended {
				if _, err := f.svc.Decline(as("sue", nil, "sre"), runs.DecideParams{RunID: mine.ID}, "not today"); err != nil {
					t.Fatal(err)
				}
			}
		}
		want := []runtype.EventType{runtype.EventRunStarted, runtype.EventToolCallRequested, runtype.EventToolCallApproval, runtype.EventRunSuspended, runtype.EventToolCallDeclined, runtype.EventRunFinished}
		if !slices.Equal(got, want) {
			t.Fatalf("events %v, want %v", got, want)
		}
	})
}

// TestAbandonEndsOnlyAWaitingRequestOfItsAsker: Abandon ends a waiting request before its
// deadline — EXPIRED by nobody, the reason naming who stopped waiting, when and how, its events
// TOOL_CALL_EXPIRED and RUN_FINISHED, out of the inbox — after which a decision is CONFLICT
// saying why; a request decided first is returned as decided, not ended; another requester's
// request and a run Interlock runs are NOT_FOUND, with nothing changed.
func TestAbandonEndsOnlyAWaitingRequestOfItsAsker(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		f := externalSetup(t, db, runs.Config{})
		bot := as("bot", nil, runtype.RoleRequester)
		r := request(t, f, bot, runs.ApprovalParams{})
		_, _, err := f.svc.Abandon(as("other-bot", nil, runtype.RoleRequester), r.ID, "Codex", "it left")
		wantCode(t, err, runtype.CodeNotFound)
		ended, abandoned, err := f.svc.Abandon(bot, r.ID, "Codex", "its hook's wait of 1s ended before anyone decided")
		if err != nil || !abandoned || ended.Status != runtype.StatusCompleted || len(ended.Decisions) != 1 {
			t.Fatalf("Abandon: %+v, %v, %v", ended, abandoned, err)
		}
		stored, err := f.svc.Get(bg(), r.ID)
		if err != nil || stored.Status != runtype.StatusCompleted || len(stored.Decisions) != 1 {
			t.Fatalf("stored: %+v, %v", stored, err)
		}
		d := stored.Decisions[0]
		if d.Kind != runtype.DecisionExpired || d.DecidedBy != nil || d.Reason == nil || !strings.HasPrefix(*d.Reason, "Codex stopped waiting at ") ||
			!strings.HasSuffix(*d.Reason, ": its hook's wait of 1s ended before anyone decided") || !d.DecidedAt.Before(*r.ToolCalls[0].ExpiresAt) {
			t.Fatalf("decision %+v (reason %v)", d, d.Reason)
		}
		if !sameTypes(eventTypes(allEvents(t, f, r.ID)), runtype.EventRunStarted, runtype.EventToolCallRequested, runtype.EventToolCallApproval, runtype.EventRunSuspended,
			runtype.EventToolCallExpired, runtype.EventRunFinished) {
			t.Fatalf("events: %v", eventTypes(allEvents(t, f, r.ID)))
		}
		if list, _ := f.svc.ListSuspended(bg(), runs.ListSuspendedParams{}); list.Total != 0 {
			t.Fatal("the ended request is still in the inbox")
		}
		_, err = f.svc.Approve(as("sam", nil, "sre"), runs.DecideParams{RunID: r.ID})
		wantCode(t, err, runtype.CodeConflict)
		if !strings.Contains(err.Error(), "Codex stopped waiting at ") {
			t.Fatalf("the late approval's CONFLICT does not say why: %v", err)
		}
		if again, abandoned, err := f.svc.Abandon(bot, r.ID, "Codex", "again"); err != nil || abandoned || len(again.Decisions) != 1 {
			t.Fatalf("Abandon of an ended request: %+v, %v, %v", again, abandoned, err)
		}

		decided := request(t, f, bot, runs.ApprovalParams{})
		if _, err := f.svc.Approve(as("sam", nil, "sre"), runs.DecideParams{RunID: decided.ID}); err != nil {
			t.Fatal(err)
		}
		if got, abandoned, err := f.svc.Abandon(bot, decided.ID, "Codex", "too late"); err != nil || abandoned ||
			len(got.Decisions) != 1 || got.Decisions[0].Kind != runtype.DecisionApproved {
			t.Fatalf("Abandon of an approved request: %+v, %v, %v", got, abandoned, err)
		}

		started, err := f.svc.StartRun(as("bot", nil, runtype.RoleOperator), runs.StartParams{AgentID: "counter-agent", Prompt: "refund order 1"})
		if err != nil {
			t.Fatal(err)
		}
		_, _, err = f.svc.Abandon(bg(), started.ID, "Codex", "it left")
		wantCode(t, err, runtype.CodeNotFound)
	})
}

// TestApprovalKeyWhilePending: with KeyWhilePending the key names its request only while it
// waits — the same request then is that run (on any service over the database), another one
// BAD_USER_INPUT — and once it was decided or abandoned the same key makes a new request, each
// time, never the ended one.
func TestApprovalKeyWhilePending(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		a := externalSetup(t, db, runs.Config{})
		b := externalSetup(t, db, runs.Config{})
		bot := as("bot", nil, runtype.RoleRequester)
		p := runs.ApprovalParams{AgentID: "hooks", ToolName: "Bash", Args: json.RawMessage(`{"command":"make"}`), IdempotencyKey: "hook:digest", KeyWhilePending: true}
		seen := map[string]bool{}
		for i := range 4 {
			r := request(t, a, bot, p)
			if seen[r.ID] || r.Status != runtype.StatusSuspended {
				t.Fatalf("request %d: %s %s, want a new waiting request", i, r.ID, r.Status)
			}
			seen[r.ID] = true
			if again := request(t, b, bot, p); again.ID != r.ID {
				t.Fatalf("request %d again while it waits: %s, want %s", i, again.ID, r.ID)
			}
			other := p
			other.Context = "another request"
			_, err := b.svc.RequestApproval(bot, other)
			wantCode(t, err, runtype.CodeBadUserInput)
			if i%2 == 0 {
				_, err = b.svc.Decline(as("sam", nil, runtype.RoleApprover), runs.DecideParams{RunID: r.ID}, "no")
			} else {
				_, _, err = a.svc.Abandon(bot, r.ID, "Codex", "it left")
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		if n := countRuns(t, db); n != 4 {
			t.Fatalf("%d runs, want 4", n)
		}
	})
}
