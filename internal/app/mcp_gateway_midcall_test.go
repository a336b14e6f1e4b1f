package app_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"interlock/internal/apptest"
	"interlock/internal/dbtest"
)

// TestMCPGatewayUpstreamAsksMidCall: an approved call whose upstream (a 2025 protocol, with
// sessions) asks a question in the middle of the call puts the run back in suspendedRuns, with
// the question as its payload and its schema as the call's resumeSchema, while the client's call
// stays held; an answer that does not match is BAD_USER_INPUT; resumeRun's answer reaches the
// upstream, whose call goes on, and the held call gets its result. The upstream runs once.
func TestMCPGatewayUpstreamAsksMidCall(t *testing.T) {
	for _, db := range []string{"sqlite", "mysql"} {
		t.Run(db, func(t *testing.T) {
			up, s, got, id := approvedAskingCall(t, db)
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
			if waitingRun(t, s) != id {
				t.Fatal("the run asking the question is not the one in suspendedRuns")
			}
			select {
			case res := <-got:
				t.Fatalf("the client's call was answered while the question waits: %q", resultText(res))
			default:
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
			calls := up.Calls("refund_ask")
			if len(calls) != 1 || calls[0].Args["why"] != "damaged on arrival" {
				t.Fatalf("the upstream ran %d times: %+v", len(calls), calls)
			}
		})
	}
}

// askingGateway is the config of a gateway over up whose refund and refund_ask need approval.
func askingGateway(t *testing.T, up *apptest.MCPUpstream, wait string) string {
	return apptest.WriteConfig(t, fmt.Sprintf(`mcpServers:
  - name: orders
    url: %s
    requireApproval: [refund, refund_ask]
mcpGateway:
  agentId: mcp-gateway
  servers: [orders]
  wait: %s
  progressInterval: 200ms
`, up.URL, wait))
}

// askedOn waits until run id waits on instance s for the answer to its upstream's question (a
// call that needs no approval), and returns the call.
func askedOn(t *testing.T, s *apptest.Server, id string) apptest.ToolCall {
	t.Helper()
	var call apptest.ToolCall
	apptest.Until(t, "the upstream's question waiting in suspendedRuns", func() bool {
		var out struct {
			SuspendedRuns struct{ Runs []apptest.Run }
		}
		s.Must(t, `{ suspendedRuns(agentId: "mcp-gateway") { runs { runId toolCalls { toolCallId requiresApproval interrupted } } } }`, nil, &out)
		r := out.SuspendedRuns.Runs
		if len(r) == 1 && r[0].RunID == id && len(r[0].ToolCalls) == 1 && !r[0].ToolCalls[0].RequiresApproval {
			call = r[0].ToolCalls[0]
			return true
		}
		return false
	})
	return call
}

// TestMCPGatewayMidCallQuestionOverTwoInstances: the question an upstream asks in the middle of
// a call the first instance runs is answered on the second; the first gives the upstream the
// answer, and the client's call held on the first gets the result. Then, with another call
// asking on the first instance, the first is killed: the second recovers the run with the call
// interrupted, waiting for a person, and the upstream is not sent it again.
func TestMCPGatewayMidCallQuestionOverTwoInstances(t *testing.T) {
	t.Parallel()
	up := apptest.NewMCPUpstreamAsking(t)
	a, b := twoInstances(t, "--lease-ttl", "2s", "--config", askingGateway(t, up, "60s"))
	ca := gatewayClient(t, a.Server, "-", "2025-11-25", nil)
	got := heldCall(ca, "orders__refund_ask", map[string]any{"order": 3}, 90*time.Second)
	id := askedOnFirst(t, a.Server)
	a.Must(t, `mutation($id: ID!) { approveToolCall(runId: $id) { id } }`, map[string]any{"id": id}, &struct{}{})
	askedOn(t, b.Server, id)
	b.Must(t, `mutation($id: ID!, $d: JSON!) { resumeRun(runId: $id, resumeData: $d) { id } }`, map[string]any{"id": id, "d": map[string]any{"reason": "wrong size"}}, &struct{}{})
	if res := <-got; res.IsError || resultText(res) != "refunded because wrong size" {
		t.Fatalf("the held call = %+v %q", res, resultText(res))
	}

	second := heldCall(ca, "orders__refund_ask", map[string]any{"order": 4}, 90*time.Second)
	id2 := askedOnFirst(t, a.Server)
	a.Must(t, `mutation($id: ID!) { approveToolCall(runId: $id) { id } }`, map[string]any{"id": id2}, &struct{}{})
	askedOn(t, b.Server, id2)
	a.Kill9(t)
	<-second // the client's connection to the dead instance ends
	apptest.Until(t, "the other instance holds the call interrupted", func() bool {
		var out struct {
			SuspendedRuns struct{ Runs []apptest.Run }
		}
		b.Must(t, `{ suspendedRuns(agentId: "mcp-gateway") { runs { runId toolCalls { interrupted requiresApproval } } } }`, nil, &out)
		r := out.SuspendedRuns.Runs
		return len(r) == 1 && r[0].RunID == id2 && len(r[0].ToolCalls) == 1 && r[0].ToolCalls[0].Interrupted && r[0].ToolCalls[0].RequiresApproval
	})
	if n := len(up.Calls("refund_ask")); n != 2 {
		t.Fatalf("the upstream got refund_ask %d times, want 2 (the second never re-sent without a person)", n)
	}
}

// askedOnFirst is the id of the one gateway request waiting for approval on s.
func askedOnFirst(t *testing.T, s *apptest.Server) string {
	t.Helper()
	var id string
	apptest.Until(t, "a gateway call waiting for approval", func() bool {
		var out struct {
			SuspendedRuns struct{ Runs []apptest.Run }
		}
		s.Must(t, `{ suspendedRuns(agentId: "mcp-gateway") { runs { runId toolCalls { requiresApproval } } } }`, nil, &out)
		r := out.SuspendedRuns.Runs
		if len(r) == 1 && len(r[0].ToolCalls) == 1 && r[0].ToolCalls[0].RequiresApproval {
			id = r[0].RunID
			return true
		}
		return false
	})
	return id
}

// TestMCPGatewayMidCallQuestionDeclined: a person declines the question an upstream asked in the
// middle of an approved call: the upstream is answered decline, its call goes on, and the
// client's held call gets the upstream's result; the run records the person's DECLINED with the
// reason. The call shows askedMidCall; approving it is BAD_USER_INPUT saying to resume or decline.
func TestMCPGatewayMidCallQuestionDeclined(t *testing.T) {
	t.Parallel()
	for _, db := range []string{"sqlite", "mysql"} {
		t.Run(db, func(t *testing.T) {
			up, s, got, id := approvedAskingCall(t, db)
			var asked struct {
				Run struct {
					Status    string
					ToolCalls []struct {
						ToolCallID   string
						AskedMidCall bool
					}
				}
			}
			apptest.Until(t, "the run waiting for the upstream's question to be answered", func() bool {
				s.MustAs(t, apptest.TokenOf("alice"), `query($id: ID!) { run(runId: $id) { status toolCalls { toolCallId askedMidCall } } }`, map[string]any{"id": id}, &asked)
				return asked.Run.Status == "SUSPENDED" && len(asked.Run.ToolCalls) == 1 && asked.Run.ToolCalls[0].AskedMidCall
			})
			callID := asked.Run.ToolCalls[0].ToolCallID
			if r := s.PostAs(t, apptest.TokenOf("alice"), `mutation($id: ID!) { approveToolCall(runId: $id) { id } }`, map[string]any{"id": id}); r.Code != "BAD_USER_INPUT" || !strings.Contains(r.Msg, "declineToolCall") {
				t.Fatalf("approving the question: %q %q, want BAD_USER_INPUT saying to resume or decline", r.Code, r.Msg)
			}
			decline := `mutation($id: ID!, $c: ID!) { declineToolCall(runId: $id, toolCallId: $c, reason: "keep the money") { id } }`
			if r := s.PostAs(t, apptest.TokenOf("alice"), decline, map[string]any{"id": id, "c": callID}); r.Code != "" {
				t.Fatalf("declineToolCall: %s %s", r.Code, r.Msg)
			}
			res := <-got
			if !res.IsError || resultText(res) != "not refunded: decline" {
				t.Fatalf("the held call = %+v %q; want the upstream's own answer to the decline", res, resultText(res))
			}
			calls := up.Calls("refund_ask")
			if len(calls) != 1 || calls[0].Args["why"] != "decline" {
				t.Fatalf("the upstream ran %d times: %+v", len(calls), calls)
			}
			var done struct {
				Run struct {
					Decisions []struct {
						ToolCallID, Kind, DecidedBy, Reason string
					}
				}
			}
			s.MustAs(t, apptest.TokenOf("alice"), `query($id: ID!) { run(runId: $id) { decisions { toolCallId kind decidedBy reason } } }`, map[string]any{"id": id}, &done)
			var declined int
			for _, d := range done.Run.Decisions {
				if d.ToolCallID == callID && d.Kind == "DECLINED" && d.DecidedBy == "alice" && d.Reason == "keep the money" {
					declined++
				}
			}
			if declined != 1 {
				t.Fatalf("decisions %+v, want alice's decline of the question with her reason", done.Run.Decisions)
			}
		})
	}
}

// approvedAskingCall starts a gateway on db ("sqlite" or "mysql") before an upstream whose
// refund_ask asks a question in the middle of its call, makes that call as agentbot (held) and
// has alice approve it; the upstream is then asking. It returns the upstream, the server, the
// held call's answer to come and the run's id.
func approvedAskingCall(t *testing.T, db string) (*apptest.MCPUpstream, *apptest.Server, <-chan *mcp.CallToolResult, string) {
	t.Helper()
	up := apptest.NewMCPUpstreamAsking(t)
	dsn := "sqlite:" + t.TempDir() + "/i.db"
	if db == "mysql" {
		dsn = dbtest.MySQLURL(dbtest.MySQLDSN(t))
	}
	cfg := strings.Replace(gatewayConfig(up, "30s", ""), "requireApproval: [refund]", "requireApproval: [refund, refund_ask]", 1)
	s := apptest.AuthServer(t, dsn, cfg)
	cs := gatewayClient(t, s, apptest.TokenOf("agentbot"), "2025-11-25", nil)
	got := heldCall(cs, "orders__refund_ask", map[string]any{"order": 12}, 60*time.Second)
	id := waitingRun(t, s)
	decide(t, s, "alice", id, `approveToolCall(runId: $id) { id }`)
	return up, s, got, id
}
