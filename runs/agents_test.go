package runs_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"

	"gorm.io/gorm"

	"interlock/agent"
	"interlock/dbtest"
	"interlock/events"
	"interlock/llm"
	"interlock/runs"
)

// TestInvalidArgumentsNeverReachAPerson: arguments that do not match the tool's input schema
// go back to the model as a tool error before any approval is asked.
func TestInvalidArgumentsNeverReachAPerson(t *testing.T) {
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
		if done.Status != runs.StatusCompleted {
			t.Fatalf("run is %s, want COMPLETED without waiting for a person", done.Status)
		}
		evs := allEvents(t, f, r.ID)
		if n := len(ofType(evs, events.RunSuspended)); n != 0 || executed.Load() != 0 {
			t.Fatalf("%d suspensions, %d executions; want none", n, executed.Load())
		}
		calls := ofType(evs, events.ToolCallRequested)
		if len(calls) != 1 || calls[0].ToolCall.RequiresApproval {
			t.Fatalf("TOOL_CALL events %+v: the call must not be shown as waiting for approval", calls)
		}
		results := ofType(evs, events.ToolResult)
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
