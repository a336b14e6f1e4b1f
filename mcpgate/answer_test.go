package mcpgate

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"interlock/runs"
	"interlock/runtype"
)

// TestAnswers: each outcome is answered with its own words and status, the upstream's own
// result passed on with the approval's _meta added, and a tool that failed (it ran, or could not
// be reached) an error saying so — distinct from a decline, an expiry and Interlock's own failure.
func TestAnswers(t *testing.T) {
	who, why, rct := "alice", "not paid", "jws"
	run := &runtype.Run{ID: "r1"}
	approved := &runtype.Decision{Kind: runtype.DecisionApproved, DecidedBy: &who, Receipt: &rct}
	failure := "the run stopped on an internal error"
	cases := []struct {
		name   string
		out    *runs.CallOutcome
		isErr  bool
		text   string
		status string
	}{
		{"ran", &runs.CallOutcome{Kind: runs.OutcomeRan, Run: run, Decision: approved, Result: json.RawMessage(`{"content":[{"type":"text","text":"ok"}],"isError":false}`)}, false, "ok", "APPROVED"},
		{"ran, upstream error", &runs.CallOutcome{Kind: runs.OutcomeRan, Run: run, Decision: approved, Result: json.RawMessage(`{"content":[{"type":"text","text":"no such order"}],"isError":true}`)}, true, "no such order", "APPROVED"},
		{"tool failed", &runs.CallOutcome{Kind: runs.OutcomeRan, Run: run, Decision: approved, Error: "MCP server orders: connect: refused"}, true, "The tool failed: MCP server orders", "APPROVED"},
		{"declined", &runs.CallOutcome{Kind: runs.OutcomeDeclined, Run: run, Decision: &runtype.Decision{Kind: runtype.DecisionDeclined, DecidedBy: &who, Reason: &why}}, true, "declined this call in Interlock, so the tool did not run. Their reason: not paid", "DECLINED"},
		{"declined without a reason", &runs.CallOutcome{Kind: runs.OutcomeDeclined, Run: run, Decision: &runtype.Decision{Kind: runtype.DecisionDeclined}}, true, "(none given)", "DECLINED"},
		{"expired", &runs.CallOutcome{Kind: runs.OutcomeExpired, Run: run, Decision: &runtype.Decision{Kind: runtype.DecisionExpired}}, true, "expired before anyone decided it", "EXPIRED"},
		{"failed", &runs.CallOutcome{Kind: runs.OutcomeFailed, Run: &runtype.Run{ID: "r1", Error: &failure}}, true, "Interlock could not complete this call: the run stopped", "FAILED"},
	}
	for _, c := range cases {
		res := answer(c.out)
		var text strings.Builder
		for _, p := range res.Content {
			text.WriteString(p.(*mcp.TextContent).Text)
		}
		meta, _ := res.Meta[MetaKey].(map[string]any)
		if res.IsError != c.isErr || !strings.Contains(text.String(), c.text) || meta["status"] != c.status || meta["runId"] != "r1" {
			t.Errorf("%s: isError %v %q %v, want %v %q %s", c.name, res.IsError, text.String(), meta, c.isErr, c.text, c.status)
		}
		if c.status == "APPROVED" && (meta["receipt"] != "jws" || meta["decidedBy"] != "alice") {
			t.Errorf("%s: _meta %v lacks the approval's receipt and decider", c.name, meta)
		}
	}
}
