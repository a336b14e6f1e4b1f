package web_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"interlock/httpguard"
	"interlock/internal/apptest"
	"interlock/playground"
)

// TestConsoleSecurityHeaders: the console and its files carry the CSP and the anti-framing
// headers; the Playground carries its own CSP (its GraphiQL is embedded, with inline styles) and
// may not be framed either.
func TestConsoleSecurityHeaders(t *testing.T) {
	t.Parallel()
	s := apptest.Start(t, "sqlite:"+t.TempDir()+"/headers.db")
	want := map[string]string{
		"Content-Security-Policy": "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self' ws: wss:; frame-ancestors 'none'; base-uri 'none'; form-action 'self'",
		"X-Frame-Options":         "DENY",
		"X-Content-Type-Options":  "nosniff",
		"Referrer-Policy":         "no-referrer",
	}
	if want["Content-Security-Policy"] != httpguard.ConsoleCSP {
		t.Fatalf("ConsoleCSP = %q", httpguard.ConsoleCSP)
	}
	for _, path := range []string{"/", "/js/app.js", "/app.css", "/no-such-file"} {
		resp, err := http.Get(s.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		for name, value := range want {
			if got := resp.Header.Get(name); got != value {
				t.Errorf("GET %s: %s = %q, want %q", path, name, got, value)
			}
		}
	}
	resp, err := http.Get(s.URL + "/playground")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Security-Policy") != playground.CSP || resp.Header.Get("X-Frame-Options") != "DENY" {
		t.Fatalf("/playground: status %d, CSP %q, X-Frame-Options %q", resp.StatusCode, resp.Header.Get("Content-Security-Policy"), resp.Header.Get("X-Frame-Options"))
	}
	if body, _ := apptest.HttpGet(s.URL + "/playground"); !strings.Contains(body, "/graphql") {
		t.Fatal("the playground page lost its endpoint")
	}
}

// TestConsoleRunsUnderItsCSP: in Chromium, the console's pages load under the CSP without a
// violation that breaks them: no script, connection or image is blocked (the browser reports
// each violation in its log; a deliberate inline script at the end proves reports arrive).
// Blocked inline style attributes are logged, not failed: the console still sets three
// (display:block/inline, cosmetic), and removing them is the console's own change.
func TestConsoleRunsUnderItsCSP(t *testing.T) {
	t.Parallel()
	s := apptest.Start(t, "sqlite:"+t.TempDir()+"/csp.db")
	run := s.StartRun(t, "refund order 4", nil)
	page := tab(t, browser(t), false)
	ctx, cancel := context.WithTimeout(page, 60*time.Second)
	defer cancel()
	messages := chromedp.Console(ctx)
	do(t, page,
		chromedp.Navigate(s.URL+"/"), until(`document.body.innerText.length > 0`),
		chromedp.Navigate(s.URL+"/?view=history"), until(`document.body.innerText.length > 0`),
		chromedp.Navigate(s.URL+"/?view=new"), until(`!!document.querySelector("#n-agent option")`),
		chromedp.Navigate(s.URL+"/?run="+run.RunID), until(`document.body.innerText.includes("issue_refund")`),
		js(`{ const el = document.createElement("script"); el.textContent = "window.cspMarker = 1"; document.body.append(el); }`))
	var violations []string
	for m, err := range messages {
		if err != nil {
			t.Fatalf("reading the browser log: %v (violations so far: %q)", err, violations)
		}
		switch {
		case !strings.Contains(m.Text, "Content Security Policy"):
		case strings.Contains(m.Text, "Executing inline script"): // ours: the console has none
			if len(violations) > 0 {
				t.Fatalf("the console violates its CSP: %q", violations)
			}
			return
		case strings.Contains(m.Text, "Applying inline style"):
			t.Logf("tolerated for now: %.100s", m.Text)
		default:
			violations = append(violations, m.Text)
		}
	}
}
