package config_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// toolServer is an MCP server listing tools of those names, each answering "done".
func toolServer(t *testing.T, names ...string) *httptest.Server {
	t.Helper()
	s := mcp.NewServer(&mcp.Implementation{Name: "tools", Version: "1"}, nil)
	for _, name := range names {
		mcp.AddTool(s, &mcp.Tool{Name: name, Description: "does " + name},
			func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done"}}}, nil, nil
			})
	}
	h := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	t.Cleanup(h.Close)
	return h
}

// TestBuildGatewayToolNamesAreUnique: <server>__<tool> must name one tool. A server "files"
// listing "write__file" (an upstream that is itself an aggregator names its tools so) and a
// server "files__write" listing "file" are both "files__write__file" — one gated, one not — so
// the build refuses it (or names them apart):
// otherwise /mcp lists one tool under that name (whichever the MCP server registered last) and
// the gateway's agent runs and gates the other (its first tool of that name).
func TestBuildGatewayToolNamesAreUnique(t *testing.T) {
	gated, open := toolServer(t, "write__file"), toolServer(t, "file")
	a, err := build(t, `mcpServers:
  - name: files
    url: `+gated.URL+`
    requireApproval: [write__file]
  - name: files__write
    url: `+open.URL+`
mcpGateway:
  agentId: mcp-gateway
  servers: [files, files__write]
`)
	if err != nil {
		if !strings.Contains(err.Error(), `"files__write__file"`) {
			t.Fatalf("refused with %v, want the name both servers give", err)
		}
		return
	}
	seen := map[string]string{}
	for _, tl := range a.Gateway.Tools {
		if s, dup := seen[tl.Name]; dup {
			t.Fatalf("the gateway lists %q twice (servers %s and %s)", tl.Name, s, tl.Server)
		}
		seen[tl.Name] = tl.Server
	}
}
