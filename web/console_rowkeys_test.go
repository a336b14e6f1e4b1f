package web_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"interlock/internal/apptest"
)

// TestConsoleRowApproveUndoAndNext: with decisions held 1.5 s, a on the selected inbox row
// holds its approval with an Undo; u undoes it and the call still waits — even after a later
// approval, held as long and started after it, went through. Then from the run view, j and k
// (and the links) walk the inbox's list as it was shown.
func TestConsoleRowApproveUndoAndNext(t *testing.T) {
	t.Parallel()
	ctx := browser(t)
	s := apptest.Start(t, "sqlite:"+filepath.Join(t.TempDir(), "rowkeys.db"))
	for _, order := range []string{"81", "82", "83"} {
		suspended(t, s, "refund order "+order+" for 5")
	}
	page := tab(t, ctx, false)
	do(t, page, chromedp.Navigate(s.URL+"/"), js(`localStorage.setItem("interlock.undo.ms", "1500")`),
		chromedp.Navigate(s.URL+"/"), until(`document.querySelectorAll("#inbox-list a.row").length === 3`))
	rows := rowOrder(t, page)
	first, second, third := rows[0], rows[1], rows[2]

	do(t, page, key("j"), key("a"),
		until(`document.querySelector("#held-decisions .notice[data-state=held] button.undo") !== null`))
	if label := textOf(t, page, `#held-decisions .notice[data-state=held] .held-label`); !strings.Contains(label, "Approving issue_refund") {
		t.Fatalf("the held notice says %q", label)
	}
	do(t, page, key("u"), until(`document.querySelector("#held-decisions .notice[data-state=undone]")?.innerText.startsWith("Undone")`))
	// The second row, approved the same way after it: once it went through, the first one
	// would have too, had it not been undone.
	do(t, page, key("j"), until(fmt.Sprintf(`document.querySelector("a.row[aria-current=true]")?.dataset.run === %q`, second)), key("a"),
		until(`document.querySelector("#held-decisions .notice[data-state=done]")?.innerText.startsWith("Approved issue_refund")`))
	if st := s.Run(t, first).Status; st != "SUSPENDED" {
		t.Fatalf("the undone approval went through: the run is %s", st)
	}
	if st := s.Run(t, second).Status; st == "SUSPENDED" {
		t.Fatal("the second approval was not sent")
	}

	// Next and previous from the run view, over the inbox as shown (first, third).
	do(t, page, until(`document.querySelectorAll("#inbox-list a.row").length === 2`),
		chromedp.Click(chromedp.CSS(fmt.Sprintf(`a.row[data-run=%q]`, first))), until(`document.querySelector("nav.run-nav .position") !== null`))
	if pos := textOf(t, page, `nav.run-nav .position`); pos != "1 of 2 in the inbox" {
		t.Fatalf("the run view's place in the inbox: %q", pos)
	}
	do(t, page, js(`document.activeElement.blur()`), key("j"), until(fmt.Sprintf(`location.search === "?run=%s"`, third)),
		until(`document.querySelector("nav.run-nav .position")?.textContent === "2 of 2 in the inbox"`),
		js(`document.activeElement.blur()`), key("k"), until(fmt.Sprintf(`location.search === "?run=%s"`, first)))
	// A shortcut never types into a field: j in the decline reason is a letter.
	do(t, page, chromedp.WaitVisible(chromedp.CSS(`.pending input[id^="reason-"]`)), chromedp.Focus(chromedp.CSS(`.pending input[id^="reason-"]`)), key("j"))
	if v := get(t, page, chromedp.Evaluate[string](`document.querySelector('.pending input[id^="reason-"]').value + location.search`)); v != "j?run="+first {
		t.Fatalf("j in the reason field: %q", v)
	}
	do(t, page, chromedp.Click(chromedp.CSS(`nav.run-nav a[rel=next]`)), until(fmt.Sprintf(`location.search === "?run=%s"`, third)))
}

// TestConsoleQuorumFromTheRowAndBulk: a on a quorum call's row records the approval and says
// so (1 of 2), not "approved"; a bulk approval of that run (its second approval, which runs the
// tool) and of another (its first) reports "1 approved, 1 approval recorded (1 of 2)".
func TestConsoleQuorumFromTheRowAndBulk(t *testing.T) {
	t.Parallel()
	ctx := browser(t)
	s, refunds := quorumServer(t)
	one := s.SuspendAs(t, apptest.TokenOf("otto"), "refund order 7", map[string]any{"agentId": "billing"})
	two := s.SuspendAs(t, apptest.TokenOf("otto"), "refund order 8", map[string]any{"agentId": "billing"})

	alice := tab(t, ctx, true)
	do(t, alice, chromedp.Navigate(s.URL+"/#token="+apptest.TokenOf("alice")),
		until(`document.querySelectorAll("#inbox-list a.row").length === 2`), key("j"))
	sel := get(t, alice, chromedp.Evaluate[string](`document.querySelector("a.row[aria-current=true]").dataset.run`))
	do(t, alice, key("a"), until(`document.querySelector("#held-decisions .notice[data-state=done]") !== null`))
	if said := textOf(t, alice, `#held-decisions .notice[data-state=done]`); said != "Your approval of refund is recorded: approvals 1 of 2. It runs when 1 more person approves." {
		t.Fatalf("after a on the quorum's row: %q", said)
	}
	if calls, _ := refunds.Got(); len(calls) != 0 {
		t.Fatalf("the tool ran after one approval: %v", calls)
	}
	other := one.RunID
	if sel == one.RunID {
		other = two.RunID
	}

	bob := tab(t, ctx, true)
	do(t, bob, chromedp.Navigate(s.URL+"/#token="+apptest.TokenOf("bob")),
		until(`document.querySelectorAll("#inbox-list a.row").length === 2`),
		chromedp.Click(chromedp.CSS(`#pick-all`)), chromedp.Click(chromedp.CSS(`#bulk-approve`)),
		until(`document.querySelector("#bulk-result .bulk-summary") !== null`))
	if summary := textOf(t, bob, `#bulk-result .bulk-summary`); summary != "1 approved, 1 approval recorded (1 of 2)." {
		t.Fatalf("bob's bulk report: %q", summary)
	}
	var st struct{ Run struct{ Status string } }
	s.MustAs(t, apptest.TokenOf("otto"), `query($id: ID!) { run(runId: $id) { status } }`, map[string]any{"id": other}, &st)
	if st.Run.Status != "SUSPENDED" {
		t.Fatalf("the run with one approval is %s", st.Run.Status)
	}
}
