package runs_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"gorm.io/gorm"

	"interlock/agent"
	"interlock/gormstore"
	"interlock/internal/dbtest"
	"interlock/llm"
	"interlock/runs"
	"interlock/runtype"
)

// setupChain serves the demo agents and "chief", a supervisor of the demo supervisor: chief →
// supervisor → support-agent, three levels.
func setupChain(t *testing.T, db *gorm.DB) *fixture {
	t.Helper()
	return setupChainWith(t, db, runs.Config{})
}

// setupChainWith is setupChain with the service configured by cfg, its store wrapped by wrap
// when given.
func setupChainWith(t *testing.T, db *gorm.DB, cfg runs.Config, wrap ...func(runs.Store) runs.Store) *fixture {
	t.Helper()
	demo := agent.DemoAgents(&llm.Demo{})
	var supervisor *agent.Agent
	for _, a := range demo {
		if a.ID == "supervisor" {
			supervisor = a
		}
	}
	if supervisor == nil {
		t.Fatal("the demo agents have no supervisor")
	}
	chief := &agent.Agent{ID: "chief", Name: "Chief", Model: &llm.Demo{}, SubAgents: []*agent.Agent{supervisor}}
	reg, err := agent.NewRegistry(append(demo, chief))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	var st runs.Store = gormstore.New(db)
	for _, w := range wrap {
		st = w(st)
	}
	svc, err := runs.New(st, reg, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(svc.Close)
	if err := svc.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	return &fixture{svc: svc, db: db}
}

// chain is a suspended chief run and the runs it delegated to.
type chain struct {
	chief, supervisor, support *runtype.Run
}

// suspendedChain starts chief with prompt and waits until the innermost run's call surfaces on it.
func suspendedChain(t *testing.T, f *fixture, prompt string) chain {
	t.Helper()
	top := f.suspended(t, runs.StartParams{AgentID: "chief", Prompt: prompt, ThreadID: ptr("th"), ResourceID: ptr("res")})
	ctx := bg()
	var c chain
	c.chief = top
	for _, level := range []struct {
		agentID string
		into    **runtype.Run
		parent  string
	}{{"supervisor", &c.supervisor, top.ID}, {"support-agent", &c.support, ""}} {
		res, err := f.svc.ListSuspended(ctx, runs.ListSuspendedParams{AgentID: ptr(level.agentID)})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Runs) != 1 {
			t.Fatalf("suspendedRuns(agentId: %s) = %d runs, want 1", level.agentID, len(res.Runs))
		}
		*level.into = res.Runs[0]
	}
	if p := c.supervisor.ParentRunID; p == nil || *p != top.ID {
		t.Fatalf("supervisor run's parent = %v, want %s", p, top.ID)
	}
	if p := c.support.ParentRunID; p == nil || *p != c.supervisor.ID {
		t.Fatalf("support run's parent = %v, want %s", p, c.supervisor.ID)
	}
	if c.support.ThreadID == nil || *c.support.ThreadID != "th" || c.support.ResourceID == nil || *c.support.ResourceID != "res" {
		t.Fatalf("sub-agent run has thread %v resource %v, want the supervisor's", c.support.ThreadID, c.support.ResourceID)
	}
	// Without agentId only the top-level run is listed.
	res, err := f.svc.ListSuspended(ctx, runs.ListSuspendedParams{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Runs) != 1 || res.Runs[0].ID != top.ID || res.Total != 1 {
		t.Fatalf("suspendedRuns() = %d runs (total %d), want only the chief's %s", len(res.Runs), res.Total, top.ID)
	}
	return c
}

// lateReadStore answers a read of the run named in late only once that run has finished: a
// read that comes after everything the decision started has run.
type lateReadStore struct {
	runs.Store
	late atomic.Pointer[string]
}

func (s *lateReadStore) GetRun(ctx context.Context, id string) (*runtype.Run, error) {
	if late := s.late.Load(); late != nil && *late == id {
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			if r, err := s.Store.GetRun(ctx, id); err != nil || r.Status.Finished() {
				break
			}
		}
	}
	return s.Store.GetRun(ctx, id)
}

// A decision taken on a supervisor's call answers with the supervisor as the decision left it
// (RUNNING to clients, no call waiting), however fast the sub-agents finish after it: the
// answer is not a later read of the run (which could say COMPLETED).
func TestSupervisorDecisionAnswersTheStateItMade(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		late := &lateReadStore{}
		f := setupChainWith(t, db, runs.Config{}, func(st runs.Store) runs.Store { late.Store = st; return late })
		c := suspendedChain(t, f, "refund order 42 for 30")
		late.late.Store(&c.chief.ID)
		after, err := f.svc.Approve(as("alice", nil, runtype.RoleAdmin), runs.DecideParams{RunID: c.chief.ID})
		late.late.Store(nil)
		if err != nil {
			t.Fatal(err)
		}
		if after.Status.Public() != runtype.StatusRunning || len(after.ToolCalls) != 0 || after.SuspendedAt != nil {
			t.Fatalf("approve answered %s with %d calls, want RUNNING with none", after.Status, len(after.ToolCalls))
		}
		if len(after.Decisions) != 1 || after.Decisions[0].ID == 0 || after.Decisions[0].Kind != runtype.DecisionApproved {
			t.Fatalf("approve answered decisions %+v, want the approval with its stored id", after.Decisions)
		}
		if done := f.finished(t, c.chief.ID); done.Status != runtype.StatusCompleted || after.LastSeq >= done.LastSeq {
			t.Fatalf("chief run: %s at seq %d, answered at seq %d", done.Status, done.LastSeq, after.LastSeq)
		}
	})
}

func TestSupervisorSurfacesInnerApprovalTwoLevelsDeep(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		f := setupChain(t, db)
		ctx := bg()
		c := suspendedChain(t, f, "refund order 42 for 30")
		inner := c.support.ToolCalls
		if len(inner) != 1 || inner[0].ToolName != "issue_refund" || !inner[0].RequiresApproval {
			t.Fatalf("support run waits on %+v", inner)
		}
		for _, r := range []*runtype.Run{c.chief, c.supervisor} {
			if len(r.ToolCalls) != 1 {
				t.Fatalf("run %s (%s) shows %d calls, want 1", r.ID, r.AgentID, len(r.ToolCalls))
			}
			tc := r.ToolCalls[0]
			// The supervisor's own call id, with the inner call's tool and args.
			if tc.ToolName != "issue_refund" || !tc.RequiresApproval || string(tc.Args) != string(inner[0].Args) {
				t.Fatalf("run %s (%s) shows %+v, want the inner call %+v", r.ID, r.AgentID, tc, inner[0])
			}
			if r.SuspendedAt == nil {
				t.Fatalf("run %s (%s) has no suspendedAt", r.ID, r.AgentID)
			}
		}
		// Each run shows the inner call under an id of its own, derived from its delegate call
		// and the call below it.
		if got := c.supervisor.ToolCalls[0].ToolCallID; got != "tc_1/"+inner[0].ToolCallID {
			t.Fatalf("supervisor's call id = %q", got)
		}
		if got := c.chief.ToolCalls[0].ToolCallID; got != "tc_1/"+c.supervisor.ToolCalls[0].ToolCallID {
			t.Fatalf("chief's call id = %q", got)
		}

		after, err := f.svc.Approve(as("alice", nil, runtype.RoleAdmin), runs.DecideParams{RunID: c.chief.ID})
		if err != nil {
			t.Fatal(err)
		}
		if after.ID != c.chief.ID || after.Status.Public() != runtype.StatusRunning || len(after.ToolCalls) != 0 {
			t.Fatalf("approve returned %s %s with %d calls", after.ID, after.Status, len(after.ToolCalls))
		}
		// The same decision again: someone else was first.
		_, err = f.svc.Approve(ctx, runs.DecideParams{RunID: c.chief.ID})
		wantCode(t, err, runtype.CodeConflict)

		done := f.finished(t, c.chief.ID)
		if done.Status != runtype.StatusCompleted || done.Output == nil || !strings.Contains(*done.Output, "rf_42") {
			t.Fatalf("chief run: %s, output %v", done.Status, done.Output)
		}
		for _, id := range []string{c.supervisor.ID, c.support.ID} {
			r, err := f.svc.Get(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if r.Status != runtype.StatusCompleted || r.Output == nil || !strings.Contains(*r.Output, "rf_42") {
				t.Fatalf("run %s (%s): %s, output %v", id, r.AgentID, r.Status, r.Output)
			}
			checkGapless(t, f, id, r.LastSeq)
		}
		checkGapless(t, f, c.chief.ID, done.LastSeq)
		// Every level records the decision; the inner run's is the one the tool ran on.
		var rows []gormstore.ToolCall
		db.Where("state = ?", gormstore.ToolCallApproved).Find(&rows)
		if len(rows) != 3 {
			t.Fatalf("approved rows = %d, want one per level", len(rows))
		}
		for _, row := range rows {
			if row.ToolName != "issue_refund" || row.DecidedBy == nil || *row.DecidedBy != "alice" {
				t.Fatalf("decision row %+v", row)
			}
		}
		// Memory is the top-level exchange only.
		var msgs []gormstore.Message
		db.Where("thread_id = ?", "th").Find(&msgs)
		if len(msgs) != 2 || msgs[0].RunID != c.chief.ID {
			t.Fatalf("thread has %d messages, want the chief run's 2", len(msgs))
		}
		res, err := f.svc.ListSuspended(ctx, runs.ListSuspendedParams{})
		if err != nil || res.Total != 0 {
			t.Fatalf("suspended after the chain finished: %v, %v", res, err)
		}
	})
}

func TestSupervisorDeclineReachesTheInnerModel(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		f := setupChain(t, db)
		ctx := bg()
		c := suspendedChain(t, f, "refund order 7 for 5")
		if _, err := f.svc.Decline(as("bob", nil, runtype.RoleAdmin), runs.DecideParams{RunID: c.chief.ID}, "needs a receipt"); err != nil {
			t.Fatal(err)
		}
		done := f.finished(t, c.chief.ID)
		if done.Status != runtype.StatusCompleted {
			t.Fatalf("chief run: %s", done.Status)
		}
		support, err := f.svc.Get(ctx, c.support.ID)
		if err != nil {
			t.Fatal(err)
		}
		// The demo model repeats what each tool answered: the support agent's model was told
		// the reason, and its answer went up through both supervisors.
		for _, r := range []*runtype.Run{support, done} {
			if r.Output == nil || !strings.Contains(*r.Output, "issue_refund (call_1): needs a receipt") || strings.Contains(*r.Output, "rf_7") {
				t.Fatalf("run %s (%s) output %v, want the decline's reason", r.ID, r.AgentID, r.Output)
			}
		}
		if len(support.Decisions) != 1 || support.Decisions[0].Kind != runtype.DecisionDeclined || support.Decisions[0].Reason == nil || *support.Decisions[0].Reason != "needs a receipt" {
			t.Fatalf("support decisions = %+v", support.Decisions)
		}
	})
}

func TestSupervisorResumesInnerSuspension(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		f := setupChain(t, db)
		ctx := bg()
		c := suspendedChain(t, f, "ask the customer for their size")
		tc := c.chief.ToolCalls[0]
		if tc.ToolName != "ask_customer" || tc.RequiresApproval || len(tc.SuspendPayload) == 0 {
			t.Fatalf("chief shows %+v, want ask_customer's suspension", tc)
		}
		// resumeData is checked against the inner tool's resumeSchema; the chain stays suspended.
		_, err := f.svc.Resume(ctx, runs.DecideParams{RunID: c.chief.ID}, json.RawMessage(`{"answer":""}`))
		wantCode(t, err, runtype.CodeBadUserInput)
		_, err = f.svc.Approve(ctx, runs.DecideParams{RunID: c.chief.ID})
		wantCode(t, err, runtype.CodeBadUserInput)
		// The middle run can be decided too: the decision is the innermost run's.
		if _, err := f.svc.Resume(ctx, runs.DecideParams{RunID: c.supervisor.ID}, json.RawMessage(`{"answer":"M"}`)); err != nil {
			t.Fatal(err)
		}
		done := f.finished(t, c.chief.ID)
		if done.Status != runtype.StatusCompleted || done.Output == nil || !strings.Contains(*done.Output, `\"answer\":\"M\"`) && !strings.Contains(*done.Output, `"answer":"M"`) {
			t.Fatalf("chief run: %s output %v", done.Status, done.Output)
		}
	})
}

// brokenModel fails every call, as a provider that is down.
type brokenModel struct{}

func (brokenModel) Name() string { return "broken/v1" }
func (brokenModel) Stream(ctx context.Context, req llm.Request, onText func(string) error) (llm.Response, error) {
	return llm.Response{}, errors.New("provider is down")
}

func TestSupervisorGetsTheFailureOfItsSubAgent(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		broken := &agent.Agent{ID: "broken.agent", Model: brokenModel{}}
		boss := &agent.Agent{ID: "boss", Model: &llm.Demo{}, SubAgents: []*agent.Agent{broken}}
		f := setupWith(t, db, runs.Config{}, setupOpts{agents: []*agent.Agent{broken, boss}})
		r := f.start(t, runs.StartParams{AgentID: "boss", Prompt: "do something"})
		done := f.finished(t, r.ID)
		// The tool is named for the id with what tool names cannot hold replaced.
		want := "delegate_to_broken_agent (call_1): Error: sub-agent broken.agent failed: the model call failed (broken/v1)"
		if done.Status != runtype.StatusCompleted || done.Output == nil || !strings.Contains(*done.Output, want) {
			t.Fatalf("boss run: %s %v, want the sub-agent's failure %q", done.Status, done.Output, want)
		}
	})
}

// TestSupervisorChainSurvivesTheLossOfAnInstance: instance a dies while the sub-agent's tool
// executes; b recovers the sub-agent's run, which suspends on the interrupted call; that
// surfaces on the supervisor, and approving the supervisor on b finishes both runs there.
func TestSupervisorChainSurvivesTheLossOfAnInstance(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		var calls atomic.Int64
		started := make(chan struct{}, 1)
		worker := &agent.Agent{ID: "worker", Model: &llm.Demo{}, Tools: []*agent.Tool{{
			Name: "slow_task", InputSchema: json.RawMessage(`{"type":"object"}`),
			ExecuteFunc: func(ctx context.Context, c *agent.Call) (any, error) {
				if calls.Add(1) == 1 {
					started <- struct{}{}
					<-ctx.Done() // the first execution never ends: its instance dies
					return nil, ctx.Err()
				}
				return map[string]any{"slept": true}, nil
			},
		}}}
		lead := &agent.Agent{ID: "lead", Model: &llm.Demo{}, SubAgents: []*agent.Agent{worker}}
		cfg := runs.Config{LeaseTTL: time.Second, RecoveryInterval: time.Hour}
		cfg.InstanceID = "a"
		a := setupWith(t, db, cfg, setupOpts{agents: []*agent.Agent{worker, lead}})
		cfg.InstanceID = "b"
		b := setupWith(t, db, cfg, setupOpts{agents: []*agent.Agent{worker, lead}})

		r := a.start(t, runs.StartParams{AgentID: "lead", Prompt: "a slow job"})
		<-started
		a.svc.Close() // the instance dies with the tool executing
		ctx := bg()
		deadline := time.Now().Add(30 * time.Second)
		for {
			n, err := b.svc.RecoverExpired(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if n > 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("no run was recovered within 30s")
			}
			time.Sleep(20 * time.Millisecond)
		}
		b.until(t, r.ID, 0, runtype.StatusSuspended)
		top, err := b.svc.ListSuspended(ctx, runs.ListSuspendedParams{})
		if err != nil {
			t.Fatal(err)
		}
		if len(top.Runs) != 1 || top.Runs[0].ID != r.ID || len(top.Runs[0].ToolCalls) != 1 {
			t.Fatalf("suspendedRuns() = %+v, want the lead's run", top.Runs)
		}
		tc := top.Runs[0].ToolCalls[0]
		if tc.ToolName != "slow_task" || !tc.Interrupted || !tc.RequiresApproval {
			t.Fatalf("lead's run shows %+v, want the interrupted slow_task", tc)
		}
		if _, err := b.svc.Approve(ctx, runs.DecideParams{RunID: r.ID}); err != nil {
			t.Fatal(err)
		}
		done := b.finished(t, r.ID)
		if done.Status != runtype.StatusCompleted || done.Output == nil || !strings.Contains(*done.Output, `"slept":true`) || calls.Load() != 2 {
			t.Fatalf("lead run: %s %v after %d executions", done.Status, done.Output, calls.Load())
		}
	})
}
