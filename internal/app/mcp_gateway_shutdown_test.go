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
	// Without the client's standing GET stream: the stopping server ends it (a client would
	// open it again elsewhere), and the Go SDK's client, told not to retry, fails the session's
	// calls with it — the answer under test is the held call's own, on its POST.
	c := mcp.NewClient(&mcp.Implementation{Name: "shutdown-test", Version: "1"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(context.Context, *mcp.ProgressNotificationClientRequest) { beats.Add(1) }})
	cs, err := c.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: p.URL + "/mcp", MaxRetries: -1, DisableStandaloneSSE: true},
		&mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
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
