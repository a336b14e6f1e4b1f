package tools

import "github.com/modelcontextprotocol/go-sdk/mcp"

// How a tool's service is given the receipt of the call's approval (agent.Call.Receipt), so
// that it can verify that a person approved exactly these arguments (package receipt). Both
// names are an interface services read: keep them.
const (
	// ApprovalHeader carries the receipt on an HTTP tool's request.
	ApprovalHeader = "Interlock-Approval"
	// ApprovalMetaKey names the object in an MCP tools/call's _meta whose "receipt" is the
	// receipt (a reverse-DNS prefix, as the MCP specification asks of _meta keys).
	ApprovalMetaKey = "io.interlock/approval"
)

// approvalMeta is the _meta of an MCP call whose approval has receipt (nil without one).
func approvalMeta(receipt string) mcp.Meta {
	if receipt == "" {
		return nil
	}
	return mcp.Meta{ApprovalMetaKey: map[string]any{"receipt": receipt}}
}
