package app_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"interlock/internal/apptest"
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
					Status, StartedBy string
					Decisions         []struct {
						Kind      string
						DecidedBy *string
					}
				}
			}
			s.MustAs(t, apptest.TokenOf("root"), `query($id: ID!) { run(runId: $id) { status startedBy decisions { kind decidedBy } } }`, map[string]any{"id": approval(res)["runId"]}, &run)
			if run.Run.Status != "COMPLETED" || run.Run.StartedBy != "agentbot" || len(run.Run.Decisions) != 1 || run.Run.Decisions[0].Kind != "APPROVED" || run.Run.Decisions[0].DecidedBy != nil {
				t.Fatalf("the ungated call's run = %+v, want COMPLETED, started by agentbot, approved by policy", run.Run)
			}

			// A gated call: held until alice approves it.
			got := make(chan *mcp.CallToolResult, 1)
			go func() {
				got <- callTool(t, cs, "orders__refund", map[string]any{"order": 42, "amount": 30}, 30*time.Second, nil)
			}()
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
			go func() {
				got <- callTool(t, cs, "orders__refund", map[string]any{"order": 43, "amount": 5}, 30*time.Second, nil)
			}()
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
