package app_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"interlock/internal/apptest"
	"interlock/internal/dbtest"
	"interlock/policy"
)

// policyConfig: an external agent whose refunds above 100 wait for a person, and the MCP
// gateway re-exposing orders, whose refund has the same rule (lookup needs no approval).
func policyConfig(up *apptest.MCPUpstream) string {
	return fmt.Sprintf(`
    - {subject: agentbot, role: requester, sha256: %s}
  separationOfDuties: true
agents:
  - id: refund-bot
    external: true
    tools: [issue_refund]
tools:
  - name: issue_refund
    inputSchema: {type: object}
    requireApproval: "args.amount > 100"
mcpServers:
  - name: orders
    url: %s
    requireApproval:
      refund: "args.amount > 100"
mcpGateway:
  agentId: mcp-gateway
  servers: [orders]
  wait: 20s
`, apptest.Sha256Hex(apptest.TokenOf("agentbot")), up.URL)
}

// TestPolicyOverTheAPI: the same expression judges an external agent's request over POST
// /approvals and a call through the MCP gateway, on both dialects: below the limit the call is
// let through at once — APPROVED to its caller, recorded AUTO_APPROVED with the rule, the
// policy's revision and a receipt — above it a person is asked, the call showing why; the agent's
// tool shows its policy.
func TestPolicyOverTheAPI(t *testing.T) {
	const rule = "args.amount > 100"
	revision := policy.Revision(rule)
	for _, db := range []string{"sqlite", "mysql"} {
		t.Run(db, func(t *testing.T) {
			t.Parallel()
			url := "sqlite:" + t.TempDir() + "/i.db"
			if db == "mysql" {
				url = dbtest.MySQLURL(dbtest.MySQLDSN(t))
			}
			up := apptest.NewMCPUpstream(t)
			s := apptest.AuthServer(t, url, policyConfig(up))

			// POST /approvals: let through, then asked.
			small := approvalRequest(t, s, t.Context(), "Bearer "+apptest.TokenOf("agentbot"), "POST", "/approvals?wait=0",
				`{"agentId":"refund-bot","toolName":"issue_refund","args":{"amount":20}}`)
			var answer struct {
				Status, Reason, PolicyRevision string
				AutoApproved                   bool
				Receipt                        *string
			}
			if err := json.Unmarshal([]byte(small.raw), &answer); err != nil || small.status != http.StatusOK {
				t.Fatalf("POST /approvals: %d %s", small.status, small.raw)
			}
			if answer.Status != "APPROVED" || !answer.AutoApproved || answer.PolicyRevision != revision || answer.Receipt == nil ||
				answer.Reason != `policy: requireApproval "args.amount > 100" is false for this call` {
				t.Fatalf("a small refund: %s", small.raw)
			}
			large := ask(t, s, "agentbot", "0", map[string]any{"agentId": "refund-bot", "toolName": "issue_refund", "args": map[string]any{"amount": 500}})
			if large.Status != "PENDING" {
				t.Fatalf("a large refund: %+v", large)
			}
			var run struct {
				Run struct {
					Status    string
					ToolCalls []struct{ ApprovalReason, PolicyRevision string }
					Decisions []struct {
						Kind, PolicyRevision, Reason string
						DecidedBy, Receipt           *string
					}
				}
			}
			const runQuery = `query($id: ID!) { run(runId: $id) { status toolCalls { approvalReason policyRevision } decisions { kind decidedBy reason policyRevision receipt } } }`
			s.MustAs(t, apptest.TokenOf("root"), runQuery, map[string]any{"id": large.RunID}, &run)
			if c := run.Run.ToolCalls; run.Run.Status != "SUSPENDED" || len(c) != 1 || c[0].ApprovalReason != `policy requireApproval "args.amount > 100" is true for this call` || c[0].PolicyRevision != revision {
				t.Fatalf("the large refund's run: %+v", run.Run)
			}

			// The gateway: a small refund runs at once, a large one waits for alice.
			cs := gatewayClient(t, s, apptest.TokenOf("agentbot"), "2025-11-25", nil)
			res := callTool(t, cs, "orders__refund", map[string]any{"order": 7, "amount": 30}, 20*time.Second, nil)
			if res.IsError || approval(res)["status"] != "APPROVED" || approval(res)["receipt"] == nil || len(up.Calls("refund")) != 1 {
				t.Fatalf("a small refund through the gateway: %+v %q", res, resultText(res))
			}
			s.MustAs(t, apptest.TokenOf("root"), runQuery, map[string]any{"id": approval(res)["runId"]}, &run)
			if d := run.Run.Decisions; run.Run.Status != "COMPLETED" || len(d) != 1 || d[0].Kind != "AUTO_APPROVED" || d[0].DecidedBy != nil ||
				d[0].PolicyRevision != revision || d[0].Receipt == nil || !strings.Contains(d[0].Reason, "is false for this call") {
				t.Fatalf("the small refund's run: %+v", run.Run)
			}
			got := heldCall(cs, "orders__refund", map[string]any{"order": 8, "amount": 300}, 30*time.Second)
			id := waitingRun(t, s)
			if len(up.Calls("refund")) != 1 {
				t.Fatal("the large refund ran before anyone approved it")
			}
			s.MustAs(t, apptest.TokenOf("root"), runQuery, map[string]any{"id": id}, &run)
			if c := run.Run.ToolCalls; len(c) != 1 || !strings.Contains(c[0].ApprovalReason, "is true for this call") {
				t.Fatalf("the held gateway call: %+v", run.Run)
			}
			decide(t, s, "alice", id, `approveToolCall(runId: $id) { id }`)
			if res := <-got; res.IsError || approval(res)["decidedBy"] != "alice" || len(up.Calls("refund")) != 2 {
				t.Fatalf("the approved large refund: %+v %q", res, resultText(res))
			}

			var agents struct {
				Agent struct {
					Tools []struct {
						Name             string
						RequiresApproval bool
						ApprovalPolicy   *string
						PolicyRevision   string
					}
				}
			}
			s.MustAs(t, apptest.TokenOf("root"), `{ agent(id: "mcp-gateway") { tools { name requiresApproval approvalPolicy policyRevision } } }`, nil, &agents)
			for _, tl := range agents.Agent.Tools {
				switch tl.Name {
				case "orders__refund":
					if tl.ApprovalPolicy == nil || *tl.ApprovalPolicy != rule || tl.PolicyRevision != revision || tl.RequiresApproval {
						t.Errorf("refund: %+v", tl)
					}
				case "orders__lookup":
					if tl.ApprovalPolicy != nil || tl.PolicyRevision != policy.Revision("false") || tl.RequiresApproval {
						t.Errorf("lookup: %+v", tl)
					}
				}
			}
		})
	}
}
