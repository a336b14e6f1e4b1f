package web_test

import (
	"context"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	cdppage "github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"interlock/internal/apptest"
)

// consoleLog records every message the tab's pages write to the browser console, so that a
// test can check the token never appears in one.
func consoleLog(t *testing.T, page context.Context) func() string {
	t.Helper()
	var mu sync.Mutex
	var b strings.Builder
	messages := chromedp.Console(page)
	go func() {
		for m, err := range messages {
			if err != nil {
				return
			}
			mu.Lock()
			b.WriteString(m.Text + "\n")
			mu.Unlock()
		}
	}()
	return func() string {
		mu.Lock()
		defer mu.Unlock()
		return b.String()
	}
}

// noteSocketInits makes every page the tab loads record, for each connection_init it sends,
// whether it carried "Bearer " + the stored token (window.__inits).
func noteSocketInits(t *testing.T, page context.Context) {
	t.Helper()
	_, err := chromedp.Call(page, cdppage.AddScriptToEvaluateOnNewDocument, cdppage.AddScriptToEvaluateOnNewDocumentParams{Source: `
		window.__inits = [];
		const send = WebSocket.prototype.send;
		WebSocket.prototype.send = function (data) {
			try {
				const m = JSON.parse(data);
				if (m.type === "connection_init") {
					const t = localStorage.getItem("interlock.token");
					window.__inits.push(!!t && m.payload && m.payload.authorization === "Bearer " + t);
				}
			} catch {}
			return send.call(this, data);
		};`})
	if err != nil {
		t.Fatal(err)
	}
}

const storedToken = `localStorage.getItem("interlock.token")`

// TestConsoleWithAuthentication: a server with authentication on and no auth section (so an
// admin token made at start). The console link carrying the token signs the console in and the
// token leaves the address; without a token the console asks for one, says when one is refused,
// and signs out; live updates come over the authenticated WebSocket.
func TestConsoleWithAuthentication(t *testing.T) {
	t.Parallel()
	ctx := browser(t)
	s := apptest.Start(t, "sqlite:"+filepath.Join(t.TempDir(), "auth.db"), "--auth=on")
	admin := s.App.AdminToken
	if admin == "" {
		t.Fatal("no admin token was made")
	}

	t.Run("the console link signs in; the token leaves the address; approve is recorded as admin", func(t *testing.T) {
		run := s.SuspendAs(t, admin, "refund order 42 for 30", nil)
		page := tab(t, ctx, true)
		logged := consoleLog(t, page)
		do(t, page, chromedp.Navigate(s.URL+"/#token="+admin), until(`document.querySelectorAll("a[data-run]").length === 1`))
		if href := get(t, page, chromedp.Evaluate[string](`location.href`)); strings.Contains(href, admin) || strings.Contains(href, "token") {
			t.Fatalf("the address still carries the token: %s", href)
		}
		if got := get(t, page, chromedp.Evaluate[string](storedToken)); got != admin {
			t.Fatalf("localStorage holds %q, want the admin token", got)
		}
		if visible := get(t, page, chromedp.Evaluate[bool](`!document.querySelector("#signout").hidden`)); !visible {
			t.Fatal("no Sign out button while signed in")
		}
		do(t, page, chromedp.Click(chromedp.CSS(`a[data-run]`)), chromedp.WaitVisible(chromedp.CSS(`button.approve`)),
			until(`location.search === "?run=`+run.RunID+`"`))
		if href := get(t, page, chromedp.Evaluate[string](`location.href`)); strings.Contains(href, admin) {
			t.Fatalf("the token is back in the address: %s", href)
		}
		if by := textOf(t, page, `#run-started-by`); by != "Started by admin" {
			t.Fatalf("run view says %q, want Started by admin", by)
		}
		do(t, page, chromedp.Click(chromedp.CSS(`button.approve`)),
			until(`document.querySelector("#run-status")?.textContent === "COMPLETED"`),
			until(`document.querySelector('section[aria-label="Decisions"]')?.innerText.includes("by admin")`))
		if ds := decisionsAs(t, s, admin, run.RunID); len(ds) != 1 || ds[0]["decidedBy"] != "admin" {
			t.Fatalf("decisions recorded %v, want one decided by admin", ds)
		}
		if strings.Contains(logged(), admin) {
			t.Fatal("the token was written to the browser console")
		}
	})

	t.Run("without a token the console asks for one; a wrong one is refused; sign out forgets it", func(t *testing.T) {
		s.SuspendAs(t, admin, "refund order 43 for 30", nil)
		url := serve(t, withCSP(s.App.Handler())) // and under the strict policy the server sends
		page := tab(t, ctx, true)
		logged := consoleLog(t, page)
		violations := cspWatch(t, page)
		do(t, page, chromedp.Navigate(url+"/"), chromedp.WaitVisible(chromedp.CSS(`#access-token`)))
		prompt := get(t, page, chromedp.Evaluate[string](`(() => {
			const i = document.querySelector("#access-token");
			return [i.type, i.labels[0]?.textContent, i.form.innerText, document.activeElement === i].join("|");
		})()`))
		if !strings.HasPrefix(prompt, "password|Access token|") || !strings.Contains(prompt, "This server needs an access token") ||
			!strings.Contains(prompt, "printed a link") || !strings.HasSuffix(prompt, "|true") {
			t.Fatalf("token prompt [type|label|text|focused]: %q", prompt)
		}
		screenshot(t, page, "signin.png")
		do(t, page, chromedp.SendKeys(chromedp.CSS(`#access-token`), "not-the-token"), chromedp.Click(chromedp.CSS(`form.signin button[type=submit]`)),
			until(`document.querySelector("#token-error")?.textContent.includes("The token was refused")`))
		if got := get(t, page, chromedp.Evaluate[any](storedToken)); got != nil {
			t.Fatalf("a refused token is kept: %v", got)
		}
		if inv := get(t, page, chromedp.Evaluate[string](`document.querySelector("#access-token").getAttribute("aria-invalid") || ""`)); inv != "true" {
			t.Fatalf("aria-invalid = %q after a refusal", inv)
		}
		do(t, page, chromedp.SendKeys(chromedp.CSS(`#access-token`), admin), chromedp.Click(chromedp.CSS(`form.signin button[type=submit]`)),
			until(`document.querySelectorAll("a[data-run]").length >= 1`))
		if got := get(t, page, chromedp.Evaluate[string](storedToken)); got != admin {
			t.Fatalf("localStorage holds %q after signing in", got)
		}
		if href := get(t, page, chromedp.Evaluate[string](`location.href`)); strings.Contains(href, admin) {
			t.Fatalf("the token is in the address: %s", href)
		}

		// A stored token the server no longer takes (a restart made a new one) is forgotten.
		do(t, page, js(`localStorage.setItem("interlock.token", "from-an-earlier-start")`), chromedp.Reload(),
			until(`document.querySelector("#token-error")?.textContent.includes("The token was refused")`))
		if got := get(t, page, chromedp.Evaluate[any](storedToken)); got != nil {
			t.Fatalf("a refused stored token is kept: %v", got)
		}
		do(t, page, chromedp.SendKeys(chromedp.CSS(`#access-token`), admin), chromedp.Click(chromedp.CSS(`form.signin button[type=submit]`)),
			until(`document.querySelectorAll("a[data-run]").length >= 1`))

		do(t, page, chromedp.Click(chromedp.CSS(`#signout`)), chromedp.WaitVisible(chromedp.CSS(`#access-token`)))
		if got := get(t, page, chromedp.Evaluate[any](storedToken)); got != nil {
			t.Fatalf("sign out kept the token: %v", got)
		}
		if txt := textOf(t, page, `form.signin`); strings.Contains(txt, "refused") {
			t.Fatalf("after signing out the prompt says the token was refused: %q", txt)
		}
		if strings.Contains(logged(), admin) {
			t.Fatal("the token was written to the browser console")
		}
		if v := violations(); len(v) > 0 {
			t.Fatalf("%d CSP violations:\n%s", len(v), strings.Join(v, "\n"))
		}
	})

	t.Run("live updates come over the authenticated WebSocket", func(t *testing.T) {
		// Nothing waits: decide what the earlier subtests left.
		var left struct{ SuspendedRuns struct{ Runs []apptest.Run } }
		s.MustAs(t, admin, `{ suspendedRuns { runs { runId } } }`, nil, &left)
		for _, r := range left.SuspendedRuns.Runs {
			s.MustAs(t, admin, `mutation($id: ID!) { declineToolCall(runId: $id) { status } }`, map[string]any{"id": r.RunID}, nil)
		}
		page := tab(t, ctx, true)
		noteSocketInits(t, page)
		do(t, page, chromedp.Navigate(s.URL+"/#token="+admin), until(`document.body.innerText.includes("Nothing waits")`))
		// The inbox's subscription is running: the WebSocket was accepted.
		deadline := time.Now().Add(10 * time.Second)
		for s.App.ActiveOperations() == 0 {
			if time.Now().After(deadline) {
				t.Fatal("the inbox's subscription never started")
			}
			time.Sleep(20 * time.Millisecond)
		}
		run := s.SuspendAs(t, admin, "refund order 44 for 30", nil)
		do(t, page, until(fmt.Sprintf(`!!document.querySelector('a[data-run=%q]')`, run.RunID)))
		inits := get(t, page, chromedp.Evaluate[[]bool](`window.__inits`))
		if len(inits) == 0 || strings.Contains(fmt.Sprint(inits), "false") {
			t.Fatalf("connection_init carried the token: %v, want all true", inits)
		}
	})
}

// TestConsoleShowsForbidden: the server's FORBIDDEN is said next to the decision buttons, and
// what the person typed stays: a viewer may not approve; with separation of duties, who started
// a run may not approve it (but may decline it).
func TestConsoleShowsForbidden(t *testing.T) {
	t.Parallel()
	ctx := browser(t)

	t.Run("a viewer approves", func(t *testing.T) {
		s := apptest.AuthServer(t, "sqlite:"+filepath.Join(t.TempDir(), "viewer.db"), "")
		run := s.SuspendAs(t, apptest.TokenOf("root"), "refund order 42 for 30", nil)
		page := tab(t, ctx, true)
		// The desk is read-only for her (TestConsoleDeskViewer): its controls are hidden, not
		// gone, so a decision sent anyway (by script here) still shows the server's refusal.
		do(t, page, chromedp.Navigate(s.URL+"/?run="+run.RunID+"#token="+apptest.TokenOf("vera")), until(`!!document.querySelector("button.approve")`),
			until(`document.querySelector("main").dataset.readonly === "true"`),
			js(`document.querySelector(".pending input[type=text]").value = "half typed"`),
			js(`document.querySelector("button.approve").click()`),
			until(`document.querySelector(".pending .decision-error")?.textContent.includes("approver")`))
		msg := get(t, page, chromedp.Evaluate[string](`document.querySelector(".pending .decision-error").textContent`))
		if !strings.Contains(msg, "vera") || !strings.Contains(msg, "viewer") {
			t.Fatalf("the refusal says %q, want the server's message naming vera and her role", msg)
		}
		state := get(t, page, chromedp.Evaluate[string](`[document.querySelector(".pending input[type=text]").value,
			document.querySelector("button.approve").disabled, document.querySelector(".pending .decision-error").getAttribute("role")].join("|")`))
		if state != "half typed|false|alert" {
			t.Fatalf("after the refusal [reason|approve disabled|role] is %q", state)
		}
		if st := runStatusAs(t, s, apptest.TokenOf("root"), run.RunID); st != "SUSPENDED" {
			t.Fatalf("after a refused approval the run is %s", st)
		}
		screenshot(t, page, "forbidden.png")
	})

	t.Run("separation of duties: who started the run approves, then declines", func(t *testing.T) {
		s := apptest.AuthServer(t, "sqlite:"+filepath.Join(t.TempDir(), "sod.db"), "  separationOfDuties: true\n")
		run := s.SuspendAs(t, apptest.TokenOf("alice"), "refund order 7 for 30", nil)
		page := tab(t, ctx, true)
		do(t, page, chromedp.Navigate(s.URL+"/#token="+apptest.TokenOf("alice")), until(`document.querySelectorAll("a[data-run]").length === 1`),
			chromedp.Click(chromedp.CSS(`a[data-run]`)), chromedp.WaitVisible(chromedp.CSS(`button.approve`)))
		if by := textOf(t, page, `#run-started-by`); by != "Started by alice" {
			t.Fatalf("run view says %q, want Started by alice", by)
		}
		do(t, page, chromedp.SendKeys(chromedp.CSS(`.pending input[type=text]`), "not mine to approve"),
			chromedp.Click(chromedp.CSS(`button.approve`)),
			until(`document.querySelector(".pending .decision-error")?.textContent.includes("separation of duties")`))
		if v := get(t, page, chromedp.Evaluate[string](`document.querySelector(".pending input[type=text]").value`)); v != "not mine to approve" {
			t.Fatalf("the reason typed is now %q", v)
		}
		do(t, page, chromedp.Click(chromedp.CSS(`button.decline`)),
			until(`document.querySelector("#run-status")?.textContent === "COMPLETED"`),
			until(`document.querySelector('section[aria-label="Decisions"]')?.innerText.includes("by alice")`))
		if ds := decisionsAs(t, s, apptest.TokenOf("root"), run.RunID); len(ds) != 1 || ds[0]["kind"] != "DECLINED" || ds[0]["decidedBy"] != "alice" {
			t.Fatalf("decisions %v, want one DECLINED by alice", ds)
		}
	})
}

// TestConsoleLinkTakesTheTokenAsWritten: a token made with `openssl rand -base64 32` (as
// docs/access.md says) holds "+", "/" and "="; the console link carries it as it is, or %-escaped, and
// the console must keep exactly that token, not read "+" as a space. The rest of the fragment
// stays in the address.
func TestConsoleLinkTakesTheTokenAsWritten(t *testing.T) {
	t.Parallel()
	ctx := browser(t)
	const token = "q+9Zr/Lm+0a=="
	s := apptest.AuthServer(t, "sqlite:"+filepath.Join(t.TempDir(), "plus.db"),
		fmt.Sprintf("    - {subject: plus, role: admin, sha256: %s}\n", apptest.Sha256Hex(token)))
	s.SuspendAs(t, token, "refund order 42 for 30", nil)
	for name, link := range map[string]string{
		"as written": "#token=" + token + "&keep=1",
		"escaped":    "#keep=1&token=" + url.QueryEscape(token),
		"twice":      "#token=" + token + "&keep=1&token=another", // the first counts; none stays
	} {
		t.Run(name, func(t *testing.T) {
			page := tab(t, ctx, true)
			do(t, page, chromedp.Navigate(s.URL+"/"+link), until(`document.querySelectorAll("a[data-run]").length === 1`))
			if got := get(t, page, chromedp.Evaluate[string](storedToken)); got != token {
				t.Fatalf("localStorage holds %q, want %q", got, token)
			}
			if hash := get(t, page, chromedp.Evaluate[string](`location.hash`)); hash != "#keep=1" {
				t.Fatalf("the address's fragment is %q, want #keep=1", hash)
			}
		})
	}
	t.Run("a bare token key signs nothing in and leaves the address", func(t *testing.T) {
		page := tab(t, ctx, true)
		do(t, page, chromedp.Navigate(s.URL+"/#token&keep=1"), chromedp.WaitVisible(chromedp.CSS(`#access-token`)))
		if got := get(t, page, chromedp.Evaluate[string](`String(`+storedToken+`)`)); got != "null" {
			t.Fatalf("localStorage holds %q, want no token", got)
		}
		if hash := get(t, page, chromedp.Evaluate[string](`location.hash`)); hash != "#keep=1" {
			t.Fatalf("the address's fragment is %q, want #keep=1", hash)
		}
	})
}

// decisionsAs reads a run's decisions on s with the token.
func decisionsAs(t *testing.T, s *apptest.Server, token, runID string) []map[string]any {
	t.Helper()
	var out struct {
		Run struct{ Decisions []map[string]any }
	}
	s.MustAs(t, token, `query($id: ID!) { run(runId: $id) { decisions { kind decidedBy decidedAt } } }`, map[string]any{"id": runID}, &out)
	return out.Run.Decisions
}

// runStatusAs reads a run's status on s with the token.
func runStatusAs(t *testing.T, s *apptest.Server, token, runID string) string {
	t.Helper()
	var out struct{ Run struct{ Status string } }
	s.MustAs(t, token, `query($id: ID!) { run(runId: $id) { status } }`, map[string]any{"id": runID}, &out)
	return out.Run.Status
}
