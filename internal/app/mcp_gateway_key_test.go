package app_test

import (
	"encoding/json"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"interlock/internal/apptest"
)

// TestMCPGatewayKeyOrderDoesNotMatter: docs/mcp-gateway.md, Calling again: "the order of keys
// and the spacing do not matter" — the same arguments in another key order join the waiting
// request.
func TestMCPGatewayKeyOrderDoesNotMatter(t *testing.T) {
	t.Parallel()
	up := apptest.NewMCPUpstream(t)
	s := apptest.AuthServer(t, "sqlite:"+t.TempDir()+"/i.db", gatewayConfig(up, "300ms", ""))
	cs := gatewayClient(t, s, apptest.TokenOf("agentbot"), "2025-11-25", nil)
	call := func(raw string) *mcp.CallToolResult {
		res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "orders__refund", Arguments: json.RawMessage(raw)})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	a := call(`{"order": 5, "amount": 2}`)
	b := call(`{"amount":2,"order":5}`)
	if approval(a)["status"] != "PENDING" || approval(b)["runId"] != approval(a)["runId"] {
		t.Fatalf("the same arguments in another key order = %v, then %v: want the same request (docs: the order of keys does not matter); %d requests wait",
			approval(a), approval(b), suspendedCount(t, s))
	}
}
