package web_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"interlock/internal/apptest"
)

// claimed is the JavaScript condition that the page shows who is on run id: the run view's
// claim box, or the inbox's row. want "" waits for no badge at all.
func claimed(id, want string) string {
	sel := fmt.Sprintf(`(document.querySelector('li[data-run=%q] .badge.claim') || document.querySelector('#run-claims .badge.claim'))`, id)
	if want == "" {
		return fmt.Sprintf(`!!document.querySelector('li[data-run=%q], .claim-box:not([hidden])') && !%s`, id, sel)
	}
	return fmt.Sprintf(`(%s?.textContent || "").includes(%q)`, sel, want)
}

// TestConsoleClaimsSeenLive: alice says "I'm on it" in her run view (her own browser context);
// bob's inbox row and run view, open in another context, show "alice is on it" without a reload,
// and lose it when she is done looking. A viewer's claim is refused in the page.
func TestConsoleClaimsSeenLive(t *testing.T) {
	t.Parallel()
	ctx := browser(t)
	s := apptest.AuthServer(t, "sqlite:"+filepath.Join(t.TempDir(), "claims.db"), "")
	root, alice, bob, vera := apptest.TokenOf("root"), apptest.TokenOf("alice"), apptest.TokenOf("bob"), apptest.TokenOf("vera")
	run := s.SuspendAs(t, root, "refund order 42 for 30", nil)
	other := s.SuspendAs(t, root, "refund order 43 for 5", nil)

	bobInbox := tab(t, ctx, true)
	do(t, bobInbox, chromedp.Navigate(s.URL+"/#token="+bob), until(fmt.Sprintf(`!!document.querySelector('li[data-run=%q]')`, run.ID)))
	bobRun := tab(t, ctx, true)
	do(t, bobRun, chromedp.Navigate(s.URL+"/?run="+run.ID+"#token="+bob), until(`!!document.querySelector('.claim-box:not([hidden]) #claim')`))
	// Marks that a reload would wipe.
	do(t, bobInbox, js(`window.notReloaded = true`))
	do(t, bobRun, js(`window.notReloaded = true`))

	alicePage := tab(t, ctx, true)
	do(t, alicePage, chromedp.Navigate(s.URL+"/?run="+run.ID+"#token="+alice), until(`!!document.querySelector('.claim-box:not([hidden]) #claim')`))
	if got := textOf(t, alicePage, "#claim"); got != "I'm on it" {
		t.Fatalf("the claim button says %q", got)
	}
	do(t, alicePage, chromedp.Click(chromedp.CSS("#claim")), until(claimed(run.ID, "alice is on it")),
		until(`document.querySelector('#claim').textContent === "I'm done looking"`))

	do(t, bobInbox, until(claimed(run.ID, "alice is on it")))
	do(t, bobRun, until(claimed(run.ID, "alice is on it")))
	if got := get(t, bobInbox, chromedp.Evaluate[bool](fmt.Sprintf(`!document.querySelector('li[data-run=%q] .badge.claim')`, other.ID))); !got {
		t.Error("the run nobody claimed shows a claim badge")
	}

	// Bob joins: both names, on alice's page too.
	do(t, bobRun, chromedp.Click(chromedp.CSS("#claim")), until(claimed(run.ID, "alice and bob are on it")))
	do(t, alicePage, until(claimed(run.ID, "alice and bob are on it")))
	do(t, bobInbox, until(claimed(run.ID, "alice and bob are on it")))

	// Done looking: released everywhere.
	do(t, alicePage, chromedp.Click(chromedp.CSS("#claim")), until(claimed(run.ID, "bob is on it")))
	do(t, bobInbox, until(claimed(run.ID, "bob is on it")))
	do(t, bobRun, chromedp.Click(chromedp.CSS("#claim")), until(claimed(run.ID, "")))
	do(t, bobInbox, until(claimed(run.ID, "")))
	do(t, alicePage, until(claimed(run.ID, "")))
	if !get(t, bobInbox, chromedp.Evaluate[bool](`window.notReloaded === true`)) || !get(t, bobRun, chromedp.Evaluate[bool](`window.notReloaded === true`)) {
		t.Error("a page of bob's was reloaded")
	}

	// A viewer may look, not claim: the page says why.
	veraPage := tab(t, ctx, true)
	do(t, veraPage, chromedp.Navigate(s.URL+"/?run="+run.ID+"#token="+vera), until(`!!document.querySelector('.claim-box:not([hidden]) #claim')`),
		chromedp.Click(chromedp.CSS("#claim")), until(`!document.querySelector('#claim-error').hidden`))
	if got := textOf(t, veraPage, "#claim-error"); !strings.Contains(got, "approver") {
		t.Errorf("vera's claim error: %q", got)
	}
}

// TestConsoleSearchAndSavedViews: the inbox's search box filters by argument text, the search
// lives in the URL (?q=) and survives a reload; a saved view is saved, reopened from the menu
// and deleted; views are per person; the history searches too.
func TestConsoleSearchAndSavedViews(t *testing.T) {
	t.Parallel()
	ctx := browser(t)
	s := apptest.AuthServer(t, "sqlite:"+filepath.Join(t.TempDir(), "search.db"), "")
	root, alice, bob := apptest.TokenOf("root"), apptest.TokenOf("alice"), apptest.TokenOf("bob")
	a := s.SuspendAs(t, root, "refund order 4242 for 30", map[string]any{"threadId": "th-blue"})
	b := s.SuspendAs(t, root, "refund order 7777 for 5", map[string]any{"threadId": "th-red"})
	row := func(id string) string { return fmt.Sprintf(`document.querySelector('li[data-run=%q]')`, id) }

	page := tab(t, ctx, true)
	do(t, page, chromedp.Navigate(s.URL+"/#token="+alice), until("!!"+row(a.ID)+" && !!"+row(b.ID)))
	do(t, page, chromedp.SendKeys(chromedp.CSS("#f-q"), "7777"), chromedp.Click(chromedp.CSS("#f-apply")),
		until(`new URLSearchParams(location.search).get("q") === "7777"`), until("!"+row(a.ID)+" && !!"+row(b.ID)))
	do(t, page, chromedp.Reload(), until("!!"+row(b.ID)))
	if got := get(t, page, chromedp.Evaluate[string](`document.querySelector('#f-q').value`)); got != "7777" {
		t.Errorf("after a reload the search box holds %q", got)
	}
	if !get(t, page, chromedp.Evaluate[bool]("!"+row(a.ID))) {
		t.Error("after a reload the search no longer filters")
	}

	// Save the view, go back to everything, open the view from the menu.
	do(t, page, chromedp.Click(chromedp.CSS("#saved-views > summary")), until(`!!document.querySelector('#saved-views-list li')`),
		chromedp.SendKeys(chromedp.CSS("#saved-view-name"), "Order 7777"), chromedp.Click(chromedp.CSS("#saved-view-save")),
		until(`!!document.querySelector('#saved-views-list li[data-view="Order 7777"]')`))
	var views struct {
		SavedViews []struct{ Name, Query string }
	}
	s.MustAs(t, alice, `{ savedViews { name query } }`, nil, &views)
	if len(views.SavedViews) != 1 || views.SavedViews[0].Query != "q=7777" {
		t.Fatalf("alice's saved views %+v", views.SavedViews)
	}
	s.MustAs(t, bob, `{ savedViews { name query } }`, nil, &views)
	if len(views.SavedViews) != 0 {
		t.Errorf("bob sees alice's views: %+v", views.SavedViews)
	}
	do(t, page, chromedp.Navigate(s.URL+"/"), until("!!"+row(a.ID)+" && !!"+row(b.ID)),
		chromedp.Click(chromedp.CSS("#saved-views > summary")), until(`!!document.querySelector('#saved-views-list li[data-view="Order 7777"] a')`),
		chromedp.Click(chromedp.CSS(`#saved-views-list li[data-view="Order 7777"] a`)),
		until(`new URLSearchParams(location.search).get("q") === "7777"`), until("!"+row(a.ID)+" && !!"+row(b.ID)))

	// The history searches the same way (thread this time), with its box filled from the URL.
	do(t, page, chromedp.Navigate(s.URL+"/?view=history&status=ANY&q=TH-BLUE"),
		until(fmt.Sprintf(`!!document.querySelector('#history-list li[data-run=%q]')`, a.ID)))
	if get(t, page, chromedp.Evaluate[bool](fmt.Sprintf(`!!document.querySelector('#history-list li[data-run=%q]')`, b.ID))) {
		t.Error("the history's search found the other thread's run")
	}
	if got := get(t, page, chromedp.Evaluate[string](`document.querySelector('#h-q').value`)); got != "TH-BLUE" {
		t.Errorf("the history's search box holds %q", got)
	}

	// Delete the view.
	do(t, page, chromedp.Click(chromedp.CSS("#saved-views > summary")), until(`!!document.querySelector('#saved-views-list li[data-view="Order 7777"] .delete-view')`),
		chromedp.Click(chromedp.CSS(`#saved-views-list li[data-view="Order 7777"] .delete-view`)),
		until(`!document.querySelector('#saved-views-list li[data-view="Order 7777"]')`))
	s.MustAs(t, alice, `{ savedViews { name query } }`, nil, &views)
	if len(views.SavedViews) != 0 {
		t.Errorf("after delete: %+v", views.SavedViews)
	}
}
