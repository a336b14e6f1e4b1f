package app_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"interlock/internal/apptest"
	"interlock/internal/dbtest"
)

// gatewayConfig is the auth and MCP sections of a gateway's tests: the usual principals plus
// a requester, agentbot, whose token MCP clients use; one upstream re-exposed (orders, whose
// refund waits for a person), one not (files); more is appended to mcpServers[0].
func gatewayConfig(up *apptest.MCPUpstream, wait, more string) string {
	return fmt.Sprintf(`
    - {subject: agentbot, role: requester, sha256: %s}
  separationOfDuties: true
mcpServers:
  - name: orders
    url: %s
    requireApproval: [refund]
%s
  - name: files
    url: %s
mcpGateway:
  agentId: mcp-gateway
  servers: [orders]
  wait: %s
  progressInterval: 200ms
`, apptest.Sha256Hex(apptest.TokenOf("agentbot")), up.URL, more, up.URL, wait)
}

// bearer is an HTTP client that sends token with every request.
func bearer(token string) *http.Client {
	return &http.Client{Transport: bearerTransport{token: token}}
}

type bearerTransport struct{ token string }

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// gatewayClient connects the go-sdk client to the gateway of s with token, speaking version
// (2025-11-25: a session; 2026-07-28: sessionless); progress, when not nil, is told of each
// progress notification.
func gatewayClient(t *testing.T, s *apptest.Server, token, version string, progress func(*mcp.ProgressNotificationClientRequest)) *mcp.ClientSession {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "gateway-test", Version: "1"}, &mcp.ClientOptions{ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
		if progress != nil {
			progress(r)
		}
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: s.URL + "/mcp", HTTPClient: bearer(token), MaxRetries: -1},
		&mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatalf("connect %s: %v", version, err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// callTool calls name with args, within d.
func callTool(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any, d time.Duration, progressToken any) *mcp.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	p := &mcp.CallToolParams{Name: name, Arguments: args}
	if progressToken != nil {
		p.SetProgressToken(progressToken)
	}
	res, err := cs.CallTool(ctx, p)
	if err != nil {
		t.Fatalf("call %s %v: %v", name, args, err)
	}
	return res
}

// heldCall calls name with args in the background, for a test that decides the call while it
// is held; the answer comes on the channel. A call that fails is answered as an isError result
// naming the error (t.Fatal belongs to the test's goroutine, and the answer must always come).
func heldCall(cs *mcp.ClientSession, name string, args map[string]any, d time.Duration) <-chan *mcp.CallToolResult {
	got := make(chan *mcp.CallToolResult, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), d)
		defer cancel()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
		if err != nil {
			res = &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "call: " + err.Error()}}}
		}
		got <- res
	}()
	return got
}

// approval is the io.interlock/approval _meta of a gateway's answer.
func approval(res *mcp.CallToolResult) map[string]any {
	m, _ := res.Meta["io.interlock/approval"].(map[string]any)
	return m
}

func resultText(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// waitingRun is the id of the one run of the gateway's agent waiting in suspendedRuns.
func waitingRun(t *testing.T, s *apptest.Server) string {
	t.Helper()
	var id string
	apptest.Until(t, "a gateway call waiting in suspendedRuns", func() bool {
		var data struct {
			SuspendedRuns struct {
				Runs []struct{ ID string }
			}
		}
		s.MustAs(t, apptest.TokenOf("alice"), `{ suspendedRuns(agentId: "mcp-gateway") { runs { id } } }`, nil, &data)
		if len(data.SuspendedRuns.Runs) == 1 {
			id = data.SuspendedRuns.Runs[0].ID
			return true
		}
		return false
	})
	return id
}

func decide(t *testing.T, s *apptest.Server, who, runID, mutation string) {
	t.Helper()
	r := s.PostAs(t, apptest.TokenOf(who), `mutation($id: ID!) { `+mutation+` }`, map[string]any{"id": runID})
	if r.Code != "" {
		t.Fatalf("%s by %s: %s %s", mutation, who, r.Code, r.Msg)
	}
}

// TestMCPGatewayEndToEnd: an MCP client (the official Go SDK, over both the session protocol
// and the sessionless one) sees the re-exposed tools, an ungated call runs at once and is
// recorded, a gated call is held until a person approves it in the API and then gets the
// upstream's result, with the upstream called once and given the receipt; a declined call is
// an error with the person's reason; startedBy and decidedBy come from the tokens.
func TestMCPGatewayEndToEnd(t *testing.T) {
	for _, version := range []string{"2025-11-25", "2026-07-28"} {
		t.Run(version, func(t *testing.T) {
			t.Parallel()
			up := apptest.NewMCPUpstream(t)
			s := apptest.AuthServer(t, "sqlite:"+t.TempDir()+"/i.db", gatewayConfig(up, "20s", ""))
			cs := gatewayClient(t, s, apptest.TokenOf("agentbot"), version, nil)

			if got := cs.InitializeResult().ProtocolVersion; got != version {
				t.Fatalf("the session speaks %s, want %s", got, version)
			}
			tools, err := cs.ListTools(context.Background(), nil)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, tl := range tools.Tools {
				names = append(names, tl.Name)
			}
			if strings.Join(names, ",") != "orders__lookup,orders__refund" {
				t.Fatalf("tools = %v, want orders__lookup, orders__refund only (files is not re-exposed)", names)
			}
			refund := tools.Tools[1]
			if refund.Annotations == nil || refund.Annotations.DestructiveHint == nil || !*refund.Annotations.DestructiveHint || refund.Title != "Refund an order" {
				t.Errorf("refund lost its annotations or title: %+v", refund)
			}
			schema, _ := json.Marshal(refund.InputSchema)
			if !strings.Contains(string(schema), `"amount"`) || !strings.Contains(string(schema), `"order"`) {
				t.Errorf("refund's input schema = %s", schema)
			}

			res := callTool(t, cs, "orders__lookup", map[string]any{"order": 7}, 10*time.Second, nil)
			if res.IsError || resultText(res) != "order 7: shipped" || approval(res)["status"] != "APPROVED" {
				t.Fatalf("ungated call = %+v %q", res, resultText(res))
			}
			var run struct {
				Run struct {
					Status, StartedBy, ThreadID string
					Decisions                   []struct {
						Kind      string
						DecidedBy *string
					}
				}
			}
			s.MustAs(t, apptest.TokenOf("root"), `query($id: ID!) { run(runId: $id) { status startedBy threadId decisions { kind decidedBy } } }`, map[string]any{"id": approval(res)["runId"]}, &run)
			if run.Run.Status != "COMPLETED" || run.Run.StartedBy != "agentbot" || len(run.Run.Decisions) != 1 || run.Run.Decisions[0].Kind != "AUTO_APPROVED" || run.Run.Decisions[0].DecidedBy != nil {
				t.Fatalf("the ungated call's run = %+v, want COMPLETED, started by agentbot, approved by policy", run.Run)
			}
			// Its thread: the session, or, without one (2026-07-28), the client and principal.
			if want := "mcp-" + cs.ID(); (cs.ID() != "" && run.Run.ThreadID != want) || (cs.ID() == "" && !strings.HasPrefix(run.Run.ThreadID, "mcp-client-")) {
				t.Errorf("thread = %q with session %q", run.Run.ThreadID, cs.ID())
			}

			// A gated call: held until alice approves it.
			got := heldCall(cs, "orders__refund", map[string]any{"order": 42, "amount": 30}, 30*time.Second)
			id := waitingRun(t, s)
			if n := len(up.Calls("refund")); n != 0 {
				t.Fatalf("the upstream ran refund %d times before anyone approved it", n)
			}
			// Separation of duties: agentbot started it, and may not approve it (it is no
			// approver either); alice approves.
			decide(t, s, "alice", id, `approveToolCall(runId: $id) { id }`)
			res = <-got
			if res.IsError || approval(res)["runId"] != id || approval(res)["decidedBy"] != "alice" {
				t.Fatalf("approved call = %+v %q", res, resultText(res))
			}
			sc, _ := json.Marshal(res.StructuredContent)
			if string(sc) != `{"order":42,"refunded":30}` {
				t.Errorf("approved call's structured result = %s", sc)
			}
			calls := up.Calls("refund")
			if len(calls) != 1 {
				t.Fatalf("refund ran %d times, want 1", len(calls))
			}
			if m, _ := calls[0].Meta["io.interlock/approval"].(map[string]any); m == nil || m["receipt"] == nil || m["receipt"] != approval(res)["receipt"] {
				t.Errorf("the upstream call's _meta = %v, want the receipt of the approval (%v)", calls[0].Meta, approval(res)["receipt"])
			}

			// Declined: an error with the reason, and the tool never runs.
			got = heldCall(cs, "orders__refund", map[string]any{"order": 43, "amount": 5}, 30*time.Second)
			id = waitingRun(t, s)
			decide(t, s, "bob", id, `declineToolCall(runId: $id, reason: "order 43 was never paid") { id }`)
			res = <-got
			if !res.IsError || !strings.Contains(resultText(res), "declined") || !strings.Contains(resultText(res), "order 43 was never paid") || approval(res)["status"] != "DECLINED" {
				t.Fatalf("declined call = %+v %q", res, resultText(res))
			}
			if n := len(up.Calls("refund")); n != 1 {
				t.Fatalf("refund ran %d times after a decline, want still 1", n)
			}
		})
	}
}

// TestMCPGatewayRetries: a gated call still waiting when wait passes is answered PENDING (not
// an error) with its run and the console link; the identical call joins the same request;
// once approved, the next identical call gets the one execution's result, and the call after
// that is a new request; other arguments are another request. A held call with a progress
// token is sent progress. A call its client cancels stays in the inbox; approved, it runs
// once, and the identical call gets its result.
func TestMCPGatewayRetries(t *testing.T) {
	for _, version := range []string{"2025-11-25", "2026-07-28"} {
		t.Run(version, func(t *testing.T) {
			t.Parallel()
			up := apptest.NewMCPUpstream(t)
			s := apptest.AuthServer(t, "sqlite:"+t.TempDir()+"/i.db", gatewayConfig(up, "1s", ""))
			var beats sync.Map
			cs := gatewayClient(t, s, apptest.TokenOf("agentbot"), version, func(r *mcp.ProgressNotificationClientRequest) {
				beats.Store(r.Params.Progress, r.Params.ProgressToken)
			})
			args := map[string]any{"order": 42, "amount": 30}

			first := callTool(t, cs, "orders__refund", args, 20*time.Second, "p-1")
			id, _ := approval(first)["runId"].(string)
			if first.IsError || approval(first)["status"] != "PENDING" || id == "" || !strings.Contains(resultText(first), "?run="+id) {
				t.Fatalf("a call past wait = %+v %q, want PENDING with its run and link", first, resultText(first))
			}
			n := 0
			beats.Range(func(_, tok any) bool { n++; return tok == "p-1" })
			if n < 2 {
				t.Errorf("%d progress notifications in 1s held at 200ms, want at least 2", n)
			}
			again := callTool(t, cs, "orders__refund", args, 20*time.Second, nil)
			if approval(again)["status"] != "PENDING" || approval(again)["runId"] != id {
				t.Fatalf("the identical call = %v, want PENDING on the same run %s", approval(again), id)
			}
			other := callTool(t, cs, "orders__refund", map[string]any{"order": 42, "amount": 31}, 20*time.Second, nil)
			if approval(other)["runId"] == id || approval(other)["status"] != "PENDING" {
				t.Fatalf("other arguments = %v, want another request", approval(other))
			}
			decide(t, s, "alice", id, `approveToolCall(runId: $id) { id }`)
			apptest.Until(t, "the approved refund runs", func() bool { return len(up.Calls("refund")) == 1 })
			res := callTool(t, cs, "orders__refund", args, 20*time.Second, nil)
			if res.IsError || approval(res)["status"] != "APPROVED" || approval(res)["runId"] != id {
				t.Fatalf("the call after the approval = %+v %v, want the result of run %s", res, approval(res), id)
			}
			next := callTool(t, cs, "orders__refund", args, 20*time.Second, nil)
			if approval(next)["status"] != "PENDING" || approval(next)["runId"] == id {
				t.Fatalf("the call after the result was given = %v, want a new request", approval(next))
			}
			if n := len(up.Calls("refund")); n != 1 {
				t.Fatalf("refund ran %d times, want 1", n)
			}

			// Cancelled by its client: the request stays; approved, it runs once.
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			cancelled := map[string]any{"order": 9, "amount": 1}
			go func() {
				_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "orders__refund", Arguments: cancelled})
				done <- err
			}()
			var waiting string
			apptest.Until(t, "the cancelled call's request", func() bool {
				var data struct {
					SuspendedRuns struct {
						Runs []struct {
							ID        string
							ToolCalls []struct{ Args json.RawMessage }
						}
					}
				}
				s.MustAs(t, apptest.TokenOf("alice"), `{ suspendedRuns(agentId: "mcp-gateway") { runs { id toolCalls { args } } } }`, nil, &data)
				for _, r := range data.SuspendedRuns.Runs {
					if len(r.ToolCalls) == 1 && string(r.ToolCalls[0].Args) == `{"amount":1,"order":9}` {
						waiting = r.ID
					}
				}
				return waiting != ""
			})
			cancel()
			if err := <-done; err == nil {
				t.Fatal("a cancelled call returned no error")
			}
			time.Sleep(300 * time.Millisecond) // the gateway sees the cancellation
			decide(t, s, "bob", waiting, `approveToolCall(runId: $id) { id }`)
			apptest.Until(t, "the cancelled call runs once approved", func() bool { return len(up.Calls("refund")) == 2 })
			res = callTool(t, cs, "orders__refund", cancelled, 20*time.Second, nil)
			if res.IsError || approval(res)["runId"] != waiting {
				t.Fatalf("the identical call after the cancelled one was approved = %v, want run %s's result", approval(res), waiting)
			}
			if n := len(up.Calls("refund")); n != 2 {
				t.Fatalf("refund ran %d times, want 2", n)
			}
		})
	}
}

// TestMCPGatewayExpired: a call nobody decides within its approvalTimeout is an error saying
// the request expired, distinct from a decline, and the tool never runs.
func TestMCPGatewayExpired(t *testing.T) {
	t.Parallel()
	up := apptest.NewMCPUpstream(t)
	s := apptest.AuthServer(t, "sqlite:"+t.TempDir()+"/i.db", gatewayConfig(up, "20s", "    approvalTimeout: 1s"))
	cs := gatewayClient(t, s, apptest.TokenOf("agentbot"), "2025-11-25", nil)
	res := callTool(t, cs, "orders__refund", map[string]any{"order": 1, "amount": 2}, 30*time.Second, nil)
	if !res.IsError || approval(res)["status"] != "EXPIRED" || !strings.Contains(resultText(res), "expired") || strings.Contains(resultText(res), "declined") {
		t.Fatalf("an expired call = %+v %q", res, resultText(res))
	}
	if n := len(up.Calls("refund")); n != 0 {
		t.Fatalf("an expired call ran %d times", n)
	}
}

// TestMCPGatewayElicitationDoesNotRelease: a 2026-07-28 client that can open URLs is asked to
// open the request in the console (a link without credentials); its "accept" releases
// nothing: the call is asked again until a person approves it in Interlock, and then runs once.
func TestMCPGatewayElicitationDoesNotRelease(t *testing.T) {
	t.Parallel()
	up := apptest.NewMCPUpstream(t)
	s := apptest.AuthServer(t, "sqlite:"+t.TempDir()+"/i.db", gatewayConfig(up, "300ms", ""))
	asked := make(chan *mcp.ElicitParams, 100)
	c := mcp.NewClient(&mcp.Implementation{Name: "elicit-test", Version: "1"}, &mcp.ClientOptions{
		Capabilities: &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{URL: &mcp.URLElicitationCapabilities{}}},
		ElicitationHandler: func(_ context.Context, r *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			asked <- r.Params
			return &mcp.ElicitResult{Action: "accept"}, nil
		},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: s.URL + "/mcp", HTTPClient: bearer(apptest.TokenOf("agentbot")), MaxRetries: -1},
		&mcp.ClientSessionOptions{ProtocolVersion: "2026-07-28"})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	got := make(chan *mcp.CallToolResult, 1)
	go func() {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "orders__refund", Arguments: map[string]any{"order": 5, "amount": 6}})
		if err != nil {
			t.Errorf("call: %v", err)
		}
		got <- res
	}()
	first := <-asked
	if first.Mode != "url" || !strings.Contains(first.URL, "?run=") || strings.Contains(first.URL, "token") {
		t.Fatalf("elicitation = %+v, want a URL to the request without credentials", first)
	}
	<-asked // accepted once, asked again: nothing was released
	if n := len(up.Calls("refund")); n != 0 {
		t.Fatalf("an accepted elicitation ran the tool %d times", n)
	}
	decide(t, s, "alice", waitingRun(t, s), `approveToolCall(runId: $id) { id }`)
	res := <-got
	if res == nil || res.IsError || approval(res)["status"] != "APPROVED" {
		t.Fatalf("after the approval = %+v", res)
	}
	if n := len(up.Calls("refund")); n != 1 {
		t.Fatalf("refund ran %d times, want 1", n)
	}
}

// TestMCPGatewayWebhooks: a held gateway call is announced to webhooks as it waits (with the
// call's tool and arguments as sent) and when a person decides it, as any request is; an
// ungated call, which nobody was asked about, is not.
func TestMCPGatewayWebhooks(t *testing.T) {
	t.Parallel()
	up := apptest.NewMCPUpstream(t)
	rcv := newReceiver(t)
	s := apptest.AuthServer(t, "sqlite:"+t.TempDir()+"/i.db", gatewayConfig(up, "30s", "")+notifySection(rcv.URL, "", ""))
	cs := gatewayClient(t, s, apptest.TokenOf("agentbot"), "2025-11-25", nil)
	callTool(t, cs, "orders__lookup", map[string]any{"order": 3}, 20*time.Second, nil)
	got := heldCall(cs, "orders__refund", map[string]any{"order": 8, "amount": 2}, 40*time.Second)
	id := waitingRun(t, s)
	decide(t, s, "alice", id, `approveToolCall(runId: $id) { id }`)
	<-got
	var kinds []string
	apptest.Until(t, "the request and its decision at the webhook", func() bool {
		_, events := rcv.delivered()
		kinds = kinds[:0]
		for _, e := range events {
			if e.Run.ID != id {
				t.Fatalf("a webhook about run %s (%s): only the held call is announced", e.Run.ID, e.Type)
			}
			if e.ToolCall == nil || e.ToolCall.ToolName != "orders__refund" || string(e.ToolCall.Args) != `{"amount":2,"order":8}` {
				t.Fatalf("webhook %s names the call %+v", e.Type, e.ToolCall)
			}
			kinds = append(kinds, string(e.Type))
		}
		return len(kinds) == 2
	})
}

// TestMCPGatewayUpstreamAsks: an approved call whose upstream (2026-07-28) asks a question
// before it acts suspends the run for a person's answer, with the question as its payload and
// the question's schema as the call's resumeSchema (an answer that does not match it is
// BAD_USER_INPUT); resumeRun's answer makes the call again with it and the upstream's request
// state, and the held MCP call gets the result. The upstream acts once.
func TestMCPGatewayUpstreamAsks(t *testing.T) {
	for _, db := range []string{"sqlite", "mysql"} {
		t.Run(db, func(t *testing.T) {
			up := apptest.NewMCPUpstreamSessionless(t)
			dsn := "sqlite:" + t.TempDir() + "/i.db"
			if db == "mysql" {
				dsn = dbtest.MySQLURL(dbtest.MySQLDSN(t))
			}
			cfg := strings.Replace(gatewayConfig(up, "30s", ""), "requireApproval: [refund]", "requireApproval: [refund, refund_why]", 1)
			s := apptest.AuthServer(t, dsn, cfg)
			cs := gatewayClient(t, s, apptest.TokenOf("agentbot"), "2025-11-25", nil)
			got := make(chan *mcp.CallToolResult, 1)
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
				defer cancel()
				res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "orders__refund_why", Arguments: map[string]any{"order": 12}})
				if err != nil {
					res = &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "call: " + err.Error()}}}
				}
				got <- res
			}()
			id := waitingRun(t, s)
			decide(t, s, "alice", id, `approveToolCall(runId: $id) { id }`)
			var asked struct {
				Run struct {
					Status    string
					ToolCalls []struct {
						ToolCallID       string
						RequiresApproval bool
						SuspendPayload   map[string]any
						ResumeSchema     json.RawMessage
					}
				}
			}
			apptest.Until(t, "the run waiting for the upstream's question to be answered", func() bool {
				s.MustAs(t, apptest.TokenOf("alice"), `query($id: ID!) { run(runId: $id) { status toolCalls { toolCallId requiresApproval suspendPayload resumeSchema } } }`, map[string]any{"id": id}, &asked)
				return asked.Run.Status == "SUSPENDED" && len(asked.Run.ToolCalls) == 1 && !asked.Run.ToolCalls[0].RequiresApproval
			})
			call := asked.Run.ToolCalls[0]
			if call.SuspendPayload["message"] != "Why is this order refunded?" || !strings.Contains(string(call.ResumeSchema), `"minLength":3`) {
				t.Fatalf("the question = %v, resumeSchema %s", call.SuspendPayload, call.ResumeSchema)
			}
			if n := len(up.Calls("refund_why")); n != 0 {
				t.Fatalf("the upstream acted %d times before the answer", n)
			}
			resume := `mutation($id: ID!, $d: JSON!) { resumeRun(runId: $id, resumeData: $d) { id } }`
			if r := s.PostAs(t, apptest.TokenOf("alice"), resume, map[string]any{"id": id, "d": map[string]any{"reason": "no"}}); r.Code != "BAD_USER_INPUT" {
				t.Fatalf("an answer that does not match the question's schema: %q %q, want BAD_USER_INPUT", r.Code, r.Msg)
			}
			if r := s.PostAs(t, apptest.TokenOf("alice"), resume, map[string]any{"id": id, "d": map[string]any{"reason": "damaged on arrival"}}); r.Code != "" {
				t.Fatalf("resumeRun: %s %s", r.Code, r.Msg)
			}
			res := <-got
			if res.IsError || resultText(res) != "refunded because damaged on arrival" || approval(res)["runId"] != id {
				t.Fatalf("the held call = %+v %q", res, resultText(res))
			}
			calls := up.Calls("refund_why")
			if len(calls) != 1 || calls[0].Args["why"] != "damaged on arrival" || calls[0].Args["requestState"] != "state-1" {
				t.Fatalf("the upstream acted %d times: %+v", len(calls), calls)
			}
		})
	}
}

// TestMCPGatewayEditedArgs: a person who edits a held call's arguments before approving it has
// the upstream run with theirs, once, and the receipt binds them; the client gets that result.
func TestMCPGatewayEditedArgs(t *testing.T) {
	t.Parallel()
	up := apptest.NewMCPUpstream(t)
	s := apptest.AuthServer(t, "sqlite:"+t.TempDir()+"/i.db", gatewayConfig(up, "30s", ""))
	cs := gatewayClient(t, s, apptest.TokenOf("agentbot"), "2025-11-25", nil)
	got := heldCall(cs, "orders__refund", map[string]any{"order": 42, "amount": 300}, 40*time.Second)
	id := waitingRun(t, s)
	r := s.PostAs(t, apptest.TokenOf("alice"), `mutation($id: ID!) { approveToolCall(runId: $id, args: {order: 42, amount: 30}) { id } }`, map[string]any{"id": id})
	if r.Code != "" {
		t.Fatalf("edit and approve: %s %s", r.Code, r.Msg)
	}
	res := <-got
	sc, _ := json.Marshal(res.StructuredContent)
	if res.IsError || string(sc) != `{"order":42,"refunded":30}` {
		t.Fatalf("the held call = %+v %s", res, sc)
	}
	calls := up.Calls("refund")
	if len(calls) != 1 || calls[0].Args["amount"] != float64(30) {
		t.Fatalf("the upstream got %+v, want one call with the edited amount 30", calls)
	}
}
