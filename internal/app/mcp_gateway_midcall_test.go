package app_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

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
