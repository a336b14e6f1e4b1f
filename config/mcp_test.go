package config_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"interlock/agent"
	"interlock/llm"
)

// TestMain lets the test binary be a stdio MCP server with one tool, environ, that answers its
// environment: what a server's get-env tool would hand the model.
func TestMain(m *testing.M) {
	if os.Getenv("INTERLOCK_TEST_MCP_MUTE") == "1" {
		select {} // a server that never answers initialize
	}
	if os.Getenv("INTERLOCK_TEST_MCP_ENV_SERVER") == "1" {
		s := mcp.NewServer(&mcp.Implementation{Name: "env", Version: "1"}, nil)
		mcp.AddTool(s, &mcp.Tool{Name: "environ", Description: "The server's environment"},
			func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.Join(os.Environ(), "\n")}}}, nil, nil
			})
		if err := s.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// fileServer is a streamable HTTP MCP server listing read_file and write_file.
func fileServer(t *testing.T) *httptest.Server {
	t.Helper()
	s := mcp.NewServer(&mcp.Implementation{Name: "files", Version: "1"}, nil)
	for _, name := range []string{"write_file", "read_file"} {
		mcp.AddTool(s, &mcp.Tool{Name: name, Description: "does " + name},
			func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done"}}}, nil, nil
			})
	}
	h := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	t.Cleanup(h.Close) // after the sessions close (cleanups run last first)
	return h
}

// TestBuildRequireApprovalNamesListedTools: each requireApproval name must be a tool the server
// lists, or "*": a misspelt name would leave the tool it meant ungated and its calls would run
// with nobody asked, so the server does not start, and the error says where and what the
// server lists.
func TestBuildRequireApprovalNamesListedTools(t *testing.T) {
	h := fileServer(t)
	cfg := func(requireApproval string) string {
		return "agents:\n  - id: a\n    model: {provider: demo}\n    tools: [read_file, write_file, write]\n" +
			"tools:\n  - name: write\n    mcp: {server: orders-mcp, tool: write_file}\n" +
			"mcpServers:\n  - name: orders-mcp\n    url: " + h.URL + "\n    requireApproval: " + requireApproval + "\n"
	}
	_, err := build(t, cfg("[read_file, write-file]"))
	want := `test.yaml: mcpServers[0].requireApproval[1]: "write-file" is not a tool orders-mcp lists (it lists: read_file, write_file)`
	if err == nil || err.Error() != want {
		t.Fatalf("error %v\nwant %s", err, want)
	}
	gated := func(a *agent.Agent) string {
		var names []string
		for _, tl := range a.Tools {
			if tl.RequireApproval {
				names = append(names, tl.Name)
			}
		}
		return strings.Join(names, ",")
	}
	for requireApproval, want := range map[string]string{
		`["*"]`:        "read_file,write_file,write",
		`[write_file]`: "write_file,write",
		`[]`:           "",
	} {
		a, err := build(t, cfg(requireApproval))
		if err != nil {
			t.Fatalf("requireApproval: %s: %v", requireApproval, err)
		}
		if got := gated(a.List[0]); got != want {
			t.Fatalf("requireApproval: %s gates %q, want %q", requireApproval, got, want)
		}
	}
}

// TestBuildMCPStdioEnvironment: a stdio server sees PATH, HOME and the locale of Interlock's
// environment and what its env: gives it (${VAR} read at start), nothing else: not the model's
// API key, not another tool's secret.
func TestBuildMCPStdioEnvironment(t *testing.T) {
	t.Setenv("INTERLOCK_TEST_SECRET", "sk-must-not-leak")
	t.Setenv("INTERLOCK_TEST_ORDERS_TOKEN", "tok-1")
	t.Setenv("LC_MESSAGES", "C")
	a, err := build(t, fmt.Sprintf(`
agents:
  - id: a
    model: {provider: demo}
    tools: [environ]
mcpServers:
  - name: env
    command: [%q]
    env:
      INTERLOCK_TEST_MCP_ENV_SERVER: "1"
      ORDERS_TOKEN: "Bearer ${INTERLOCK_TEST_ORDERS_TOKEN}"
`, os.Args[0]))
	if err != nil {
		t.Fatal(err)
	}
	v, err := a.List[0].Tool("environ").ExecuteFunc(context.Background(), emptyCall)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, kv := range strings.Split(v.(string), "\n") {
		k, val, _ := strings.Cut(kv, "=")
		got[k] = val
	}
	delete(got, "GOCOVERDIR") // go test -cover gives it to the binary it runs
	want := map[string]string{"INTERLOCK_TEST_MCP_ENV_SERVER": "1", "ORDERS_TOKEN": "Bearer tok-1", "LC_MESSAGES": "C"}
	for _, kv := range os.Environ() { // the documented few of the test's own environment
		k, val, _ := strings.Cut(kv, "=")
		if _, given := want[k]; !given && (k == "PATH" || k == "HOME" || k == "LANG" || k == "LANGUAGE" || k == "TZ" || strings.HasPrefix(k, "LC_")) {
			want[k] = val
		}
	}
	if !maps.Equal(got, want) {
		t.Fatalf("the stdio server's environment is\n%v\nwant exactly\n%v", got, want)
	}
}

// TestBuildMCPHeaders: a url server's headers: (${VAR} read at start) reach it with every
// request.
func TestBuildMCPHeaders(t *testing.T) {
	t.Setenv("INTERLOCK_TEST_MCP_TOKEN", "tok-2")
	s := mcp.NewServer(&mcp.Implementation{Name: "orders", Version: "1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "lookup_order"},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "shipped"}}}, nil, nil
		})
	mcpHandler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
	var mu sync.Mutex
	var auths []string
	h := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		auths = append(auths, r.Method+" "+r.Header.Get("Authorization"))
		mu.Unlock()
		mcpHandler.ServeHTTP(w, r)
	}))
	t.Cleanup(h.Close)
	a, err := build(t, "agents:\n  - id: a\n    model: {provider: demo}\n    tools: [lookup_order]\n"+
		"mcpServers:\n  - name: orders\n    url: "+h.URL+"\n    headers: {Authorization: 'Bearer ${INTERLOCK_TEST_MCP_TOKEN}'}\n")
	if err != nil {
		t.Fatal(err)
	}
	if v, err := a.List[0].Tool("lookup_order").ExecuteFunc(context.Background(), emptyCall); err != nil || v != "shipped" {
		t.Fatalf("call: %v, %v", v, err)
	}
	a.Close()
	mu.Lock()
	defer mu.Unlock()
	if len(auths) < 4 { // initialize, initialized, tools/list, tools/call, then DELETE
		t.Fatalf("requests %q", auths)
	}
	for _, got := range auths {
		if !strings.HasSuffix(got, " Bearer tok-2") {
			t.Fatalf("a request came with %q; all: %q", got, auths)
		}
	}
}

// emptyCall is a call of a tool that takes no arguments.
var emptyCall = &agent.Call{ToolCall: llm.ToolCall{Args: json.RawMessage(`{}`)}}

// TestBuildMCPStartTimeout: mcpServers[].startTimeout bounds the start of a server that never
// answers initialize; the start stops with an error naming the server (it hung for ever).
func TestBuildMCPStartTimeout(t *testing.T) {
	yaml := "agents:\n  - id: a\n    model: {provider: demo}\n" +
		"mcpServers:\n  - name: mute\n    command: [" + os.Args[0] + "]\n    startTimeout: 300ms\n" +
		"    env:\n      INTERLOCK_TEST_MCP_MUTE: \"1\"\n"
	done := make(chan error, 1)
	go func() {
		_, err := build(t, yaml)
		done <- err
	}()
	select {
	case err := <-done:
		want := "test.yaml: mcpServers[0]: MCP server mute did not answer initialize within 300ms (mcpServers[].startTimeout)"
		if err == nil || err.Error() != want {
			t.Fatalf("error %v\nwant %s", err, want)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the start still waits for a server that never answers")
	}
}

// TestBuildRefusesMCPToolNamesWithHiddenCharacters: an MCP server listing a tool whose name holds
// a bidi override (the name a person reads is not the name that runs) stops the start, naming the
// server and the character — unless tools: leaves that tool out.
func TestBuildRefusesMCPToolNamesWithHiddenCharacters(t *testing.T) {
	s := mcp.NewServer(&mcp.Implementation{Name: "files", Version: "1"}, nil)
	for _, name := range []string{"read_file", "delete_all\u202eelif_daer"} {
		mcp.AddTool(s, &mcp.Tool{Name: name, Description: "does " + name},
			func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done"}}}, nil, nil
			})
	}
	h := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	t.Cleanup(h.Close)
	cfg := func(only string) string {
		return "agents:\n  - id: a\n    model: {provider: demo}\n    tools: [read_file]\n" +
			"mcpServers:\n  - name: files\n    url: " + h.URL + "\n" + only
	}
	_, err := build(t, cfg(""))
	if err == nil || !strings.Contains(err.Error(), `mcpServers[0]: its tool "delete_all\u202eelif_daer" has U+202E RIGHT-TO-LEFT OVERRIDE in its name`) {
		t.Fatalf("error %v", err)
	}
	if _, err := build(t, cfg("    tools: [read_file]\n")); err != nil {
		t.Fatalf("with tools: [read_file]: %v", err)
	}
}
