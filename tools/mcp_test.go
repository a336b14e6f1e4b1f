package tools_test

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
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
	mcp.AddTool(s, &mcp.Tool{Name: "environ", Description: "The server's environment, one VAR=value a line"},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.Join(os.Environ(), "\n")}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "cancel_order", Description: "Cancel an order"},
		func(ctx context.Context, _ *mcp.CallToolRequest, in lookupIn) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "cancelled " + in.OrderID}}}, nil, nil
		})
	return s
}

// TestMain lets the test binary be a stdio MCP server, for the stdio transport's test.
func TestMain(m *testing.M) {
	switch os.Getenv("INTERLOCK_TEST_MCP_STDIO") {
	case "1":
		if err := ordersServer(nil).Run(context.Background(), &mcp.StdioTransport{}); err != nil {
			os.Exit(1)
		}
		os.Exit(0)
	case "fault":
		runFaultServer()
	case "asker2":
		// Of a protocol before 2026-07-28, which asks in the middle of a call.
		if err := midCallMCPServer(2, "2025-11-25").Run(context.Background(), &mcp.StdioTransport{}); err != nil {
			os.Exit(1)
		}
		os.Exit(0)
	case "mute":
		if f := os.Getenv("INTERLOCK_TEST_MCP_PIDFILE"); f != "" {
			os.WriteFile(f, []byte(strconv.Itoa(os.Getpid())), 0o600)
		}
		select {} // started, never answers initialize
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
	if strings.Join(names, ",") != "cancel_order,environ,lookup_order" {
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
	t.Parallel()
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

// stdioOrders is the test binary as a stdio MCP server (see TestMain), told so by env:, which
// is the only way a variable of the test's own environment would reach it.
func stdioOrders(env map[string]string) tools.MCPConfig {
	all := map[string]string{"INTERLOCK_TEST_MCP_STDIO": "1"}
	maps.Copy(all, env)
	return tools.MCPConfig{Name: "orders", Command: []string{os.Args[0]}, Env: all}
}

func TestMCPStdio(t *testing.T) {
	t.Parallel()
	srv, err := tools.ConnectMCP(context.Background(), stdioOrders(nil), "test")
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	checkOrdersServer(t, srv)
}

func TestMCPUnreachable(t *testing.T) {
	t.Parallel()
	_, err := tools.ConnectMCP(context.Background(), tools.MCPConfig{Name: "orders", Command: []string{"/nonexistent/orders-mcp"}}, "test")
	if err == nil || !strings.Contains(err.Error(), "MCP server orders") {
		t.Fatalf("error %v", err)
	}
}

// TestMCPStdioEnvironment: a stdio server is started with PATH, HOME and the locale of
// Interlock's environment and the variables its config gives it, and nothing else: a secret in
// Interlock's environment never reaches a tool that reads the environment (and so never the
// model or the stored events).
func TestMCPStdioEnvironment(t *testing.T) {
	t.Setenv("INTERLOCK_TEST_SECRET", "sk-must-not-leak")
	t.Setenv("OPENAI_API_KEY", "sk-must-not-leak-either")
	t.Setenv("LC_TIME", "C")
	t.Setenv("TZ", "UTC")
	t.Setenv("LANG", "C.UTF-8")
	srv, err := tools.ConnectMCP(context.Background(), stdioOrders(map[string]string{"ORDERS_TOKEN": "tok-1", "LANG": "en_GB.UTF-8"}), "test")
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	v, err := srv.Execute("environ")(context.Background(), call(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, kv := range strings.Split(v.(string), "\n") {
		k, val, _ := strings.Cut(kv, "=")
		got[k] = val
	}
	want := map[string]string{
		"INTERLOCK_TEST_MCP_STDIO": "1", "ORDERS_TOKEN": "tok-1",
		"LANG":    "en_GB.UTF-8", // env: wins over Interlock's own
		"LC_TIME": "C", "TZ": "UTC",
	}
	for _, kv := range os.Environ() { // the documented few of the test's own environment
		k, val, _ := strings.Cut(kv, "=")
		if _, given := want[k]; !given && (k == "PATH" || k == "HOME" || k == "LANG" || k == "LANGUAGE" || k == "TZ" || strings.HasPrefix(k, "LC_")) {
			want[k] = val
		}
	}
	// A test binary built with -cover is given GOCOVERDIR by go test: the server's own
	// coverage, not Interlock passing it on.
	delete(got, "GOCOVERDIR")
	if !maps.Equal(got, want) {
		t.Fatalf("the stdio server's environment is\n%v\nwant exactly\n%v", got, want)
	}
}

// TestMCPHeadersOnEveryRequest: a url server's headers go with every request: the initialize,
// each call, the new session after the server forgot the old one, and the session's end.
func TestMCPHeadersOnEveryRequest(t *testing.T) {
	t.Parallel()
	var handler atomic.Pointer[http.Handler]
	restart := func() {
		h := http.Handler(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return ordersServer(nil) }, nil))
		handler.Store(&h)
	}
	restart()
	var mu sync.Mutex
	var seen []string
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Method+" "+r.Header.Get("Authorization")+" "+r.Header.Get("X-Tenant")+" "+r.Header.Get("Content-Type"))
		mu.Unlock()
		(*handler.Load()).ServeHTTP(w, r)
	}))
	defer hs.Close()
	srv, err := tools.ConnectMCP(context.Background(), tools.MCPConfig{Name: "orders", URL: hs.URL,
		Headers: map[string]string{"Authorization": "Bearer tok-1", "X-Tenant": "acme", "Content-Type": "text/plain"}}, "test")
	if err != nil {
		t.Fatal(err)
	}
	lookup := srv.Execute("lookup_order")
	if _, err := lookup(context.Background(), call(`{"orderId":"7"}`)); err != nil {
		t.Fatal(err)
	}
	restart() // the server no longer knows the session: the next call opens a new one
	if _, err := lookup(context.Background(), call(`{"orderId":"8"}`)); err != nil {
		t.Fatal(err)
	}
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	posts, deletes := 0, 0
	for _, s := range seen {
		method, rest, _ := strings.Cut(s, " ")
		switch method {
		case "POST":
			posts++
			// Content-Type stays what the protocol needs.
			if rest != "Bearer tok-1 acme application/json" {
				t.Errorf("a POST came with %q", rest)
			}
		case "DELETE":
			deletes++
			if !strings.HasPrefix(rest, "Bearer tok-1 acme") {
				t.Errorf("a DELETE came with %q", rest)
			}
		}
	}
	// initialize, initialized, a call; the call the restarted server refuses; initialize,
	// initialized, the call again.
	if posts < 7 || deletes < 1 {
		t.Fatalf("%d POSTs and %d DELETEs, want at least 7 and 1: %q", posts, deletes, seen)
	}
}
