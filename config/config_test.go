package config_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"interlock/config"
)

func TestExampleConfigIsValid(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "sk-example")
	t.Setenv("REFUND_TOKEN", "example")
	f, err := config.Load("../examples/interlock.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Agents) != 2 || f.Agents[0].Model.BaseURL != "http://127.0.0.1:11434/v1" || f.Tools[0].HTTP.Timeout.String() != "10s" {
		t.Fatalf("read %+v", f.Agents[0])
	}
}

// TestConfigErrorsNameThePath: each mistake is reported with the file, where in it, and what
// is wrong.
func TestConfigErrorsNameThePath(t *testing.T) {
	const agentOK = "agents:\n  - id: a\n    model: {provider: demo}\n"
	for _, tc := range []struct {
		name, yaml string
		want       []string
	}{
		{"bad YAML", "agents:\n  - id: a\n   model: [", []string{"bad.yaml: line "}},
		{"unknown key", "agents:\n  - id: a\n    modle: {provider: demo}\n", []string{"line 3", "unknown field \"modle\""}},
		{"tools but no agents", "tools: [{name: t, http: {url: 'http://127.0.0.1:1/t'}}]\n", []string{"agents: at least one agent is required to use tools"}},
		{"missing model", "agents:\n  - id: a\n", []string{"agents[0].model: is required"}},
		{"missing model name", "agents:\n  - id: a\n    model: {provider: openai}\n", []string{"agents[0].model.name: is required"}},
		{"bad base URL", "agents:\n  - id: a\n    model: {provider: openai, name: m, baseURL: 'localhost:11434'}\n", []string{`agents[0].model.baseURL: "localhost:11434" is not an http(s) URL`}},
		{"unknown provider", "agents:\n  - id: a\n    model: {provider: anthropic}\n", []string{`agents[0].model.provider: "anthropic" is not a provider`}},
		{"unset key variable", "agents:\n  - id: a\n    model: {provider: openai, name: m, apiKeyEnv: INTERLOCK_TEST_UNSET_KEY}\n", []string{"agents[0].model.apiKeyEnv: the environment variable INTERLOCK_TEST_UNSET_KEY is not set"}},
		{"invalid schema", agentOK + "tools:\n  - name: t\n    http: {url: 'http://x/'}\n    inputSchema: {type: objekt}\n", []string{"tools[0].inputSchema: is not a valid JSON Schema"}},
		{"tool without kind", agentOK + "tools:\n  - name: t\n", []string{"tools[0]: a tool needs http"}},
		{"bad tool name", agentOK + "tools:\n  - name: 'refund money'\n    http: {url: 'http://x/'}\n", []string{`tools[0].name: "refund money" is not a tool name`}},
		{"unknown MCP server", agentOK + "tools:\n  - name: t\n    mcp: {server: orders, tool: x}\n", []string{`tools[0].mcp.server: "orders" is not in mcpServers`}},
		{"unset header variable", agentOK + "tools:\n  - name: t\n    http: {url: 'http://x/', headers: {Authorization: 'Bearer ${INTERLOCK_TEST_UNSET_TOKEN}'}}\n", []string{"tools[0].http.headers.Authorization: the environment variable INTERLOCK_TEST_UNSET_TOKEN is not set"}},
		{"unknown sub-agent", "agents:\n  - id: a\n    model: {provider: demo}\n    subAgents: [b]\n", []string{`agents[0].subAgents[0]: "b" is not an agent id`}},
		{"duplicate agent", agentOK + "  - id: a\n    model: {provider: demo}\n", []string{`agents[1].id: "a" is defined twice`}},
		{"short approval timeout", agentOK + "tools:\n  - name: t\n    http: {url: 'http://x/'}\n    approvalTimeout: 10ms\n", []string{"tools[0].approvalTimeout: 10ms is too short"}},
		{"negative approval timeout", agentOK + "tools:\n  - name: t\n    http: {url: 'http://x/'}\n    approvalTimeout: -5m\n", []string{"tools[0].approvalTimeout: -5m0s is too short"}},
		{"bad MCP approval timeout", agentOK + "mcpServers:\n  - name: s\n    url: 'http://x/'\n    approvalTimeout: 1ms\n", []string{"mcpServers[0].approvalTimeout: 1ms is too short"}},
		{"several problems", "agents:\n  - id: a\n  - id: b\n    model: {provider: x}\n", []string{"agents[0].model: is required", "agents[1].model.provider"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := config.Parse("bad.yaml", []byte(tc.yaml))
			if err == nil {
				t.Fatal("accepted")
			}
			if !strings.HasPrefix(err.Error(), "bad.yaml:") {
				t.Fatalf("%q does not name the file", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Fatalf("%q does not say %q", err, w)
				}
			}
		})
	}
}

func build(t *testing.T, yaml string) (*config.Agents, error) {
	t.Helper()
	f, err := config.Parse("test.yaml", []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	a, err := config.Build(context.Background(), f, config.Options{Version: "test"})
	if a != nil {
		t.Cleanup(a.Close)
	}
	return a, err
}

func TestBuildUnknownTool(t *testing.T) {
	_, err := build(t, "agents:\n  - id: a\n    model: {provider: demo}\n    tools: [refund]\n")
	if err == nil || err.Error() != `test.yaml: agents[0].tools[0]: unknown tool "refund": it is not in tools and no MCP server lists it` {
		t.Fatalf("error %v", err)
	}
}

func TestBuildDelegationCycle(t *testing.T) {
	_, err := build(t, "agents:\n  - id: a\n    model: {provider: demo}\n    subAgents: [b]\n  - id: b\n    model: {provider: demo}\n    subAgents: [a]\n")
	if err == nil || !strings.Contains(err.Error(), "agents[0].subAgents: delegation goes round in a circle: a → b → a") {
		t.Fatalf("error %v", err)
	}
}

// TestBuildMCPTools: a server's tools become tools with its schemas, an alias takes its own
// name, and the approval policy of the server applies.
func TestBuildMCPTools(t *testing.T) {
	s := mcp.NewServer(&mcp.Implementation{Name: "orders", Version: "1"}, nil)
	type in struct {
		OrderID string `json:"orderId"`
	}
	for _, name := range []string{"lookup_order", "cancel_order", "delete_everything"} {
		mcp.AddTool(s, &mcp.Tool{Name: name, Description: "does " + name},
			func(context.Context, *mcp.CallToolRequest, in) (*mcp.CallToolResult, any, error) {
				return nil, nil, nil
			})
	}
	h := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	t.Cleanup(h.Close) // after the sessions close (cleanups run last first)
	a, err := build(t, `
agents:
  - id: a
    model: {provider: demo}
    tools: [lookup, cancel_order]
tools:
  - name: lookup
    mcp: {server: orders, tool: lookup_order}
    approvalTimeout: 5m
mcpServers:
  - name: orders
    url: `+h.URL+`
    tools: [lookup_order, cancel_order]
    requireApproval: [cancel_order]
    approvalTimeout: 30m
`)
	if err != nil {
		t.Fatal(err)
	}
	ag := a.List[0]
	lookup, cancel := ag.Tool("lookup"), ag.Tool("cancel_order")
	if lookup == nil || cancel == nil || len(ag.Tools) != 2 {
		t.Fatalf("tools %+v", ag.Tools)
	}
	if lookup.Description != "does lookup_order" || !strings.Contains(string(lookup.InputSchema), "orderId") || lookup.RequireApproval {
		t.Fatalf("lookup %+v", lookup)
	}
	if !cancel.RequireApproval {
		t.Fatal("cancel_order does not need approval")
	}
	if cancel.ApprovalTimeout != 30*time.Minute || lookup.ApprovalTimeout != 5*time.Minute {
		t.Fatalf("approval timeouts: cancel_order %s (want the server's 30m), lookup %s (want its own 5m)", cancel.ApprovalTimeout, lookup.ApprovalTimeout)
	}
	_, err = build(t, "agents:\n  - id: a\n    model: {provider: demo}\n    tools: [delete_everything]\nmcpServers:\n  - name: orders\n    url: "+h.URL+"\n    tools: [lookup_order]\n")
	if err == nil || !strings.Contains(err.Error(), `agents[0].tools[0]: unknown tool "delete_everything"`) {
		t.Fatalf("a tool left out of the server's list: %v", err)
	}
	_, err = build(t, "agents:\n  - id: a\n    model: {provider: demo}\nmcpServers:\n  - name: orders\n    url: "+h.URL+"\n    tools: [refund]\n")
	if err == nil || !strings.Contains(err.Error(), `mcpServers[0].tools[0]: the server lists no tool "refund"`) {
		t.Fatalf("error %v", err)
	}
}

// TestBuildHTTPToolApprovalTimeout: approvalTimeout on an HTTP tool reaches the agent's tool.
func TestBuildHTTPToolApprovalTimeout(t *testing.T) {
	a, err := build(t, "agents:\n  - id: a\n    model: {provider: demo}\n    tools: [refund]\ntools:\n  - name: refund\n    requireApproval: true\n    approvalTimeout: 30m\n    http: {url: 'http://127.0.0.1:1/'}\n")
	if err != nil {
		t.Fatal(err)
	}
	if got := a.List[0].Tool("refund").ApprovalTimeout; got != 30*time.Minute {
		t.Fatalf("approval timeout %s, want 30m", got)
	}
}
