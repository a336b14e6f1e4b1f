package config_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"interlock/config"
)

const followUpTool = "agents:\n  - id: a\n    model: {provider: demo}\n    tools: [refund]\ntools:\n  - name: refund\n    requireApproval: true\n    http: {url: 'http://127.0.0.1:1/'}\n"

// TestFollowUpChecks: each follow-up key is checked at load with its path named: durations of at
// least a second, shorter than approvalTimeout; escalateAfter and escalateTo together, naming
// roles that may decide; expiringBefore only with an approvalTimeout — on tools and MCP servers.
func TestFollowUpChecks(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, yaml, want string }{
		{"escalateAfter without escalateTo", followUpTool + "    escalateAfter: 30m\n", "tools[0].escalateAfter: needs escalateTo"},
		{"escalateTo without escalateAfter", followUpTool + "    escalateTo: [finance-lead]\n", "tools[0].escalateTo: needs escalateAfter"},
		{"expiringBefore without approvalTimeout", followUpTool + "    expiringBefore: 10m\n", "tools[0].expiringBefore: needs approvalTimeout"},
		{"expiringBefore not shorter", followUpTool + "    approvalTimeout: 10m\n    expiringBefore: 10m\n", "tools[0].expiringBefore: 10m0s is not shorter than approvalTimeout (10m0s)"},
		{"remindAfter after the expiry", followUpTool + "    approvalTimeout: 10m\n    remindAfter: 1h\n", "tools[0].remindAfter: 1h0m0s is not shorter than approvalTimeout"},
		{"negative remindAfter", followUpTool + "    remindAfter: -10m\n", "tools[0].remindAfter: -10m0s is too short"},
		{"zero-ish escalateAfter", followUpTool + "    escalateAfter: 1ms\n    escalateTo: [x]\n", "tools[0].escalateAfter: 1ms is too short"},
		{"requester in escalateTo", followUpTool + "    escalateAfter: 1m\n    escalateTo: [requester]\n", "tools[0].escalateTo[0]: the requester role"},
		{"MCP server expiringBefore", "agents:\n  - id: a\n    model: {provider: demo}\nmcpServers:\n  - name: s\n    url: 'http://x/'\n    approvalTimeout: 5m\n    expiringBefore: 6m\n", "mcpServers[0].expiringBefore: 6m0s is not shorter than approvalTimeout (5m0s)"},
		{"MCP server escalateAfter", "agents:\n  - id: a\n    model: {provider: demo}\nmcpServers:\n  - name: s\n    url: 'http://x/'\n    escalateAfter: 5m\n", "mcpServers[0].escalateAfter: needs escalateTo"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := config.Parse("bad.yaml", []byte(tc.yaml))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one saying %q", err, tc.want)
			}
		})
	}
}

// TestBuildFollowUp: the example reaches the agent's tool as written.
func TestBuildFollowUp(t *testing.T) {
	a, err := build(t, followUpTool+"    approvalTimeout: 1h\n    remindAfter: 10m\n    escalateAfter: 30m\n    escalateTo: [finance-lead]\n    expiringBefore: 10m\n")
	if err != nil {
		t.Fatal(err)
	}
	fu := a.List[0].Tool("refund").FollowUp
	if fu.RemindAfter != 10*time.Minute || fu.EscalateAfter != 30*time.Minute || !slices.Equal(fu.EscalateTo, []string{"finance-lead"}) || fu.ExpiringBefore != 10*time.Minute {
		t.Fatalf("follow-up %+v", fu)
	}
}
