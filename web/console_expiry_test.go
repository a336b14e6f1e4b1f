package web_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"interlock/internal/apptest"
)

// TestConsoleShowsExpiry: the inbox and the run view say when a waiting call expires, and the
// run view shows the expiry when it happens, with what the model was told.
func TestConsoleShowsExpiry(t *testing.T) {
	t.Parallel()
	ctx := browser(t)
	file, _ := apptest.ExpiryConfig(t, "30m")
	s := apptest.Start(t, "sqlite:"+filepath.Join(t.TempDir(), "expiry.db"), "--config", file)
	run := s.StartRun(t, "refund order 7", map[string]any{"agentId": "billing"})
	s.WaitStatus(t, run.RunID, "SUSPENDED")
	page := tab(t, ctx, false)
	do(t, page, chromedp.Navigate(s.URL+"/"), until(`document.querySelectorAll("a[data-run]").length === 1`))
	if row := textOf(t, page, `a[data-run]`); !strings.Contains(row, "expires in 30 min") {
		t.Fatalf("inbox row %q does not say when the call expires", row)
	}
	do(t, page, chromedp.Click(chromedp.CSS(`a[data-run]`)), chromedp.WaitVisible(chromedp.CSS(`button.approve`)))
	if card := textOf(t, page, `.pending`); !strings.Contains(card, "expires in 30 min") {
		t.Fatalf("pending call %q does not say when it expires", card)
	}

	file, _ = apptest.ExpiryConfig(t, "1s")
	s = apptest.Start(t, "sqlite:"+filepath.Join(t.TempDir(), "expiring.db"), "--config", file)
	run = s.StartRun(t, "refund order 8", map[string]any{"agentId": "billing"})
	do(t, page, chromedp.Navigate(s.URL+"/?run="+run.RunID), until(`document.body.innerText.includes("timed out after 1s")`),
		until(`document.body.innerText.includes("COMPLETED") && !document.querySelector("button.approve")`))
	if body := bodyText(t, page); !strings.Contains(strings.ToLower(body), "expired") || strings.Contains(body, "undefined") {
		t.Fatalf("run view after the expiry: %q", body)
	}
}
