package app_test

import (
	"encoding/json"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"interlock/internal/apptest"
)

// TestMCPGatewayKeyOrderIsPartOfTheCall: a call's arguments are kept byte for byte as a person
// approves them (key order and number literals included; spacing is not kept), so the same call
// with its spacing changed joins the waiting request, and the same values in another key order
// are another request, answered as one — never refused as a reused key (docs/mcp-gateway.md,
// Calling again).
func TestMCPGatewayKeyOrderIsPartOfTheCall(t *testing.T) {
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
	spaced := call(`{ "order":5,"amount" : 2 }`)
	b := call(`{"amount":2,"order":5}`)
	if approval(a)["status"] != "PENDING" || approval(spaced)["runId"] != approval(a)["runId"] {
		t.Fatalf("the same call with other spacing = %v, then %v: want the same request", approval(a), approval(spaced))
	}
	if b.IsError || approval(b)["status"] != "PENDING" || approval(b)["runId"] == approval(a)["runId"] {
		t.Fatalf("the same values in another key order = %+v %v: want another request, pending", b, approval(b))
	}
}

// TestMCPGatewayClientVersionDoesNotBreakTheRetry: a sessionless client's call is identified by
// its principal, its name (the thread), the tool and the arguments — not its version — so the
// same call from the same client after it was upgraded (its clientInfo.version changed) is the
// same call: it joins the request, and is not refused. (The version goes into the request's
// context, which the idempotency key's request hash covers.)
func TestMCPGatewayClientVersionDoesNotBreakTheRetry(t *testing.T) {
	t.Parallel()
	up := apptest.NewMCPUpstream(t)
	s := apptest.AuthServer(t, "sqlite:"+t.TempDir()+"/i.db", gatewayConfig(up, "300ms", ""))
	connect := func(version string) *mcp.ClientSession {
		c := mcp.NewClient(&mcp.Implementation{Name: "claude-code", Version: version}, nil)
		cs, err := c.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: s.URL + "/mcp", HTTPClient: bearer(apptest.TokenOf("agentbot")), MaxRetries: -1},
			&mcp.ClientSessionOptions{ProtocolVersion: "2026-07-28"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cs.Close() })
		return cs
	}
	args := map[string]any{"order": 8, "amount": 3}
	first, err := connect("2.0.1").CallTool(t.Context(), &mcp.CallToolParams{Name: "orders__refund", Arguments: args})
	if err != nil || approval(first)["status"] != "PENDING" {
		t.Fatalf("first call = %v %v", first, err)
	}
	upgraded := connect("2.0.2")
	again, err := upgraded.CallTool(t.Context(), &mcp.CallToolParams{Name: "orders__refund", Arguments: args})
	if err != nil {
		t.Fatal(err)
	}
	if again.IsError || approval(again)["runId"] != approval(first)["runId"] {
		t.Errorf("the same call from the upgraded client = isError %v %q %v; want it to join run %v",
			again.IsError, resultText(again), approval(again), approval(first)["runId"])
	}
	// Decided and run: the upgraded client still cannot get the outcome, nor make the call
	// anew — the key stays with the old run until a client of the old version is answered.
	decide(t, s, "alice", approval(first)["runId"].(string), `approveToolCall(runId: $id) { id }`)
	apptest.Until(t, "the approved refund runs", func() bool { return len(up.Calls("refund")) == 1 })
	after, err := upgraded.CallTool(t.Context(), &mcp.CallToolParams{Name: "orders__refund", Arguments: args})
	if err != nil {
		t.Fatal(err)
	}
	if after.IsError {
		t.Errorf("the upgraded client's call after the approval = %q: refused until the old run's key is released", resultText(after))
	}
}
