package web_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"interlock/internal/apptest"
)

// TestConsoleQuorum: a refund that needs two approvals from finance. Alice's inbox row and run
// view say "Approvals: 0 of 2"; her Approve button says it records her approval, and after it
// the view says so, shows "Approvals: 1 of 2 — alice" and no longer offers her the button.
// Bob's inbox row names alice; his button says it runs the tool; his approval runs it once, and
// both views show the run completed with the decision naming both approvers.
func TestConsoleQuorum(t *testing.T) {
	t.Parallel()
	ctx := browser(t)
	s, refunds := quorumServer(t)
	run := s.SuspendAs(t, apptest.TokenOf("otto"), "refund order 7", map[string]any{"agentId": "billing"})

	alice := tab(t, ctx, true)
	do(t, alice, chromedp.Navigate(s.URL+"/#token="+apptest.TokenOf("alice")),
		until(`document.querySelector("a[data-run] .approvals")?.textContent === "Approvals: 0 of 2"`),
		chromedp.Click(chromedp.CSS(`a[data-run]`)), chromedp.WaitVisible(chromedp.CSS(`button.approve`)),
		until(`document.querySelector(".pending .approvals")?.innerText.startsWith("Approvals: 0 of 2 — none yet")`))
	if label := textOf(t, alice, `.pending .actions button.approve`); label != "Approve (1 of 2) — records your approval" {
		t.Fatalf("alice's Approve says %q", label)
	}
	if roles := textOf(t, alice, `.pending .approvals`); !strings.Contains(roles, "Only finance (or an admin) may approve or decline") {
		t.Fatalf("the approvals line does not say who may approve: %q", roles)
	}
	do(t, alice, chromedp.Click(chromedp.CSS(`.pending .actions button.approve`)),
		until(`document.body.innerText.includes("is recorded: approvals 1 of 2. The tool runs when 1 more person approves.")`),
		until(`document.querySelector(".pending .approvals")?.innerText.startsWith("Approvals: 1 of 2 — alice")`),
		until(`document.querySelector(".pending .actions button.approve")?.disabled === true`))
	if label := textOf(t, alice, `.pending .actions button.approve`); label != "You approved (1 of 2) — waiting for others" {
		t.Fatalf("after her approval alice's button says %q", label)
	}
	screenshot(t, alice, "quorum.png")
	if calls, _ := refunds.Got(); len(calls) != 0 {
		t.Fatalf("the tool ran after one approval: %v", calls)
	}

	bob := tab(t, ctx, true)
	do(t, bob, chromedp.Navigate(s.URL+"/#token="+apptest.TokenOf("bob")),
		until(`document.querySelector("a[data-run] .approvals")?.textContent === "Approvals: 1 of 2 — alice"`),
		chromedp.Click(chromedp.CSS(`a[data-run]`)), chromedp.WaitVisible(chromedp.CSS(`button.approve`)))
	if label := textOf(t, bob, `.pending .actions button.approve`); label != "Approve (2 of 2) — runs the tool" {
		t.Fatalf("bob's Approve says %q", label)
	}
	do(t, bob, chromedp.Click(chromedp.CSS(`.pending .actions button.approve`)),
		until(`document.querySelector("#run-status")?.textContent === "COMPLETED"`),
		until(`document.querySelector('section[aria-label="Decisions"]')?.innerText.includes("by bob")`),
		until(`document.querySelector('section[aria-label="Decisions"] .decision-approvals')?.innerText.includes("alice at")`))
	// Alice's view follows the run live to its end.
	do(t, alice, until(`document.querySelector("#run-status")?.textContent === "COMPLETED"`),
		until(`[...document.querySelectorAll('#stream li[data-type="TOOL_CALL_APPROVAL_RECORDED"]')].map((li) => li.innerText).join("|").includes("by bob: approvals 2 of 2")`))
	if calls, _ := refunds.Got(); len(calls) != 1 {
		t.Fatalf("the tool ran %d times, want once", len(calls))
	}
	_ = run
}

// quorumServer starts a server whose billing agent's refund needs two approvals by the finance
// role (alice and bob hold it; otto starts runs), with its refund endpoint, which counts calls.
func quorumServer(t *testing.T) (*apptest.Server, *apptest.RefundEndpoint) {
	t.Helper()
	model, refunds := apptest.FakeModel(t, "refund"), apptest.NewRefundEndpoint(t)
	token := func(subject, role string) string {
		return fmt.Sprintf("    - {subject: %s, role: %s, sha256: %s}\n", subject, role, apptest.Sha256Hex(apptest.TokenOf(subject)))
	}
	file := apptest.WriteConfig(t, "auth:\n  tokens:\n"+token("otto", "operator")+token("alice", "[approver, finance]")+token("bob", "[approver, finance]")+`
agents:
  - id: billing
    model: {provider: openai, baseURL: `+model.URL+`/v1, name: test-model}
    tools: [refund]
tools:
  - name: refund
    inputSchema: {type: object, properties: {orderId: {type: string}, amount: {type: number}}, required: [orderId, amount]}
    requireApproval: true
    approvals: {required: 2, roles: [finance]}
    http: {url: `+refunds.URL+`/refund, timeout: 5s}
`)
	s := apptest.Start(t, "sqlite:"+filepath.Join(t.TempDir(), "quorum.db"), "--auth=on", "--config", file)
	return s, refunds
}
