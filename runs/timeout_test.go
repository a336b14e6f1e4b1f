package runs_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
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
	"interlock/tools"
)

// TestTimedOutCallIsNeverSentAgain: a call whose request reached its tool — an HTTP endpoint, a
// stdio MCP server — and got no answer within the tool's timeout may have taken effect. When the
// call needed approval it is neither sent again nor reported to the model as a failure: the run
// is SUSPENDED on it, marked interrupted, with a reason that says it timed out after it was
// sent, and the tool ran once. A call of the same tool that nobody gates is answered to the model
// as a timeout, as before, and the run goes on; that tool too ran once.
//
// Not parallel: its tools time out after 300 ms and 500 ms, within which the request must have
// reached them; the load of other tests must not decide that.
func TestTimedOutCallIsNeverSentAgain(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		t.Run("http", func(t *testing.T) {
			var calls atomic.Int64
			release := make(chan struct{})
			s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				calls.Add(1) // the refund is made; the answer comes too late
				select {
				case <-release:
				case <-r.Context().Done():
				}
			}))
			t.Cleanup(s.Close)
			t.Cleanup(func() { close(release) }) // before Close, which waits for the handler
			exec := tools.HTTPExecute(tools.HTTPConfig{URL: s.URL, Timeout: 300 * time.Millisecond})
			checkTimedOutCall(t, db, exec, func() int { return int(calls.Load()) },
				"the endpoint of write_file did not answer within 300ms after the request was sent, so whether it took effect is unknown",
				"the tool's endpoint did not answer within 300ms")
		})
		t.Run("mcp-stdio", func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "calls")
			srv, err := tools.ConnectMCP(context.Background(), tools.MCPConfig{Name: "files", Command: []string{os.Args[0]}, Timeout: 500 * time.Millisecond,
				Env: map[string]string{"INTERLOCK_TEST_MCP_RUNS": "1", "INTERLOCK_TEST_MCP_CALLS": file}}, "test")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { srv.Close() })
			count := func() int { b, _ := os.ReadFile(file); return len(strings.Fields(string(b))) }
			checkTimedOutCall(t, db, srv.Execute("slow_write"), count,
				"the MCP server files did not answer slow_write within 500ms after the call was sent, so whether it took effect is unknown",
				"the MCP tool did not answer within 500ms")
		})
	})
}

// checkTimedOutCall runs a gated and then an ungated call of exec, which times out after its
// request was sent, and checks what became of each; calls counts the requests the tool got.
func checkTimedOutCall(t *testing.T, db *gorm.DB, exec func(context.Context, *agent.Call) (any, error), calls func() int, reason, modelError string) {
	t.Helper()
	callTool := func(context.Context, llm.Request, func(string) error) (llm.Response, error) {
		return llm.Response{ToolCalls: []llm.ToolCall{{ID: "call_1", Name: "write_file", Args: json.RawMessage(`{"path":"a.txt"}`)}}}, nil
	}
	gatedModel := &scripted{steps: []step{callTool, answer("done")}}
	freeModel := &scripted{steps: []step{callTool, answer("done")}}
	tool := func(gated bool) []*agent.Tool {
		return []*agent.Tool{{Name: "write_file", RequireApproval: gated, InputSchema: json.RawMessage(`{"type":"object"}`), ExecuteFunc: exec}}
	}
	f := setupWith(t, db, runs.Config{}, setupOpts{agents: []*agent.Agent{
		{ID: "gated", Model: gatedModel, Tools: tool(true)},
		{ID: "free", Model: freeModel, Tools: tool(false)},
	}})

	r := f.suspended(t, runs.StartParams{AgentID: "gated", Prompt: "write a.txt"})
	if _, err := f.svc.Approve(bg(), runs.DecideParams{RunID: r.ID}); err != nil {
		t.Fatal(err)
	}
	evs := f.until(t, r.ID, r.LastSeq, runtype.StatusSuspended, runtype.StatusCompleted, runtype.StatusFailed)
	got, err := f.svc.Get(bg(), r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != runtype.StatusSuspended || len(got.ToolCalls) != 1 || !got.ToolCalls[0].Interrupted || !got.ToolCalls[0].RequiresApproval {
		t.Fatalf("after the approved call timed out: run %s, calls %+v; events %s", got.Status, got.ToolCalls, typesOf(evs))
	}
	interrupted := ofType(evs, runtype.EventToolCallInterrupted)
	if len(interrupted) != 1 || !strings.HasPrefix(interrupted[0].Reason, reason) || len(ofType(evs, runtype.EventToolResult)) != 0 {
		t.Fatalf("events %s; interrupted %+v; want the reason to start %q", typesOf(evs), interrupted, reason)
	}
	for _, req := range gatedModel.requests() {
		for _, m := range req.Messages {
			if m.Role == llm.RoleTool {
				t.Fatalf("the model was told %q of a call whose outcome is unknown", m.Content)
			}
		}
	}
	if n := calls(); n != 1 {
		t.Fatalf("the approved call reached the tool %d times, want once", n)
	}

	free := f.start(t, runs.StartParams{AgentID: "free", Prompt: "write a.txt"})
	if done := f.finished(t, free.ID); done.Status != runtype.StatusCompleted {
		t.Fatalf("the ungated run ended %s (%v)", done.Status, done.Error)
	}
	reqs := freeModel.requests()
	if len(reqs) != 2 {
		t.Fatalf("the model was called %d times, want twice", len(reqs))
	}
	last := reqs[1].Messages[len(reqs[1].Messages)-1]
	if last.Role != llm.RoleTool || last.Content != "Error: "+modelError {
		t.Fatalf("the model was told %s %q, want the tool error %q", last.Role, last.Content, modelError)
	}
	if n := calls(); n != 2 {
		t.Fatalf("the tool got %d requests in all, want 2 (one per run)", n)
	}
}
