package web_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"interlock/internal/apptest"
)

// TestConsolePolicies: a call a tool's policy held shows why the person is asked and the tool's
// policy; a call the policy let through is shown in the run's decisions as auto-approved by
// policy, with its rule, never as a person's approval; History lists it under its own outcome.
func TestConsolePolicies(t *testing.T) {
	ctx := browser(t)
	var tokens strings.Builder
	for _, p := range []struct{ subject, role string }{{"bot", "requester"}, {"alice", "approver"}} {
		fmt.Fprintf(&tokens, "    - {subject: %s, role: %s, sha256: %s}\n", p.subject, p.role, apptest.Sha256Hex(apptest.TokenOf(p.subject)))
	}
	cfg := apptest.WriteConfig(t, `
auth:
  tokens:
`+tokens.String()+`agents:
  - {id: refund-bot, name: Refund bot, external: true, tools: [issue_refund]}
tools:
  - name: issue_refund
    inputSchema: {type: object}
    requireApproval: "args.amount > 100"
`)
	s := apptest.Start(t, "sqlite:"+filepath.Join(t.TempDir(), "policy.db"), "--auth=on", "--config", cfg)
	auto := requestApprovalAs(s, t, apptest.TokenOf("bot"), map[string]any{"agentId": "refund-bot", "toolName": "issue_refund", "args": map[string]any{"amount": 20}})
	asked := requestApprovalAs(s, t, apptest.TokenOf("bot"), map[string]any{"agentId": "refund-bot", "toolName": "issue_refund", "args": map[string]any{"amount": 500}})
	page := tab(t, ctx, true)

	do(t, page, chromedp.Navigate(s.URL+"/?run="+asked+"#token="+apptest.TokenOf("alice")),
		until(`document.querySelector(".pending .approval-reason") !== null && document.querySelector(".pending .tool-policy code") !== null`))
	got := get(t, page, chromedp.Evaluate[map[string]string](`({
		reason: document.querySelector(".pending .approval-reason").textContent,
		policy: document.querySelector(".pending .tool-policy code").textContent,
	})`))
	if got["reason"] != `Why you are asked: policy requireApproval "args.amount > 100" is true for this call` || got["policy"] != "args.amount > 100" {
		t.Fatalf("the held call shows %v", got)
	}

	do(t, page, chromedp.Navigate(s.URL+"/?run="+auto),
		until(`document.querySelector('section[aria-label="Decisions"] li.decision.AUTO_APPROVED') !== null`))
	line := get(t, page, chromedp.Evaluate[string](`document.querySelector('section[aria-label="Decisions"] li.decision.AUTO_APPROVED').innerText`))
	if !strings.HasPrefix(line, "Auto-approved by policy at ") || !strings.Contains(line, `: policy: requireApproval "args.amount > 100" is false for this call`) || strings.Contains(line, "Approved by") {
		t.Fatalf("the auto-approved decision reads %q", line)
	}

	do(t, page, chromedp.Navigate(s.URL+"/?view=history&decision=AUTO_APPROVED"),
		until(`document.querySelector("ul.decisions .badge.AUTO_APPROVED") !== null`))
	badges := get(t, page, chromedp.Evaluate[[]string](`[...document.querySelectorAll("ul.decisions .badge")].map((b) => b.textContent)`))
	if len(badges) != 1 || badges[0] != "auto-approved by policy" {
		t.Fatalf("History's decisions %v, want the one auto-approved by policy", badges)
	}
}
