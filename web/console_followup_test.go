package web_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"interlock/internal/apptest"
)

// followUpConfig is the billing agent's refund tool (apptest.ExpiryConfig) with a 1h
// approvalTimeout and every follow-up step due within seconds of the suspension: the smallest
// durations the config accepts (at least 1s), since the app runs on the real clock; the steps'
// timing itself is tested with an injected clock in runs.
const followUpConfig = "    remindAfter: 1s\n    escalateAfter: 2s\n    escalateTo: [finance-lead]\n    expiringBefore: 59m58s\n"

// TestConsoleShowsFollowUp: a waiting call's reminder, escalation and expiry warning appear live
// in the inbox row — "Reminded", "Escalated to finance-lead", "Expires in 60 min", without the
// page being loaded again — and in the run view, on the waiting call and in the timeline.
func TestConsoleShowsFollowUp(t *testing.T) {
	t.Parallel()
	ctx := browser(t)
	file, _ := apptest.ExpiryConfig(t, "1h", followUpConfig) // more lines of the refund tool
	s := apptest.Start(t, "sqlite:"+filepath.Join(t.TempDir(), "followup.db"), "--config", file)
	page := tab(t, ctx, false)
	do(t, page, chromedp.Navigate(s.URL+"/"), until(`!!document.querySelector("#f-sort")`), js(`window.stayed = true`))
	run := s.StartRun(t, "refund order 7", map[string]any{"agentId": "billing"})
	s.WaitStatus(t, run.RunID, "SUSPENDED")
	do(t, page, until(`document.querySelectorAll("a[data-run]").length === 1`),
		until(`(document.querySelector("a[data-run]").innerText || "").includes("Reminded")`),
		until(`(document.querySelector("a[data-run]").innerText || "").includes("Escalated to finance-lead")`),
		until(`(document.querySelector("a[data-run]").innerText || "").includes("Expires in 60 min")`),
		until(`window.stayed === true`)) // live: the page was not loaded again
	if row := textOf(t, page, `a[data-run]`); strings.Count(row, "Reminded") != 1 || strings.Contains(row, "undefined") {
		t.Fatalf("inbox row %q", row)
	}

	do(t, page, chromedp.Click(chromedp.CSS(`a[data-run]`)), chromedp.WaitVisible(chromedp.CSS(`button.approve`)),
		until(`document.querySelector(".pending").innerText.includes("Escalated to finance-lead")`),
		until(`document.querySelectorAll('li[data-type="TOOL_CALL_REMINDER"], li[data-type="TOOL_CALL_ESCALATED"], li[data-type="TOOL_CALL_EXPIRING"]').length === 3`))
	card := textOf(t, page, `.pending`)
	for _, want := range []string{"Reminded", "Escalated to finance-lead", "Expires in 60 min"} {
		if !strings.Contains(card, want) {
			t.Errorf("pending call %q does not show %q", card, want)
		}
	}
	if body := bodyText(t, page); !strings.Contains(body, "escalated to finance-lead, who may decide it from now on") || strings.Contains(body, "undefined") {
		t.Errorf("run view: %q", body)
	}
}
