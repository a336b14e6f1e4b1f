package app_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"interlock/internal/apptest"
)

// TestMCPGatewayHeldCallIsAnsweredOnShutdown: an instance that stops gracefully (SIGTERM, a
// rolling deploy) answers the calls it holds — pending, so that the client calls again and
// reaches another instance, which finds the same request — instead of cutting them with no
// answer, which a client reports as a failed tool call.
func TestMCPGatewayHeldCallIsAnsweredOnShutdown(t *testing.T) {
	t.Parallel()
	up := apptest.NewMCPUpstream(t)
	p := apptest.StartProc(t, "sqlite:"+t.TempDir()+"/i.db", "--shutdown-timeout", "5s", "--config", gatewayOnly(t, up, "30s"))
	var beats atomic.Int64
	cs := gatewayClient(t, p.Server, "-", "2025-11-25", func(*mcp.ProgressNotificationClientRequest) { beats.Add(1) })
	type answer struct {
		res *mcp.CallToolResult
		err error
	}
	answered := make(chan answer, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
		defer cancel()
		params := &mcp.CallToolParams{Name: "orders__refund", Arguments: map[string]any{"order": 1, "amount": 1}}
		params.SetProgressToken("s-1")
		res, err := cs.CallTool(ctx, params)
		answered <- answer{res, err}
	}()
	apptest.Until(t, "the held call's first progress", func() bool { return beats.Load() > 0 })
	p.Terminate()
	select {
	case a := <-answered:
		if a.err != nil {
			t.Fatalf("the held call on SIGTERM: %v; want the pending answer", a.err)
		}
		if a.res.IsError || approval(a.res)["status"] != "PENDING" {
			t.Fatalf("the held call on SIGTERM = isError %v %q %v; want the pending answer", a.res.IsError, resultText(a.res), approval(a.res))
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the held call got no answer within 20s of SIGTERM")
	}
}
