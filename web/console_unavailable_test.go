package web_test

import (
	"strings"
	"testing"

	cdppage "github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"interlock/internal/apptest"
	"interlock/internal/dbtest"
)

// TestConsoleResubscribesAfterUnavailable: the run view follows a run whose events cannot be read
// for a while (run_events locked past the server's lock wait timeout, after an event was stored):
// the server ends the console's runEvents with UNAVAILABLE, the console subscribes again after
// the last event it showed, and once storage answers it shows the missed event exactly once.
func TestConsoleResubscribesAfterUnavailable(t *testing.T) {
	t.Parallel()
	dsn := dbtest.MySQLDSN(t)
	ctx := browser(t)
	s := apptest.Start(t, dbtest.MySQLURL(dsn)+"?lock_wait_timeout=1")
	run := s.SuspendAs(t, "", "refund order 42", nil)
	last := int64(run.LastEventSeq)

	page := tab(t, ctx, false)
	// Count the UNAVAILABLE errors the page's sockets receive: the evidence that the stream broke.
	if _, err := chromedp.Call(page, cdppage.AddScriptToEvaluateOnNewDocument, cdppage.AddScriptToEvaluateOnNewDocumentParams{Source: `
		window.__unavailable = 0;
		const Socket = window.WebSocket;
		window.WebSocket = class extends Socket {
			constructor(...args) {
				super(...args);
				this.addEventListener("message", (e) => {
					if (String(e.data).includes('"UNAVAILABLE"')) window.__unavailable++;
				});
			}
		};`}); err != nil {
		t.Fatal(err)
	}
	do(t, page, chromedp.Navigate(s.URL+"/?run="+run.ID), until(`document.querySelector("#run-status")?.textContent === "SUSPENDED"`))

	const marker = "text stored while storage could not be read"
	unlock := apptest.LockRunEvents(t, dsn, run.ID, last+1, `{"text":"`+marker+`"}`)
	do(t, page, until(`window.__unavailable > 0`))
	if strings.Contains(textOf(t, page, "#stream"), marker) {
		t.Fatal("the event showed while run_events was locked")
	}
	unlock()
	do(t, page, until(`document.querySelector("#stream")?.innerText.includes(`+jsString(marker)+`)`))
	if n := strings.Count(textOf(t, page, "#stream"), marker); n != 1 {
		t.Errorf("the missed event shows %d times, want once:\n%s", n, textOf(t, page, "#stream"))
	}
}
