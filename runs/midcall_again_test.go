package runs_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"gorm.io/gorm"

	"interlock/agent"
	"interlock/internal/dbtest"
	"interlock/llm"
	"interlock/runs"
	"interlock/runtype"
	"interlock/tools"
)

// TestMidCallQuestionAskedTwiceGetsTheSameAnswerTwice: a tool asks two questions in the middle
// of one call (one toolCallId), and the same person answers both with the same data, naming the
// call as the console does. The second answer is a new decision, not a retry of the first: the
// tool gets both answers and the run finishes (it had been swallowed as a repeat, leaving the
// second question waiting with "Decision sent" shown).
func TestMidCallQuestionAskedTwiceGetsTheSameAnswerTwice(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		u := &askingUpstream{}
		s := mcp.NewServer(&mcp.Implementation{Name: "orders", Version: "1"}, nil)
		s.AddTool(&mcp.Tool{Name: "refund_ask", InputSchema: json.RawMessage(`{"type":"object"}`)},
			func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				var schema any
				if err := json.Unmarshal([]byte(whySchema), &schema); err != nil {
					return nil, err
				}
				for i := range 2 {
					res, err := req.Session.Elicit(ctx, &mcp.ElicitParams{Message: fmt.Sprintf("question %d", i+1), RequestedSchema: schema})
					if err != nil {
						u.add("error: " + err.Error())
						return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "no answer"}}}, nil
					}
					u.add(fmt.Sprintf("%s:%v", res.Action, res.Content["reason"]))
				}
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "refunded"}}}, nil
			})
		hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
		t.Cleanup(hs.Close)
		srv, err := tools.ConnectMCP(context.Background(), tools.MCPConfig{Name: "orders", URL: hs.URL, Timeout: 10 * time.Second}, "test")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { srv.Close() })
		m := &scripted{steps: []step{
			func(context.Context, llm.Request, func(string) error) (llm.Response, error) {
				return llm.Response{ToolCalls: []llm.ToolCall{{ID: "call_1", Name: "refund_ask", Args: json.RawMessage(`{"order":7}`)}}}, nil
			},
			answer("done"),
		}}
		a := &agent.Agent{ID: "asking-agent", Model: m, Tools: []*agent.Tool{{Name: "refund_ask", InputSchema: json.RawMessage(`{"type":"object"}`), ExecuteFunc: srv.Execute("refund_ask")}}}
		f := setupWith(t, db, runs.Config{}, setupOpts{agents: []*agent.Agent{a}})
		r := f.suspended(t, runs.StartParams{AgentID: "asking-agent", Prompt: "refund order 7"})
		call := r.ToolCalls[0].ToolCallID
		alice := as("alice", nil, runtype.RoleApprover)
		if _, err := f.svc.Resume(alice, runs.DecideParams{RunID: r.ID, ToolCallID: &call}, json.RawMessage(`{"reason":"yes please"}`)); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the second question", func() bool {
			got, err := f.svc.Get(bg(), r.ID)
			return err == nil && got.Status == runtype.StatusSuspended && len(u.got()) == 1
		})
		if _, err := f.svc.Resume(alice, runs.DecideParams{RunID: r.ID, ToolCallID: &call}, json.RawMessage(`{"reason":"yes please"}`)); err != nil {
			t.Fatalf("the same answer to the second question: %v", err)
		}
		waitFor(t, "the run to finish", func() bool {
			got, err := f.svc.Get(bg(), r.ID)
			return err == nil && got.Status == runtype.StatusCompleted
		})
		if want := []string{"accept:yes please", "accept:yes please"}; !slices.Equal(u.got(), want) {
			t.Errorf("the tool's server was answered %q, want %q", u.got(), want)
		}
	})
}
