package app_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"interlock/internal/apptest"
)

// suspendedCount is how many runs of the gateway's agent wait in suspendedRuns.
func suspendedCount(t *testing.T, s *apptest.Server) int {
	t.Helper()
	var data struct {
		SuspendedRuns struct{ Runs []struct{ ID string } }
	}
	s.MustAs(t, apptest.TokenOf("alice"), `{ suspendedRuns(agentId: "mcp-gateway") { runs { id } } }`, nil, &data)
	return len(data.SuspendedRuns.Runs)
}

// TestMCPGatewayHeldCallsCountAgainstTheConnectionCap: a held tools/call holds a request open
// on the instance as a held /approvals?wait= does, so --max-connections-per-principal bounds
// how many one principal holds at once: with a cap of 2, a third held call is refused at
// once rather than held.
func TestMCPGatewayHeldCallsCountAgainstTheConnectionCap(t *testing.T) {
	t.Parallel()
	up := apptest.NewMCPUpstream(t)
	s := apptest.AuthServerWith(t, "sqlite:"+t.TempDir()+"/i.db", gatewayConfig(up, "10s", ""), "--max-connections-per-principal", "2")
	cs := gatewayClient(t, s, apptest.TokenOf("agentbot"), "2025-11-25", nil)
	for i := range 2 {
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			_, _ = cs.CallTool(ctx, &mcp.CallToolParams{Name: "orders__refund", Arguments: map[string]any{"order": i, "amount": 1}})
		}()
	}
	apptest.Until(t, "two held calls", func() bool { return suspendedCount(t, s) == 2 })

	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "orders__refund", Arguments: map[string]any{"order": 3, "amount": 1}})
	if errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil {
		t.Fatalf("a third held call with --max-connections-per-principal 2 was held (%d requests waiting): the gateway takes no connection slot", suspendedCount(t, s))
	}
	if err == nil && !res.IsError {
		t.Fatalf("a third call over the cap = %+v %q, want a refusal", res, resultText(res))
	}
}

// TestMCPGatewayCallsTakeTheMutationRate: each tools/call stores a request (a run), as a POST
// /approvals does, so it takes a token of --mutation-rate: with a burst of 2 and a rate of one
// an hour, the third call is refused rather than stored.
func TestMCPGatewayCallsTakeTheMutationRate(t *testing.T) {
	t.Parallel()
	up := apptest.NewMCPUpstream(t)
	s := apptest.AuthServerWith(t, "sqlite:"+t.TempDir()+"/i.db", gatewayConfig(up, "30s", ""), "--mutation-rate", "1/h", "--mutation-burst", "2")
	cs := gatewayClient(t, s, apptest.TokenOf("agentbot"), "2025-11-25", nil)
	stored := 0
	for i := range 5 {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "orders__lookup", Arguments: map[string]any{"order": i}})
		cancel()
		if err == nil && !res.IsError {
			stored++
		}
	}
	if stored > 2 {
		t.Fatalf("%d of 5 calls were stored and run with --mutation-rate 1/h and a burst of 2 (the upstream ran lookup %d times): /mcp takes no mutation token",
			stored, len(up.Calls("lookup")))
	}
}
