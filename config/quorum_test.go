package config_test

import (
	"strings"
	"testing"

	"interlock/config"
)

// TestQuorumConfig: tools[].approvals reaches the agent's tool (required, roles), an external
// agent's tool and the "*" policy take it too, and each problem names its path.
func TestQuorumConfig(t *testing.T) {
	t.Parallel()
	a, err := build(t, `
agents:
  - id: a
    model: {provider: demo}
    tools: [refund]
  - id: pay-bot
    external: true
    tools: [pay, "*"]
tools:
  - name: refund
    requireApproval: true
    approvals: {required: 2, roles: [finance]}
    http: {url: 'http://127.0.0.1:1/'}
  - name: pay
    requireApproval: true
    approvals: {required: 3}
  - name: "*"
    requireApproval: true
    approvals: {required: 2}
`)
	if err != nil {
		t.Fatal(err)
	}
	refund := a.List[0].Tool("refund")
	if refund.Quorum() != 2 || strings.Join(refund.ApprovalRoles, ",") != "finance" {
		t.Fatalf("refund: required %d, roles %v", refund.Quorum(), refund.ApprovalRoles)
	}
	if q := a.List[1].Tool("pay").Quorum(); q != 3 {
		t.Fatalf("pay: required %d", q)
	}
	if q := a.List[1].Tool("Bash").Quorum(); q != 2 {
		t.Fatalf("any tool: required %d", q)
	}

	const agentOK = "agents:\n  - id: a\n    model: {provider: demo}\n"
	for _, tc := range []struct{ name, yaml, want string }{
		{"zero", agentOK + "tools:\n  - name: t\n    requireApproval: true\n    http: {url: 'http://x/'}\n    approvals: {required: 0}\n", "tools[0].approvals.required: 0 is not a number of approvals"},
		{"huge", agentOK + "tools:\n  - name: t\n    requireApproval: true\n    http: {url: 'http://x/'}\n    approvals: {required: 1000}\n", "tools[0].approvals.required: 1000 is not a number of approvals"},
		{"empty role", agentOK + "tools:\n  - name: t\n    requireApproval: true\n    http: {url: 'http://x/'}\n    approvals: {required: 2, roles: [' ']}\n", "tools[0].approvals.roles[0]: must name a role"},
		{"requester role", agentOK + "tools:\n  - name: t\n    requireApproval: true\n    http: {url: 'http://x/'}\n    approvals: {required: 2, roles: [requester]}\n", "tools[0].approvals.roles[0]: the requester role asks for approvals"},
		{"not held", agentOK + "tools:\n  - name: t\n    http: {url: 'http://x/'}\n    approvals: {required: 2}\n", "tools[0].approvals: required: 2 needs requireApproval: true"},
		{"MCP server not held", agentOK + "mcpServers:\n  - name: s\n    url: 'http://x/'\n    approvals: {required: 2}\n", "mcpServers[0].approvals: required: 2 needs requireApproval"},
		{"MCP server zero", agentOK + "mcpServers:\n  - name: s\n    url: 'http://x/'\n    requireApproval: ['*']\n    approvals: {required: -1}\n", "mcpServers[0].approvals.required: -1 is not a number of approvals"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := config.Parse("bad.yaml", []byte(tc.yaml))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
		})
	}
}
