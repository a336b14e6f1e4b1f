package app_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"interlock/internal/apptest"
)

// gatewayOnly is a config with only the gateway (authentication off: every call acts for
// the anonymous principal): orders re-exposed, refund gated.
func gatewayOnly(t *testing.T, up *apptest.MCPUpstream, wait string) string {
	return apptest.WriteConfig(t, fmt.Sprintf(`mcpServers:
  - name: orders
    url: %s
    requireApproval: [refund]
mcpGateway:
  agentId: mcp-gateway
  servers: [orders]
  wait: %s
  progressInterval: 200ms
`, up.URL, wait))
}

// TestMCPGatewayRetriesRaceOverTwoInstances: after a person approves a call, 20 identical
// calls from sessionless clients (whose thread is the client and principal, the same on both
// instances) race over two instances on one MariaDB: the upstream runs once, and each call
// gets the one execution's result or, once that was given, the pending answer of the one new
// request — never an error.
func TestMCPGatewayRetriesRaceOverTwoInstances(t *testing.T) {
	t.Parallel()
	up := apptest.NewMCPUpstream(t)
	a, b := twoInstances(t, "--config", gatewayOnly(t, up, "2s"))
	ca := gatewayClient(t, a.Server, "-", "2026-07-28", nil)
	cb := gatewayClient(t, b.Server, "-", "2026-07-28", nil)
	args := map[string]any{"order": 77, "amount": 12.5}
	first := callTool(t, ca, "orders__refund", args, 30*time.Second, nil)
	id, _ := approval(first)["runId"].(string)
	if approval(first)["status"] != "PENDING" || id == "" {
		t.Fatalf("first call = %v, want PENDING", approval(first))
	}
	var out struct{ ApproveToolCall struct{ ID string } }
	b.Must(t, `mutation($id: ID!) { approveToolCall(runId: $id) { id } }`, map[string]any{"id": id}, &out)

	var wg sync.WaitGroup
	var mu sync.Mutex
	results, pending := 0, map[any]int{}
	for i := range 20 {
		cs := ca
		if i%2 == 1 {
			cs = cb
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			res := callTool(t, cs, "orders__refund", args, 60*time.Second, nil)
			mu.Lock()
			defer mu.Unlock()
			switch m := approval(res); {
			case !res.IsError && m["status"] == "APPROVED" && m["runId"] == id:
				results++
			case !res.IsError && m["status"] == "PENDING" && m["runId"] != id:
				pending[m["runId"]]++
			default:
				t.Errorf("a racing retry got %+v %q", res, resultText(res))
			}
		}()
	}
	wg.Wait()
	if n := len(up.Calls("refund")); n != 1 {
		t.Fatalf("the upstream ran refund %d times, want 1", n)
	}
	if results == 0 || len(pending) > 1 {
		t.Fatalf("%d results and pending answers on %d new requests (%v); want at least one result and at most one new request", results, len(pending), pending)
	}
	t.Logf("20 racing retries: %d got the result, %d the pending answer of one new request", results, 20-results)
}

// TestMCPGatewayInstanceDiesMidCall: the instance running an approved call dies while the
// upstream holds it; the other instance takes the run over and leaves the call interrupted for
// a person — the upstream is never sent it again — and an identical call finds that request.
func TestMCPGatewayInstanceDiesMidCall(t *testing.T) {
	t.Parallel()
	up := apptest.NewMCPUpstream(t)
	up.Hold = make(chan struct{})
	t.Cleanup(func() { close(up.Hold) })
	a, b := twoInstances(t, "--lease-ttl", "2s", "--config", gatewayOnly(t, up, "1s"))
	ca := gatewayClient(t, a.Server, "-", "2026-07-28", nil)
	args := map[string]any{"order": 5, "amount": 1}
	first := callTool(t, ca, "orders__refund", args, 30*time.Second, nil)
	id, _ := approval(first)["runId"].(string)
	var out struct{ ApproveToolCall struct{ ID string } }
	a.Must(t, `mutation($id: ID!) { approveToolCall(runId: $id) { id } }`, map[string]any{"id": id}, &out)
	select {
	case <-up.Started():
	case <-time.After(30 * time.Second):
		t.Fatal("the approved call never reached the upstream")
	}
	a.Kill9(t)
	apptest.Until(t, "the other instance holds the call interrupted", func() bool {
		var out struct {
			SuspendedRuns struct{ Runs []apptest.Run }
		}
		b.Must(t, `{ suspendedRuns(agentId: "mcp-gateway") { runs { runId toolCalls { interrupted } } } }`, nil, &out)
		r := out.SuspendedRuns.Runs
		return len(r) == 1 && r[0].RunID == id && r[0].ToolCalls[0].Interrupted
	})
	cb := gatewayClient(t, b.Server, "-", "2026-07-28", nil)
	res := callTool(t, cb, "orders__refund", args, 30*time.Second, nil)
	if res.IsError || approval(res)["status"] != "PENDING" || approval(res)["runId"] != id {
		t.Fatalf("the identical call on the other instance = %+v %v, want PENDING on %s", res, approval(res), id)
	}
	time.Sleep(3 * time.Second) // long past another lease: nothing sends it again
	if n := len(up.Calls("refund")); n != 1 {
		t.Fatalf("the upstream got refund %d times, want 1 (never re-sent without a person)", n)
	}
}
