package runs_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"gorm.io/gorm"

	"interlock/agent"
	"interlock/internal/dbtest"
	"interlock/llm"
	"interlock/runs"
	"interlock/runtype"
)

// TestInvalidArgumentsNeverReachAPerson: arguments that do not match the tool's input schema
// go back to the model as a tool error before any approval is asked.
func TestInvalidArgumentsNeverReachAPerson(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		var executed atomic.Int64
		m := &scripted{steps: []step{
			func(ctx context.Context, req llm.Request, onText func(string) error) (llm.Response, error) {
				return llm.Response{ToolCalls: []llm.ToolCall{{ID: "call_1", Name: "refund", Args: json.RawMessage(`{"orderId":"4"}`)}}}, nil
			},
			answer("I need the amount."),
		}}
		a := &agent.Agent{ID: "refunder", Model: m, Tools: []*agent.Tool{{
			Name: "refund", RequireApproval: true,
			InputSchema: json.RawMessage(`{"type":"object","properties":{"orderId":{"type":"string"},"amount":{"type":"number"}},"required":["orderId","amount"]}`),
			ExecuteFunc: func(context.Context, *agent.Call) (any, error) { executed.Add(1); return "refunded", nil },
		}}}
		f := setupWith(t, db, runs.Config{}, setupOpts{agents: []*agent.Agent{a}})
		r := f.start(t, runs.StartParams{AgentID: "refunder", Prompt: "refund order 4"})
		done := f.finished(t, r.ID)
		if done.Status != runtype.StatusCompleted {
			t.Fatalf("run is %s, want COMPLETED without waiting for a person", done.Status)
		}
		evs := allEvents(t, f, r.ID)
		if n := len(ofType(evs, runtype.EventRunSuspended)); n != 0 || executed.Load() != 0 {
			t.Fatalf("%d suspensions, %d executions; want none", n, executed.Load())
		}
		calls := ofType(evs, runtype.EventToolCallRequested)
		if len(calls) != 1 || calls[0].ToolCall.RequiresApproval {
			t.Fatalf("TOOL_CALL events %+v: the call must not be shown as waiting for approval", calls)
		}
		results := ofType(evs, runtype.EventToolResult)
		if len(results) != 1 || !strings.Contains(results[0].Error, "missing property 'amount'") {
			t.Fatalf("TOOL_RESULT events %+v", results)
		}
		reqs := m.requests()
		last := reqs[len(reqs)-1].Messages
		if tm := last[len(last)-1]; tm.Role != llm.RoleTool || !strings.Contains(tm.Content, "invalid arguments: at /: missing property 'amount'") {
			t.Fatalf("the model was told %+v", tm)
		}
	})
}

// TestEditedArgumentsAreToldToTheModel: the tool runs with a person's edited arguments and the
// model learns they changed.
func TestEditedArgumentsAreToldToTheModel(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		var mu sync.Mutex
		var ran []string
		m := &scripted{steps: []step{
			func(ctx context.Context, req llm.Request, onText func(string) error) (llm.Response, error) {
				return llm.Response{ToolCalls: []llm.ToolCall{{ID: "call_1", Name: "refund", Args: json.RawMessage(`{"amount":15}`)}}}, nil
			},
			answer("Refunded."),
		}}
		a := &agent.Agent{ID: "refunder", Model: m, Tools: []*agent.Tool{{
			Name: "refund", RequireApproval: true,
			InputSchema: json.RawMessage(`{"type":"object","properties":{"amount":{"type":"number","maximum":20}}}`),
			ExecuteFunc: func(_ context.Context, c *agent.Call) (any, error) {
				mu.Lock()
				defer mu.Unlock()
				ran = append(ran, string(c.Args))
				return "ok", nil
			},
		}}}
		f := setupWith(t, db, runs.Config{}, setupOpts{agents: []*agent.Agent{a}})
		r := f.start(t, runs.StartParams{AgentID: "refunder", Prompt: "refund"})
		f.until(t, r.ID, 0, runtype.StatusSuspended)
		_, err := f.svc.EditAndApprove(bg(), runs.DecideParams{RunID: r.ID}, json.RawMessage(`{"amount":25}`))
		wantCode(t, err, runtype.CodeBadUserInput)
		if _, err := f.svc.EditAndApprove(bg(), runs.DecideParams{RunID: r.ID}, json.RawMessage(`{"amount":12}`)); err != nil {
			t.Fatal(err)
		}
		if done := f.finished(t, r.ID); done.Status != runtype.StatusCompleted {
			t.Fatalf("run %s", done.Status)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(ran) != 1 || ran[0] != `{"amount":12}` {
			t.Fatalf("the tool ran with %v", ran)
		}
		reqs := m.requests()
		msgs := reqs[len(reqs)-1].Messages
		if tm := msgs[len(msgs)-1]; !strings.HasPrefix(tm.Content, `A person changed the arguments of this call before approving it; the tool ran with {"amount":12} instead of {"amount":15}.`) || !strings.HasSuffix(tm.Content, "\nok") {
			t.Fatalf("the model was told %q", tm.Content)
		}
	})
}
