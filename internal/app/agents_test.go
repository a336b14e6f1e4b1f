package app_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"interlock/internal/app"
	"interlock/internal/apptest"
)

// configServer starts a server on its own config file: a billing agent on the fake model with
// an HTTP refund tool that needs approval.
func configServer(t *testing.T, db string) (*apptest.Server, *apptest.RefundEndpoint) {
	t.Helper()
	model, refunds := apptest.FakeModel(t, "refund"), apptest.NewRefundEndpoint(t)
	file := apptest.WriteConfig(t, `
agents:
  - id: billing
    name: Billing assistant
    instructions: You are a careful billing assistant.
    model: {provider: openai, baseURL: `+model.URL+`/v1, name: test-model}
    tools: [refund]
tools:
  - name: refund
    description: Refund an order
    inputSchema: {type: object, properties: {orderId: {type: string}, amount: {type: number}}, required: [orderId, amount]}
    requireApproval: true
    http: {url: `+refunds.URL+`/refund, timeout: 5s, headers: {Authorization: "Bearer ${INTERLOCK_TEST_REFUND_TOKEN}"}}
`)
	return apptest.Start(t, db, "--config", file), refunds
}

// TestConfiguredAgentEndToEnd: an agent from a config file, on an OpenAI-compatible model,
// calls an HTTP tool that needs approval: approving POSTs exactly once with the run's context,
// declining never does and the model gets the reason.
func TestConfiguredAgentEndToEnd(t *testing.T) {
	t.Parallel()
	s, refunds := configServer(t, "sqlite:"+filepath.Join(t.TempDir(), "interlock.db"))
	var agents struct {
		Agents []struct {
			ID, Model string
			Tools     []struct{ Name string }
		}
	}
	s.Must(t, `{ agents { id model tools { name } } }`, nil, &agents)
	if len(agents.Agents) != 1 || agents.Agents[0].ID != "billing" || agents.Agents[0].Model != "openai/test-model" {
		t.Fatalf("agents %+v", agents)
	}

	start := func(thread string) apptest.Run {
		var out struct{ StartRun apptest.Run }
		s.Must(t, `mutation($input: StartRunInput!) { startRun(input: $input) { `+apptest.RunFields+` } }`,
			map[string]any{"input": map[string]any{"agentId": "billing", "prompt": "refund order 7", "threadId": thread, "resourceId": "cust-9"}}, &out)
		return out.StartRun
	}
	ws := apptest.DialWS(t, s.URL, "graphql-transport-ws")

	// Approve: one POST, with the run's context and the expanded header.
	run := start("th-approve")
	op := ws.Subscribe(apptest.EventsQuery, map[string]any{"runId": run.RunID, "after": 0})
	evs := apptest.Follow(t, ws, op, apptest.IsType("RUN_SUSPENDED"))
	if calls, _ := refunds.Got(); len(calls) != 0 {
		t.Fatalf("the tool ran before approval: %v", calls)
	}
	s.Must(t, `mutation($id: ID!) { approveToolCall(runId: $id) { status } }`, map[string]any{"id": run.RunID}, &struct{}{})
	evs = apptest.Follow(t, ws, op, nil)
	if last := evs[len(evs)-1]; last.Type != "RUN_FINISHED" || *last.Status != "COMPLETED" {
		t.Fatalf("last event %+v", last)
	}
	calls, auth := refunds.Got()
	if len(calls) != 1 {
		t.Fatalf("%d POSTs for one approved call", len(calls))
	}
	c := calls[0]
	args, _ := json.Marshal(c["args"])
	if string(args) != `{"amount":5,"orderId":"7"}` || c["runId"] != run.RunID || c["agentId"] != "billing" ||
		c["threadId"] != "th-approve" || c["resourceId"] != "cust-9" || c["toolCallId"] != "tc_1" || auth[0] != "Bearer s3cret" {
		t.Fatalf("POST body %v, Authorization %q", c, auth[0])
	}
	if done := s.Run(t, run.RunID); done.Output == nil || !strings.Contains(*done.Output, "rf_7") {
		t.Fatalf("output %v", done.Output)
	}

	// Decline: no POST, no TOOL_RESULT, and the model is answered with the reason.
	run = start("th-decline")
	op = ws.Subscribe(apptest.EventsQuery, map[string]any{"runId": run.RunID, "after": 0})
	apptest.Follow(t, ws, op, apptest.IsType("RUN_SUSPENDED"))
	s.Must(t, `mutation($id: ID!) { declineToolCall(runId: $id, reason: "not without a receipt") { status } }`, map[string]any{"id": run.RunID}, &struct{}{})
	evs = apptest.Follow(t, ws, op, nil)
	for _, e := range evs {
		if e.Type == "TOOL_RESULT" {
			t.Fatalf("a declined call has a TOOL_RESULT: %+v", e)
		}
	}
	if calls, _ := refunds.Got(); len(calls) != 1 {
		t.Fatalf("%d POSTs after a decline, want still 1", len(calls))
	}
	if done := s.Run(t, run.RunID); done.Status != "COMPLETED" || done.Output == nil || *done.Output != "Done: not without a receipt" {
		t.Fatalf("declined run %+v", done)
	}
}

// TestBadConfigStopsTheServer: a config mistake is an error at start naming the file and path.
func TestBadConfigStopsTheServer(t *testing.T) {
	t.Parallel()
	file := apptest.WriteConfig(t, "agents:\n  - id: billing\n    model: {provider: openai, name: m, baseURL: 'localhost:1'}\n")
	cfg, err := app.ParseConfig([]string{"--db", "sqlite:" + filepath.Join(t.TempDir(), "x.db"), "--config", file}, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	_, err = app.NewApp(t.Context(), cfg, apptest.DiscardLog())
	if err == nil || !strings.Contains(err.Error(), file+`: agents[0].model.baseURL: "localhost:1" is not an http(s) URL`) {
		t.Fatalf("error %v", err)
	}
}

// TestConfiguredMCPToolEndToEnd: an MCP server's tool, held for approval by the server's
// policy, runs once when approved and its result reaches the model.
func TestConfiguredMCPToolEndToEnd(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var got []map[string]any
	srv := mcp.NewServer(&mcp.Implementation{Name: "orders", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "cancel_order", Description: "Cancel an order"},
		func(_ context.Context, _ *mcp.CallToolRequest, in map[string]any) (*mcp.CallToolResult, any, error) {
			mu.Lock()
			got = append(got, in)
			mu.Unlock()
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("cancelled %v", in["orderId"])}}}, nil, nil
		})
	h := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(h.Close)
	model := apptest.FakeModel(t, "cancel_order")
	file := apptest.WriteConfig(t, `
agents:
  - id: orders
    model: {provider: openai, baseURL: `+model.URL+`/v1, name: test-model}
    tools: [cancel_order]
mcpServers:
  - name: orders
    url: `+h.URL+`
    requireApproval: [cancel_order]
`)
	s := apptest.Start(t, "sqlite:"+filepath.Join(t.TempDir(), "interlock.db"), "--config", file)
	var out struct{ StartRun apptest.Run }
	s.Must(t, `mutation { startRun(input: {agentId: "orders", prompt: "cancel order 7"}) { `+apptest.RunFields+` } }`, nil, &out)
	ws := apptest.DialWS(t, s.URL, "graphql-transport-ws")
	op := ws.Subscribe(apptest.EventsQuery, map[string]any{"runId": out.StartRun.RunID, "after": 0})
	evs := apptest.Follow(t, ws, op, apptest.IsType("RUN_SUSPENDED"))
	mu.Lock()
	before := len(got)
	mu.Unlock()
	var asked *apptest.ToolCall
	for _, e := range evs {
		if e.Type == "TOOL_CALL_APPROVAL" {
			asked = e.ToolCall
		}
	}
	if before != 0 || asked == nil || asked.ToolName != "cancel_order" || !asked.RequiresApproval {
		t.Fatalf("before approval: %d calls, approval asked for %+v", before, asked)
	}
	s.Must(t, `mutation($id: ID!) { approveToolCall(runId: $id) { status } }`, map[string]any{"id": out.StartRun.RunID}, &struct{}{})
	apptest.Follow(t, ws, op, nil)
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 1 || got[0]["orderId"] != "7" {
		t.Fatalf("MCP calls %v, want one with orderId 7", got)
	}
	if done := s.Run(t, out.StartRun.RunID); done.Output == nil || *done.Output != "Done: cancelled 7" {
		t.Fatalf("run %+v, output %q", done, deref(done.Output))
	}
}

func deref(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}

// TestEditAndApprove: a person approves a refund with another amount. Arguments that do not
// match the tool's schema are refused and consume nothing; valid ones run the tool, and the
// decision keeps both.
func TestEditAndApprove(t *testing.T) {
	t.Parallel()
	apptest.EachDB(t, func(t *testing.T, s *apptest.Server) {
		run := s.StartRun(t, "refund order 42 for 30", nil)
		ws := apptest.DialWS(t, s.URL, "graphql-transport-ws")
		op := ws.Subscribe(apptest.EventsQuery, map[string]any{"runId": run.RunID, "after": 0})
		apptest.Follow(t, ws, op, apptest.IsType("RUN_SUSPENDED"))

		const approve = `mutation($id: ID!, $args: JSON) { approveToolCall(runId: $id, args: $args) { status } }`
		for _, bad := range []any{map[string]any{"orderId": "42", "amount": "lots"}, map[string]any{"amount": 10}, []any{1}, "x"} {
			e := s.WantError(t, "BAD_USER_INPUT", approve, map[string]any{"id": run.RunID, "args": bad})
			if _, isObject := bad.(map[string]any); isObject && !strings.Contains(e.Message, "args do not match the inputSchema of issue_refund") {
				t.Fatalf("message %q", e.Message)
			}
			if r := s.Run(t, run.RunID); r.Status != "SUSPENDED" || len(r.ToolCalls) != 1 {
				t.Fatalf("after refused args %v the run is %+v", bad, r)
			}
		}
		s.Must(t, approve, map[string]any{"id": run.RunID, "args": map[string]any{"orderId": "42", "amount": 10}}, &struct{}{})
		evs := apptest.Follow(t, ws, op, nil)
		var approved, result *apptest.Event
		for i := range evs {
			switch evs[i].Type {
			case "TOOL_CALL_APPROVED":
				approved = &evs[i]
			case "TOOL_RESULT":
				result = &evs[i]
			}
		}
		if approved == nil || string(approved.ToolCall.Args) != `{"amount":10,"orderId":"42"}` {
			t.Fatalf("TOOL_CALL_APPROVED %+v", approved)
		}
		if got, _ := json.Marshal(result.Result); !strings.Contains(string(got), `"amount":10`) {
			t.Fatalf("the tool ran with %s, want the edited amount", got)
		}
		var out struct {
			Run struct {
				Status    string
				Decisions []struct {
					Kind             string
					Args, EditedArgs json.RawMessage
				}
			}
		}
		s.Must(t, `query($id: ID!) { run(runId: $id) { status decisions { kind args editedArgs } } }`, map[string]any{"id": run.RunID}, &out)
		d := out.Run.Decisions
		if out.Run.Status != "COMPLETED" || len(d) != 1 || d[0].Kind != "APPROVED" ||
			string(d[0].Args) != `{"amount":30,"orderId":"42"}` || string(d[0].EditedArgs) != `{"amount":10,"orderId":"42"}` {
			t.Fatalf("run %+v", out.Run)
		}
	})
}

// countingModel answers every request with the number of messages it was given.
func countingModel(t *testing.T) *httptest.Server {
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct{ Messages []json.RawMessage }
		json.NewDecoder(r.Body).Decode(&body)
		w.Header().Set("Content-Type", "text/event-stream")
		apptest.SendChunk(w, fmt.Sprintf(`{"role":"assistant","content":"saw %d"}`, len(body.Messages)))
		io.WriteString(w, "data: [DONE]\n\n")
	}))
	t.Cleanup(s.Close)
	return s
}

// TestMemoryThreads: a second run of a thread is given the first one's messages (as many as
// the agent's memory.lastMessages), and thread/threads show them — on both databases.
func TestMemoryThreads(t *testing.T) {
	t.Parallel()
	model := countingModel(t)
	file := apptest.WriteConfig(t, `
agents:
  - id: full
    instructions: Be brief.
    model: {provider: openai, baseURL: `+model.URL+`/v1, name: m}
  - id: short
    instructions: Be brief.
    model: {provider: openai, baseURL: `+model.URL+`/v1, name: m}
    memory: {lastMessages: 1}
`)
	apptest.EachDB(t, func(t *testing.T, s *apptest.Server) {
		ask := func(agent, thread, prompt string) string {
			t.Helper()
			var out struct{ StartRun apptest.Run }
			s.Must(t, `mutation($in: StartRunInput!) { startRun(input: $in) { `+apptest.RunFields+` } }`,
				map[string]any{"in": map[string]any{"agentId": agent, "prompt": prompt, "threadId": thread, "resourceId": "cust-1"}}, &out)
			ws := apptest.DialWS(t, s.URL, "graphql-transport-ws")
			apptest.Follow(t, ws, ws.Subscribe(apptest.EventsQuery, map[string]any{"runId": out.StartRun.RunID, "after": 0}), nil)
			return deref(s.Run(t, out.StartRun.RunID).Output)
		}
		// system + prompt; then system + the first question and answer + prompt.
		if got := []string{ask("full", "th-1", "one"), ask("full", "th-1", "two")}; got[0] != "saw 2" || got[1] != "saw 4" {
			t.Fatalf("answers %v, want [saw 2 saw 4]", got)
		}
		if got := []string{ask("short", "th-2", "one"), ask("short", "th-2", "two"), ask("short", "th-3", "one")}; got[1] != "saw 3" || got[2] != "saw 2" {
			t.Fatalf("answers with lastMessages 1: %v", got)
		}
		var out struct {
			Thread struct {
				ID, ResourceID string
				MessageCount   int
				Messages       []struct{ Role, Content string }
				Last           []struct{ Content string }
				Runs           struct{ Total int }
			}
			Threads struct {
				Total   int
				Threads []struct{ ID string }
			}
			None *struct{ ID string }
		}
		s.Must(t, `{ thread(id: "th-1") { id resourceId messageCount messages { role content } last: messages(last: 1) { content } runs { total } }
				threads(resourceId: "cust-1") { total threads { id } } none: thread(id: "th-9") { id } }`, nil, &out)
		th := out.Thread
		if th.ID != "th-1" || th.ResourceID != "cust-1" || th.MessageCount != 4 || len(th.Messages) != 4 || th.Messages[0].Content != "one" ||
			th.Messages[1].Role != "assistant" || th.Messages[1].Content != "saw 2" || len(th.Last) != 1 || th.Last[0].Content != "saw 4" || th.Runs.Total != 2 {
			t.Fatalf("thread %+v", th)
		}
		if out.Threads.Total != 3 || out.Threads.Threads[0].ID != "th-3" || out.None != nil {
			t.Fatalf("threads %+v, unknown thread %+v", out.Threads, out.None)
		}
	}, "--config", file)
}

// TestConfiguredHTTPToolSuspendsAndResumes: an HTTP tool answering {"suspend": …} holds the run
// for a person; resumeRun calls it again with the resumeData and the payload it suspended with.
func TestConfiguredHTTPToolSuspendsAndResumes(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var bodies []map[string]any
	endpoint := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		json.NewDecoder(r.Body).Decode(&body)
		mu.Lock()
		bodies = append(bodies, body)
		mu.Unlock()
		if body["resumeData"] == nil {
			io.WriteString(w, `{"suspend": {"question": "Which card?"}}`)
			return
		}
		io.WriteString(w, `{"result": {"card": "`+fmt.Sprint(body["resumeData"].(map[string]any)["card"])+`"}}`)
	}))
	t.Cleanup(endpoint.Close)
	model := apptest.FakeModel(t, "ask_card")
	file := apptest.WriteConfig(t, `
agents:
  - id: billing
    model: {provider: openai, baseURL: `+model.URL+`/v1, name: m}
    tools: [ask_card]
tools:
  - name: ask_card
    http: {url: `+endpoint.URL+`}
    resumeSchema: {type: object, properties: {card: {type: string}}, required: [card]}
`)
	s := apptest.Start(t, "sqlite:"+filepath.Join(t.TempDir(), "interlock.db"), "--config", file)
	var out struct{ StartRun apptest.Run }
	s.Must(t, `mutation { startRun(input: {agentId: "billing", prompt: "refund order 7"}) { `+apptest.RunFields+` } }`, nil, &out)
	id := out.StartRun.RunID
	ws := apptest.DialWS(t, s.URL, "graphql-transport-ws")
	op := ws.Subscribe(apptest.EventsQuery, map[string]any{"runId": id, "after": 0})
	apptest.Follow(t, ws, op, apptest.IsType("RUN_SUSPENDED"))
	if r := s.Run(t, id); len(r.ToolCalls) != 1 || string(r.ToolCalls[0].SuspendPayload) != `{"question":"Which card?"}` {
		t.Fatalf("suspended run %+v", r)
	}
	s.WantError(t, "BAD_USER_INPUT", `mutation($id: ID!) { resumeRun(runId: $id, resumeData: {}) { status } }`, map[string]any{"id": id})
	s.Must(t, `mutation($id: ID!) { resumeRun(runId: $id, resumeData: {card: "visa"}) { status } }`, map[string]any{"id": id}, &struct{}{})
	apptest.Follow(t, ws, op, nil)
	if done := s.Run(t, id); done.Status != "COMPLETED" || deref(done.Output) != `Done: {"card":"visa"}` {
		t.Fatalf("run %+v, output %q", done, deref(done.Output))
	}
	mu.Lock()
	defer mu.Unlock()
	if len(bodies) != 2 || bodies[1]["suspendPayload"].(map[string]any)["question"] != "Which card?" || bodies[1]["runId"] != id {
		t.Fatalf("POSTs %v", bodies)
	}
}
