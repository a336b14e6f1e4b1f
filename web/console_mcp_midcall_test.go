package web_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"interlock/internal/apptest"
)

// TestConsoleDeclinesAMidCallQuestion: a call through the MCP gateway whose upstream asks a
// question in the middle of the call, once alice approved it, shows in the run view as the
// question with its answer form and, beside it, a Decline button; declined there with a reason,
// the upstream is answered decline, its call goes on, and the held client gets the upstream's
// own answer; the run's decisions show alice's decline.
func TestConsoleDeclinesAMidCallQuestion(t *testing.T) {
	t.Parallel()
	ctx := browser(t)
	up := apptest.NewMCPUpstreamAsking(t)
	cfg := strings.Replace(gatewayConsoleConfig(up), "requireApproval: [refund]", "requireApproval: [refund, refund_ask]", 1)
	s := apptest.AuthServer(t, "sqlite:"+filepath.Join(t.TempDir(), "gateway.db"), cfg)
	cs := gatewaySession(t, s)
	page := tab(t, ctx, true)
	do(t, page, chromedp.Navigate(s.URL+"/#token="+apptest.TokenOf("alice")), until(`document.body.innerText.includes("Nothing waits")`))

	held := callHeld(cs, "orders__refund_ask", map[string]any{"order": 12})
	var runID string
	apptest.Until(t, "the call waiting for approval", func() bool {
		var out struct {
			SuspendedRuns struct{ Runs []struct{ RunID string } }
		}
		s.MustAs(t, apptest.TokenOf("alice"), `{ suspendedRuns(agentId: "mcp-gateway") { runs { runId } } }`, nil, &out)
		if len(out.SuspendedRuns.Runs) == 1 {
			runID = out.SuspendedRuns.Runs[0].RunID
		}
		return runID != ""
	})
	do(t, page, chromedp.Navigate(s.URL+"/?run="+runID), chromedp.WaitVisible(chromedp.CSS(`.pending button.approve`)),
		chromedp.Click(chromedp.CSS(`.pending button.approve`)),
		// The upstream asks: the run waits again, on the question, with its form and Decline.
		chromedp.WaitVisible(chromedp.CSS(`.pending .decline-question button.decline`)))
	if n := get(t, page, chromedp.Evaluate[int](`document.querySelectorAll(".pending button.approve").length`)); n != 0 {
		t.Fatalf("the question shows %d Approve buttons, want none", n)
	}
	if !strings.Contains(textOf(t, page, `.pending`), "Why is this order refunded?") || get(t, page, chromedp.Evaluate[int](`document.querySelectorAll('.pending form[aria-label="Resume"]').length`)) != 1 {
		t.Fatalf("the question's card:\n%s", textOf(t, page, `.pending`))
	}
	screenshot(t, page, "mcp-midcall-question.png")
	do(t, page, chromedp.SendKeys(chromedp.CSS(`.pending .decline-question input`), "no reason to give"),
		chromedp.Click(chromedp.CSS(`.pending .decline-question button.decline`)))
	apptest.Eventually(t, func() bool {
		return get(t, page, chromedp.Evaluate[bool](`document.querySelector("#run-status")?.textContent === "COMPLETED"`))
	}, func() string {
		var out struct{ Run struct{ Status string } }
		s.MustAs(t, apptest.TokenOf("alice"), `query($id: ID!) { run(runId: $id) { status } }`, map[string]any{"id": runID}, &out)
		return "the run (" + out.Run.Status + ") never showed COMPLETED:\n" + bodyText(t, page)
	})
	do(t, page,
		until(`document.querySelector('section[aria-label="Decisions"]')?.innerText.includes("Declined by alice")`))
	res := answerOf(t, held)
	if !res.IsError || toolText(res) != "not refunded: decline" {
		t.Fatalf("the held call's answer: error %v, text %q; want the upstream's answer to the decline", res.IsError, toolText(res))
	}
	if calls := up.Calls("refund_ask"); len(calls) != 1 || calls[0].Args["why"] != "decline" {
		t.Fatalf("the upstream got %+v, want one call answered decline", calls)
	}
	var out struct {
		Run struct {
			Decisions []struct{ Kind, DecidedBy, Reason string }
		}
	}
	s.MustAs(t, apptest.TokenOf("alice"), `query($id: ID!) { run(runId: $id) { decisions { kind decidedBy reason } } }`, map[string]any{"id": runID}, &out)
	if d := out.Run.Decisions; len(d) != 2 || d[1].Kind != "DECLINED" || d[1].DecidedBy != "alice" || d[1].Reason != "no reason to give" {
		t.Fatalf("decisions %+v, want alice's approval, then her decline of the question with its reason", d)
	}
}
