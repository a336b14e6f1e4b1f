package tools_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"interlock/tools"
)

// ordersServer is a small MCP server with the tools the tests call; calls counts lookups.
func ordersServer(calls *atomic.Int64) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "orders", Version: "1"}, nil)
	type lookupIn struct {
		OrderID string `json:"orderId" jsonschema:"the order number"`
	}
	type lookupOut struct {
		OrderID string `json:"orderId"`
		Status  string `json:"status"`
	}
	mcp.AddTool(s, &mcp.Tool{Name: "lookup_order", Description: "Look up an order"},
		func(ctx context.Context, _ *mcp.CallToolRequest, in lookupIn) (*mcp.CallToolResult, lookupOut, error) {
			if calls != nil {
				calls.Add(1)
			}
			if in.OrderID == "missing" {
				return nil, lookupOut{}, errors.New("no order missing")
			}
			return nil, lookupOut{OrderID: in.OrderID, Status: "shipped"}, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "cancel_order", Description: "Cancel an order"},
		func(ctx context.Context, _ *mcp.CallToolRequest, in lookupIn) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "cancelled " + in.OrderID}}}, nil, nil
		})
	return s
}

// TestMain lets the test binary be a stdio MCP server, for the stdio transport's test.
func TestMain(m *testing.M) {
	if os.Getenv("INTERLOCK_TEST_MCP_STDIO") == "1" {
		if err := ordersServer(nil).Run(context.Background(), &mcp.StdioTransport{}); err != nil {
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func checkOrdersServer(t *testing.T, srv *tools.MCPServer) {
	t.Helper()
	list, err := srv.Tools(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	names := []string{}
	for _, tl := range list {
		names = append(names, tl.Name)
		if tl.Name == "lookup_order" && !strings.Contains(string(tl.InputSchema), `"orderId"`) {
			t.Fatalf("lookup_order schema %s", tl.InputSchema)
		}
	}
	if strings.Join(names, ",") != "cancel_order,lookup_order" {
		t.Fatalf("tools %v", names)
	}
	v, err := srv.Execute("lookup_order")(context.Background(), call(`{"orderId":"7"}`))
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := json.Marshal(v); string(b) != `{"orderId":"7","status":"shipped"}` {
		t.Fatalf("result %s", b)
	}
	v, err = srv.Execute("cancel_order")(context.Background(), call(`{"orderId":"8"}`))
	if err != nil || v != "cancelled 8" {
		t.Fatalf("cancel: %v, %v", v, err)
	}
	_, err = srv.Execute("lookup_order")(context.Background(), call(`{"orderId":"missing"}`))
	if err == nil || !strings.Contains(err.Error(), "no order missing") {
		t.Fatalf("error %v, want the tool's error text", err)
	}
	_, err = srv.Execute("no_such_tool")(context.Background(), call(`{}`))
	if err == nil {
		t.Fatal("an unknown tool answered")
	}
}

func TestMCPStreamableHTTP(t *testing.T) {
	var calls atomic.Int64
	h := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return ordersServer(&calls) }, nil))
	defer h.Close()
	srv, err := tools.ConnectMCP(context.Background(), tools.MCPConfig{Name: "orders", URL: h.URL}, "test")
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	checkOrdersServer(t, srv)
	if calls.Load() != 2 {
		t.Fatalf("%d lookups reached the server, want 2", calls.Load())
	}
}

func TestMCPStdio(t *testing.T) {
	t.Setenv("INTERLOCK_TEST_MCP_STDIO", "1")
	srv, err := tools.ConnectMCP(context.Background(), tools.MCPConfig{Name: "orders", Command: []string{os.Args[0]}}, "test")
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	checkOrdersServer(t, srv)
}

func TestMCPUnreachable(t *testing.T) {
	_, err := tools.ConnectMCP(context.Background(), tools.MCPConfig{Name: "orders", Command: []string{"/nonexistent/orders-mcp"}}, "test")
	if err == nil || !strings.Contains(err.Error(), "MCP server orders") {
		t.Fatalf("error %v", err)
	}
}
