package web_test

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"interlock/internal/apptest"
)

// TestConsoleApproveAndAllowSimilar: a person opens "Approve and allow similar…" on a call,
// reads what the grant will let through in one sentence that follows the form, is refused a
// condition the call itself fails (in the dialog, the run still waiting), approves with a
// bound of 50 and no condition on the order; a similar call in the thread then runs without
// waiting, its decision names the grant, and the Grants page lists the grant and revokes it —
// after which the next similar call waits again.
func TestConsoleApproveAndAllowSimilar(t *testing.T) {
	t.Parallel()
	ctx := browser(t)
	s := apptest.Start(t, "sqlite:"+filepath.Join(t.TempDir(), "grants.db"))
	thread := map[string]any{"threadId": "th-grants"}
	run := s.StartRun(t, "refund order 42 for 30", thread)
	waitStatus(t, s, run.RunID, "SUSPENDED")
	page := tab(t, ctx, false)
	const dialog = `dialog.grant-dialog`
	sentence := func() string {
		return get(t, page, chromedp.Evaluate[string](`document.querySelector("`+dialog+` .grant-sentence").textContent`))
	}
	do(t, page, chromedp.Navigate(s.URL+"/?run="+run.RunID), chromedp.WaitVisible(chromedp.CSS(`.pending button.allow-similar`)),
		chromedp.Click(chromedp.CSS(`.pending button.allow-similar`)), chromedp.WaitVisible(chromedp.CSS(dialog)))
	if got := sentence(); !strings.Contains(got, "calls of issue_refund by support-agent in thread th-grants whose amount is at most 30 and orderId is \"42\", for 8 hours, any number of times") {
		t.Fatalf("the dialog's sentence: %q", got)
	}
	set := func(sel, v string) chromedp.Action[chromedp.Void] {
		return js(`(() => { const f = document.querySelector(` + jsString(sel) + `); f.value = ` + jsString(v) + `; f.dispatchEvent(new Event("change", { bubbles: true })); })()`)
	}
	// A bound the approved call itself fails: the server refuses it, said in the dialog.
	do(t, page, set(dialog+` input[id^="grant-val-amount"]`, "10"), chromedp.Click(chromedp.CSS(dialog+` button[type=submit]`)),
		until(`document.querySelector("`+dialog+` .form-error").textContent.includes("approved call itself")`))
	if r := s.Run(t, run.RunID); r.Status != "SUSPENDED" {
		t.Fatalf("after a refused grant the run is %s", r.Status)
	}
	do(t, page, set(dialog+` input[id^="grant-val-amount"]`, "50"), set(dialog+` select[id^="grant-op-orderId"]`, ""),
		set(dialog+` input[id^="grant-uses"]`, "3"))
	if got := sentence(); !strings.Contains(got, "whose amount is at most 50, for 8 hours, at most 3 times") || strings.Contains(got, "orderId") {
		t.Fatalf("the sentence after the changes: %q", got)
	}
	do(t, page, chromedp.Click(chromedp.CSS(dialog+` button[type=submit]`)),
		until(`!document.querySelector("`+dialog+`")`), until(`document.querySelector("#run-status")?.textContent === "COMPLETED"`))

	similar := s.StartRun(t, "refund order 43 for 40", thread)
	waitStatus(t, s, similar.RunID, "COMPLETED")
	do(t, page, chromedp.Navigate(s.URL+"/?run="+similar.RunID), until(`document.body.innerText.includes("Auto-approved at")`),
		until(`!!document.querySelector(".decision.AUTO_APPROVED a.grant-link")`))

	do(t, page, chromedp.Navigate(s.URL+"/?view=grants"), until(`document.querySelectorAll("#grants-list li.grant").length === 1`))
	if txt := bodyText(t, page); !strings.Contains(txt, "whose amount is at most 50") || !strings.Contains(txt, "Used 1 of 3 times") {
		t.Fatalf("the Grants page: %q", txt)
	}
	do(t, page, chromedp.Click(chromedp.CSS(`#grants-list button.revoke`)), until(`document.body.innerText.includes("No active grants.")`),
		until(`document.body.innerText.includes("Revoked the grant on issue_refund")`))
	after := s.StartRun(t, "refund order 44 for 40", thread)
	waitStatus(t, s, after.RunID, "SUSPENDED")
}

// waitStatus waits until run id has status on s.
func waitStatus(t *testing.T, s *apptest.Server, id, status string) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if r := s.Run(t, id); r != nil && r.Status == status {
			return
		}
	}
	t.Fatalf("run %s is not %s within 20s (it is %s)", id, status, s.Run(t, id).Status)
}
