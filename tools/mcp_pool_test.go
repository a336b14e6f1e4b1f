package tools_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"interlock/tools"
)

// sessionCounter is a url MCP server that counts the sessions opened (the session ids its
// requests carry, from the initialized notification on) and closed (DELETE) with it; its hold
// tool waits until release is closed, counting the calls that arrived.
type sessionCounter struct {
	url            string
	opened, closed atomic.Int64
	arrived        atomic.Int64
	seen           sync.Map // the session ids seen
	release        chan struct{}
	releaseOnce    sync.Once
}

func newSessionCounter(t *testing.T) *sessionCounter {
	c := &sessionCounter{release: make(chan struct{})}
	s := ordersServer(nil)
	s.AddTool(&mcp.Tool{Name: "hold", InputSchema: json.RawMessage(`{"type":"object"}`)}, func(ctx context.Context, _ *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		c.arrived.Add(1)
		select {
		case <-c.release:
		case <-ctx.Done():
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "held"}}}, nil
	})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get("Mcp-Session-Id")
		switch {
		case r.Method == http.MethodDelete:
			c.closed.Add(1)
		case id != "":
			if _, seen := c.seen.LoadOrStore(id, true); !seen {
				c.opened.Add(1)
			}
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	t.Cleanup(func() { c.releaseOnce.Do(func() { close(c.release) }) })
	c.url = hs.URL
	return c
}

// TestMCPPoolReusesIdleSessionsAndClosesThem: calls made one after another on a url server reuse
// the one idle session (the one ConnectMCP opened); a session idle for IdleTimeout is closed,
// and the next call opens a new one.
func TestMCPPoolReusesIdleSessionsAndClosesThem(t *testing.T) {
	t.Parallel()
	c := newSessionCounter(t)
	srv, err := tools.ConnectMCP(context.Background(), tools.MCPConfig{Name: "orders", URL: c.url, IdleTimeout: 300 * time.Millisecond}, "test")
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	for range 3 {
		if _, err := srv.Execute("lookup_order")(context.Background(), call(`{"orderId":"7"}`)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := srv.Tools(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Calls keep the session in use, so it can only have been closed once idle for 300 ms after
	// the last of them: opened once means it was reused.
	if n := c.opened.Load(); n != 1 {
		t.Fatalf("%d sessions opened for three calls made one after another, want the one reused", n)
	}
	eventually(t, "the idle session closed", func() bool { return c.closed.Load() == 1 })
	if _, err := srv.Execute("lookup_order")(context.Background(), call(`{"orderId":"8"}`)); err != nil {
		t.Fatal(err)
	}
	if n := c.opened.Load(); n != 2 {
		t.Fatalf("%d sessions opened, want a new one after the idle one was closed", n)
	}
}

// TestMCPPoolOneSessionPerCallUpToTheCap: calls in flight at once each have a session of their
// own, up to MaxSessions; a call beyond them waits for one to come free, and takes it.
func TestMCPPoolOneSessionPerCallUpToTheCap(t *testing.T) {
	t.Parallel()
	c := newSessionCounter(t)
	srv, err := tools.ConnectMCP(context.Background(), tools.MCPConfig{Name: "orders", URL: c.url, MaxSessions: 2}, "test")
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	var wg sync.WaitGroup
	outs, errs := make([]any, 3), make([]error, 3)
	for i := range 2 {
		wg.Go(func() { outs[i], errs[i] = srv.Execute("hold")(context.Background(), call(`{}`)) })
	}
	eventually(t, "both calls arriving", func() bool { return c.arrived.Load() == 2 })
	if n := c.opened.Load(); n != 2 {
		t.Fatalf("%d sessions opened for two calls in flight, want one each", n)
	}
	wg.Go(func() { outs[2], errs[2] = srv.Execute("hold")(context.Background(), call(`{}`)) })
	c.releaseOnce.Do(func() { close(c.release) })
	wg.Wait()
	for i := range 3 {
		if errs[i] != nil || outs[i] != "held" {
			t.Fatalf("call %d: %v, %v", i, outs[i], errs[i])
		}
	}
	if n := c.opened.Load(); n != 2 {
		t.Fatalf("%d sessions opened with MaxSessions 2, want the third call to wait for one", n)
	}
}
