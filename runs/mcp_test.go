package runs_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
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

type writeIn struct {
	Path string `json:"path"`
}

// TestMain lets the test binary be a stdio MCP server whose write_file counts its calls as lines
// of the file INTERLOCK_TEST_MCP_CALLS and dies in the middle of the first one, and whose
// slow_write counts its calls the same way and then answers only once cancelled (or after a
// minute): a call that takes effect and outlasts its timeout.
func TestMain(m *testing.M) {
	if os.Getenv("INTERLOCK_TEST_MCP_RUNS") == "1" {
		s := mcp.NewServer(&mcp.Implementation{Name: "files", Version: "1"}, nil)
		mcp.AddTool(s, &mcp.Tool{Name: "write_file"}, func(context.Context, *mcp.CallToolRequest, writeIn) (*mcp.CallToolResult, any, error) {
			path := os.Getenv("INTERLOCK_TEST_MCP_CALLS")
			before, _ := os.ReadFile(path)
			f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
			if err == nil {
				fmt.Fprintln(f, os.Getpid())
				f.Close()
			}
			if len(before) == 0 {
				os.Exit(3) // the file is written; the answer never comes
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "written"}}}, nil, nil
		})
		mcp.AddTool(s, &mcp.Tool{Name: "slow_write"}, func(ctx context.Context, _ *mcp.CallToolRequest, _ writeIn) (*mcp.CallToolResult, any, error) {
			f, err := os.OpenFile(os.Getenv("INTERLOCK_TEST_MCP_CALLS"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
			if err == nil {
				fmt.Fprintln(f, os.Getpid())
				f.Close()
			}
			select {
			case <-ctx.Done():
			case <-time.After(time.Minute):
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "written, late"}}}, nil, nil
		})
		if err := s.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
			os.Exit(1)
		}
		os.Exit(0)
	}
	waitingTestsInParallel()
	os.Exit(m.Run())
}

// TestMCPServerDyingMidCallSuspendsTheRun: an approved MCP call whose server dies (stdio) or
// whose connection is cut (url) after it was sent is not sent again and not reported to the
// model as failed: the run is SUSPENDED with the call awaiting a new approval, marked
// interrupted, and the reason says what is known. Approved again, it runs once more, on a new
// session, and the run completes.
func TestMCPServerDyingMidCallSuspendsTheRun(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		t.Run("stdio", func(t *testing.T) {
			calls := filepath.Join(t.TempDir(), "calls")
			count := func() int { b, _ := os.ReadFile(calls); return len(strings.Fields(string(b))) }
			checkInterruptedMCPCall(t, db, tools.MCPConfig{Name: "files", Command: []string{os.Args[0]},
				Env: map[string]string{"INTERLOCK_TEST_MCP_RUNS": "1", "INTERLOCK_TEST_MCP_CALLS": calls}}, count,
				"the MCP server files stopped while executing write_file, so whether it took effect is unknown; approve to run it again or decline")
		})
		t.Run("url", func(t *testing.T) {
			var calls atomic.Int64
			var hs *httptest.Server
			s := mcp.NewServer(&mcp.Implementation{Name: "files", Version: "1"}, nil)
			mcp.AddTool(s, &mcp.Tool{Name: "write_file"}, func(context.Context, *mcp.CallToolRequest, writeIn) (*mcp.CallToolResult, any, error) {
				if calls.Add(1) == 1 {
					hs.CloseClientConnections() // the file is written; the answer never comes
				}
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "written"}}}, nil, nil
			})
			hs = httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
			t.Cleanup(hs.Close)
			checkInterruptedMCPCall(t, db, tools.MCPConfig{Name: "files", URL: hs.URL}, func() int { return int(calls.Load()) },
				"the connection to the MCP server files broke while executing write_file, so whether it took effect is unknown; approve to run it again or decline")
		})
	})
}

func checkInterruptedMCPCall(t *testing.T, db *gorm.DB, cfg tools.MCPConfig, calls func() int, want string) {
	t.Helper()
	srv, err := tools.ConnectMCP(context.Background(), cfg, "test")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	m := &scripted{steps: []step{
		func(context.Context, llm.Request, func(string) error) (llm.Response, error) {
			return llm.Response{ToolCalls: []llm.ToolCall{{ID: "call_1", Name: "write_file", Args: json.RawMessage(`{"path":"a.txt"}`)}}}, nil
		},
		answer("done"),
	}}
	a := &agent.Agent{ID: "writer", Model: m, Tools: []*agent.Tool{{
		Name: "write_file", RequireApproval: true, InputSchema: json.RawMessage(`{"type":"object"}`), ExecuteFunc: srv.Execute("write_file"),
	}}}
	f := setupWith(t, db, runs.Config{}, setupOpts{agents: []*agent.Agent{a}})
	r := f.suspended(t, runs.StartParams{AgentID: "writer", Prompt: "write a.txt"})
	if _, err := f.svc.Approve(bg(), runs.DecideParams{RunID: r.ID}); err != nil {
		t.Fatal(err)
	}
	evs := f.until(t, r.ID, r.LastSeq, runtype.StatusSuspended, runtype.StatusCompleted, runtype.StatusFailed)
	got, err := f.svc.Get(bg(), r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != runtype.StatusSuspended || len(got.ToolCalls) != 1 || !got.ToolCalls[0].Interrupted || !got.ToolCalls[0].RequiresApproval {
		t.Fatalf("after the call was cut off: run %s, calls %+v; events %s", got.Status, got.ToolCalls, typesOf(evs))
	}
	interrupted := ofType(evs, runtype.EventToolCallInterrupted)
	if len(interrupted) != 1 || interrupted[0].Reason != want || len(ofType(evs, runtype.EventToolResult)) != 0 {
		t.Fatalf("events %s; interrupted %+v", typesOf(evs), interrupted)
	}
	if n := calls(); n != 1 {
		t.Fatalf("the call reached a server %d times, want once", n)
	}
	for _, req := range m.requests() {
		for _, msg := range req.Messages {
			if msg.Role == llm.RoleTool {
				t.Fatalf("the model was told %q", msg.Content)
			}
		}
	}

	if _, err := f.svc.Approve(bg(), runs.DecideParams{RunID: r.ID}); err != nil {
		t.Fatal(err)
	}
	if done := f.finished(t, r.ID); done.Status != runtype.StatusCompleted || calls() != 2 {
		t.Fatalf("approved again: run %s, %d calls", done.Status, calls())
	}
}
